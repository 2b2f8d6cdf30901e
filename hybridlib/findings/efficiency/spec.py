"""Chapter 1 - efficiency: memory, speed and retrieval of hybrid vs full attention as context grows."""

from hybridlib.data.languages import UDHR_LANGUAGES as LANGUAGES
from hybridlib.params import ChapterSpec, Param
from kernels.shapes import SHAPES as MODEL_SHAPES

TOKENIZERS = ("gemma3-270m", "smollm2-135m", "qwen", "tekken", "gpt2", "tiny-teacher")
SHAPES = tuple(MODEL_SHAPES)

SPEC = ChapterSpec(
    name="efficiency",
    title="Efficiency: memory, speed and retrieval as multilingual context grows",
    notebook="01_efficiency.ipynb",
    claim=(
        "Hybrid models hold far longer contexts than full attention for the same memory, which matters more "
        "for languages whose text tokenises into many more tokens; their retrieval deficit shrinks as context grows."
    ),
    params=(
        Param(
            "tokenizers",
            list,
            "tokenizers compared for token inflation",
            item=str,
            choices=TOKENIZERS,
            defaults={p: list(TOKENIZERS) for p in ("seminar", "gpu", "paper")},
        ),
        Param(
            "languages",
            list,
            "UDHR language codes (English first is the reference)",
            item=str,
            choices=LANGUAGES,
            defaults={p: list(LANGUAGES) for p in ("seminar", "gpu", "paper")},
        ),
        Param(
            "device",
            str,
            "where the cost benchmark runs",
            choices=("cpu", "cuda"),
            defaults={"seminar": "cpu", "gpu": "cuda", "paper": "cuda"},
        ),
        Param(
            "bench_shapes",
            list,
            "attention head shapes benchmarked",
            item=str,
            choices=SHAPES,
            defaults={"seminar": ["smollm2-135m"], "gpu": list(SHAPES), "paper": list(SHAPES)},
        ),
        Param(
            "bench_lengths",
            list,
            "context lengths of the cost benchmark",
            item=int,
            minimum=16,
            unit="tokens",
            defaults={
                "seminar": [512, 1024, 2048, 4096],
                "gpu": [512, 2048, 8192, 32768, 65536, 131072],
                "paper": [8192, 32768, 65536, 131072],
            },
        ),
        Param(
            "bench_repeats",
            int,
            "repeats of the prefill benchmark behind the 64K time ratio (the rule's unit)",
            minimum=1,
            defaults={"seminar": 3, "gpu": 3, "paper": 5},
        ),
        Param(
            "needle_lengths",
            list,
            "haystack lengths of the retrieval test (Gemma 3 270M tokens)",
            item=int,
            minimum=64,
            unit="tokens",
            defaults={
                "seminar": [128, 256, 512],
                "gpu": [512, 2048, 8192, 32768],
                "paper": [8192, 32768, 65536, 131072],
            },
        ),
        Param(
            "needle_languages",
            list,
            "haystack languages of the needle test",
            item=str,
            choices=LANGUAGES,
            defaults={"seminar": ["eng", "yor", "mya"], "gpu": list(LANGUAGES), "paper": list(LANGUAGES)},
        ),
        Param(
            "needle_depths",
            list,
            "needle positions as a fraction of the haystack",
            item=float,
            minimum=0.0,
            maximum=1.0,
            defaults={"seminar": [0.5], "gpu": [0.1, 0.3, 0.5, 0.7, 0.9], "paper": [0.1, 0.3, 0.5, 0.7, 0.9]},
        ),
        Param(
            "needle_samples",
            int,
            "needles per (language, length, depth) cell (the rule needs 3 cells at the longest length)",
            minimum=1,
            # gpu: 5 depths x 40 = the replicate plan's 200 cells (its cap for efficiency.needle.language), fixed
            # before the run it plans
            defaults={"seminar": 3, "gpu": 40, "paper": 4},
        ),
        Param(
            "mqar_pairs",
            list,
            "key-value pairs per MQAR sequence (trained on all, evaluated on each)",
            item=int,
            minimum=1,
            defaults={"seminar": [2, 4], "gpu": [8, 16, 32], "paper": [16, 32, 64]},
        ),
        Param(
            "mqar_lengths",
            list,
            "MQAR sequence lengths evaluated (the first is the training length)",
            item=int,
            minimum=8,
            unit="tokens",
            defaults={
                "seminar": [32, 64, 128],
                "gpu": [256, 512, 1024, 2048],
                "paper": [512, 1024, 2048, 4096],
            },
        ),
        Param(
            "mqar_vocab",
            int,
            "MQAR vocabulary (half keys, half values)",
            minimum=8,
            defaults={"seminar": 64, "gpu": 512, "paper": 8192},
        ),
        Param(
            "mqar_width",
            int,
            "hidden size of the tiny MQAR models (4 layers, 2 heads)",
            minimum=8,
            defaults={"seminar": 64, "gpu": 128, "paper": 256},
        ),
        Param(
            "mqar_steps",
            int,
            "MQAR training steps per model",
            minimum=1,
            defaults={"seminar": 120, "gpu": 4000, "paper": 20000},
        ),
        Param(
            "mqar_batch",
            int,
            "MQAR sequences per training step",
            minimum=1,
            defaults={"seminar": 32, "gpu": 128, "paper": 256},
        ),
        Param(
            "mqar_seeds",
            int,
            "MQAR trainings of the judged stacks (seeds seed, seed + 1, ...; the rule needs 3; the "
            "other stacks train once)",
            minimum=1,
            defaults={"seminar": 1, "gpu": 3, "paper": 3},
        ),
        Param(
            "mqar_workers",
            int,
            "MQAR trainings at once, each in its own process on the chapter's device (the tiny models are "
            "host-bound, so several share one GPU); 1: one after another in the notebook",
            minimum=1,
            defaults={"seminar": 1, "gpu": 6, "paper": 6},
        ),
        Param(
            "mqar_lr",
            float,
            "MQAR peak learning rate (cosine to a tenth, 5% warm-up)",
            minimum=0.0,
            defaults={"seminar": 1e-2, "gpu": 3e-3, "paper": 1e-3},
        ),
        Param("seed", int, "random seed", minimum=0, defaults={"seminar": 0, "gpu": 0, "paper": 0}),
    ),
)
