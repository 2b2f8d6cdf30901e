"""Chapter 1 - efficiency: memory, speed and retrieval of hybrid vs full attention as context grows."""

from hybridlib.params import ChapterSpec, Param

TOKENIZERS = ("gemma3-270m", "smollm2-135m", "qwen", "tekken", "gpt2", "tiny-teacher")
LANGUAGES = ("eng", "tel", "mal", "tam", "mya", "khm", "tha", "arb", "cmn_hans", "rus", "hin", "yor", "sot")
SHAPES = ("qwen3-4b", "gemma3-270m", "smollm2-135m")

SPEC = ChapterSpec(
    name="efficiency",
    title="Efficiency: memory, speed and retrieval as multilingual context grows",
    notebook="01_efficiency.ipynb",
    claim=(
        "Hybrid models hold far longer contexts than full attention for the same memory, which matters more "
        "for languages whose text tokenises into many more tokens; their retrieval deficit shrinks as context grows."
    ),
    params=(
        Param("tokenizers", list, "tokenizers compared for token inflation", item=str, choices=TOKENIZERS,
              defaults={p: list(TOKENIZERS) for p in ("seminar", "gpu", "paper")}),
        Param("languages", list, "UDHR language codes (English first is the reference)", item=str,
              choices=LANGUAGES, defaults={p: list(LANGUAGES) for p in ("seminar", "gpu", "paper")}),
        Param("device", str, "where the cost benchmark runs", choices=("cpu", "cuda"),
              defaults={"seminar": "cpu", "gpu": "cuda", "paper": "cuda"}),
        Param("bench_shapes", list, "attention head shapes benchmarked", item=str, choices=SHAPES,
              defaults={"seminar": ["smollm2-135m"], "gpu": list(SHAPES), "paper": list(SHAPES)}),
        Param("bench_lengths", list, "context lengths of the cost benchmark", item=int, minimum=16, unit="tokens",
              defaults={"seminar": [512, 1024, 2048, 4096],
                        "gpu": [512, 2048, 8192, 32768, 131072],
                        "paper": [8192, 32768, 65536, 131072]}),
        Param("needle_lengths", list, "haystack lengths of the retrieval test", item=int, minimum=16, unit="tokens",
              defaults={"seminar": [128, 256, 512], "gpu": [512, 2048, 8192, 32768],
                        "paper": [8192, 32768, 65536, 131072]}),
        Param("seed", int, "random seed", minimum=0, defaults={"seminar": 0, "gpu": 0, "paper": 0}),
    ),
)
