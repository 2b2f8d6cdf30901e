"""Chapter 4 - LoLCATs ablations: attention transfer, LoRA, window + linear attention: the chapter's parameters.

The paper's numbers and the verdict rules are in :mod:`hybridlib.findings.lolcats.report`. Where the protocol
follows the paper (Zhang et al., ICLR 2025) the default says so; where it cannot, the parameter's doc says why.
"""

from hybridlib.data.languages import BIBLE_LANGUAGES
from hybridlib.params import ChapterSpec, Param

_ALL = ("seminar", "gpu", "paper")

SPEC = ChapterSpec(
    name="lolcats",
    title="LoLCATs ablations: attention transfer, LoRA and window + linear attention",
    notebook="04_lolcats.ipynb",
    claim=(
        "Linearising a pretrained Transformer works when the new feature maps are first trained to reproduce "
        "softmax attention outputs (attention transfer) and then LoRA-adapted; a small softmax window helps most."
    ),
    params=(
        Param(
            "models",
            list,
            "pretrained softmax models to linearise (the first one runs every ablation)",
            item=str,
            choices=("tiny-teacher", "smollm2-135m", "gemma3-270m"),
            defaults={
                "seminar": ["tiny-teacher"],
                "gpu": ["smollm2-135m", "gemma3-270m"],
                "paper": ["smollm2-135m", "gemma3-270m"],
            },
        ),
        Param(
            "feature_maps",
            list,
            "feature maps compared",
            item=str,
            choices=("hedgehog", "t2r"),
            defaults={p: ["hedgehog", "t2r"] for p in _ALL},
        ),
        Param(
            "window",
            int,
            "softmax window of the window + linear hybrid",
            minimum=1,
            unit="tokens",
            defaults={"seminar": 16, "gpu": 64, "paper": 64},
        ),
        Param(
            "terraced",
            bool,
            "terraced blocks of `window` (as in the paper, Table 5: each query sees its own "
            "block and the previous one) instead of a sliding window; the Table 18 sweep windows stay sliding, "
            "as in the paper",
            defaults={p: True for p in _ALL},
        ),
        Param(
            "window_sweep",
            list,
            "extra sliding window sizes of the Table 18 sweep (besides `window`, sliding and terraced)",
            item=int,
            minimum=1,
            unit="tokens",
            defaults={"seminar": [4], "gpu": [4, 256], "paper": [4, 16, 256]},
        ),
        Param(
            "transfer_steps",
            int,
            "attention-transfer optimiser steps",
            minimum=1,
            defaults={"seminar": 20, "gpu": 100, "paper": 1000},
        ),
        Param(
            "transfer_sweep",
            list,
            "extra transfer step counts of the Table 23 sweep (besides 0 and `transfer_steps`)",
            item=int,
            minimum=1,
            defaults={"seminar": [5], "gpu": [25], "paper": [100, 300]},
        ),
        Param(
            "lora_steps",
            int,
            "LoRA optimiser steps",
            minimum=1,
            defaults={"seminar": 20, "gpu": 100, "paper": 1000},
        ),
        Param(
            "step_matched",
            bool,
            "LoRA without transfer trains `transfer_steps + lora_steps` steps, as many "
            "as transfer + LoRA together, as the paper does; False: `lora_steps`",
            defaults={p: True for p in _ALL},
        ),
        Param(
            "lora_lr",
            float,
            "LoRA peak learning rate (paper: 1e-4; 20 seminar steps barely move adapters at "
            "1e-4, so the seminar preset uses 1e-3 and says so)",
            minimum=1e-7,
            defaults={"seminar": 1e-3, "gpu": 1e-4, "paper": 1e-4},
        ),
        Param(
            "lora_lr_sweep",
            list,
            "further LoRA learning rates at which Table 2 (first model, first feature "
            "map) is repeated, to show whether its ordering depends on the learning rate",
            item=float,
            minimum=1e-7,
            defaults={"seminar": [], "gpu": [1e-3], "paper": [1e-3]},
        ),
        Param(
            "batch_size",
            int,
            "sequences per optimiser step",
            minimum=1,
            defaults={"seminar": 4, "gpu": 16, "paper": 16},
        ),
        Param(
            "seq_len",
            int,
            "training sequence length",
            minimum=16,
            unit="tokens",
            defaults={"seminar": 128, "gpu": 512, "paper": 1024},
        ),
        Param(
            "languages",
            list,
            "corpus languages for training and evaluation",
            item=str,
            choices=BIBLE_LANGUAGES,
            defaults={
                "seminar": ["eng", "fra"],
                "gpu": ["eng", "fra", "deu", "rus"],
                "paper": ["eng", "fra", "deu", "rus"],
            },
        ),
        Param(
            "eval_sequences",
            int,
            "held-out perplexity sequences per language",
            minimum=1,
            defaults={"seminar": 4, "gpu": 16, "paper": 32},
        ),
        Param(
            "cloze_items",
            int,
            "verse-cloze items per language",
            minimum=4,
            defaults={"seminar": 8, "gpu": 32, "paper": 100},
        ),
        Param(
            "passkey_lengths",
            list,
            "passkey prompt lengths",
            item=int,
            minimum=64,
            unit="tokens",
            defaults={"seminar": [128], "gpu": [256, 512], "paper": [1024, 8192]},
        ),
        Param(
            "passkey_depths",
            list,
            "passkey depths (0 is the start of the filler, 1 its end)",
            item=float,
            minimum=0.0,
            maximum=1.0,
            defaults={p: [0.0, 0.25, 0.5, 0.75, 1.0] for p in _ALL},
        ),
        Param(
            "passkey_per_cell",
            int,
            "passkey prompts per (length, depth)",
            minimum=1,
            defaults={"seminar": 2, "gpu": 10, "paper": 20},
        ),
        Param(
            "throughput_batches",
            list,
            "batch sizes of the generation benchmark (empty: skipped; CUDA only)",
            item=int,
            minimum=1,
            defaults={"seminar": [], "gpu": [1, 16, 64, 256, 1024], "paper": [1, 16, 64, 256, 1024, 2048]},
        ),
        Param("seed", int, "random seed of the first replicate", minimum=0, defaults={p: 0 for p in _ALL}),
        Param(
            "seeds",
            int,
            "replicates per arm (seeds `seed`, `seed + 1`, ...: data order and the initial "
            "weights of the adapters; feature maps start at the identity); every rule needs at least 3, and with the "
            "1 seed of the seminar preset (its CPU budget) the rules say `not tested`",
            minimum=1,
            defaults={"seminar": 1, "gpu": 3, "paper": 3},
        ),
        Param(
            "parallel",
            int,
            "replicates (model and seed) converted at once, each in its own process, on the "
            "GPUs in turn (conversions of these small models are host-bound, so several share one GPU; six on "
            "one H200 ran out of its memory); 1: one after another in the notebook",
            minimum=1,
            defaults={"seminar": 1, "gpu": 4, "paper": 4},
        ),
    ),
)
