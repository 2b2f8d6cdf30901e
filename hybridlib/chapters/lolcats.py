"""Chapter 4 - LoLCATs ablations: attention transfer, LoRA, window + linear attention.

Besides the chapter's parameters, this module holds the paper's numbers the chapter compares against
(Zhang et al., ICLR 2025; Llama 3 8B unless stated; see PAPERS.md section B).
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
        Param("models", list, "pretrained softmax models to linearise (the first one runs every ablation)",
              item=str, choices=("tiny-teacher", "smollm2-135m", "gemma3-270m"),
              defaults={"seminar": ["tiny-teacher"], "gpu": ["smollm2-135m", "gemma3-270m"],
                        "paper": ["smollm2-135m", "gemma3-270m"]}),
        Param("feature_maps", list, "feature maps compared", item=str, choices=("hedgehog", "t2r"),
              defaults={p: ["hedgehog", "t2r"] for p in _ALL}),
        Param("window", int, "softmax window of the window + linear hybrid", minimum=1, unit="tokens",
              defaults={"seminar": 16, "gpu": 64, "paper": 64}),
        Param("window_sweep", list, "extra window sizes of the Table 18 sweep (besides `window` and terraced `window`)",
              item=int, minimum=1, unit="tokens", defaults={"seminar": [4], "gpu": [4, 256], "paper": [4, 16, 256]}),
        Param("transfer_steps", int, "attention-transfer optimiser steps", minimum=1,
              defaults={"seminar": 20, "gpu": 100, "paper": 1000}),
        Param("transfer_sweep", list, "extra transfer step counts of the Table 23 sweep (besides 0 and `transfer_steps`)",
              item=int, minimum=1, defaults={"seminar": [5], "gpu": [25], "paper": [100, 300]}),
        Param("lora_steps", int, "LoRA optimiser steps", minimum=1,
              defaults={"seminar": 20, "gpu": 100, "paper": 1000}),
        Param("batch_size", int, "sequences per optimiser step", minimum=1,
              defaults={"seminar": 4, "gpu": 16, "paper": 16}),
        Param("seq_len", int, "training sequence length", minimum=16, unit="tokens",
              defaults={"seminar": 128, "gpu": 512, "paper": 1024}),
        Param("languages", list, "corpus languages for training and evaluation", item=str, choices=BIBLE_LANGUAGES,
              defaults={"seminar": ["eng", "fra"], "gpu": ["eng", "fra", "deu", "rus"],
                        "paper": ["eng", "fra", "deu", "rus"]}),
        Param("eval_sequences", int, "held-out perplexity sequences per language", minimum=1,
              defaults={"seminar": 4, "gpu": 16, "paper": 32}),
        Param("cloze_items", int, "verse-cloze items per language", minimum=4,
              defaults={"seminar": 8, "gpu": 32, "paper": 100}),
        Param("passkey_lengths", list, "passkey prompt lengths", item=int, minimum=64, unit="tokens",
              defaults={"seminar": [128], "gpu": [256, 512], "paper": [1024, 8192]}),
        Param("passkey_depths", list, "passkey depths (0 is the start of the filler, 1 its end)", item=float, minimum=0.0,
              maximum=1.0,
              defaults={p: [0.0, 0.25, 0.5, 0.75, 1.0] for p in _ALL}),
        Param("passkey_per_cell", int, "passkey prompts per (length, depth)", minimum=1,
              defaults={"seminar": 2, "gpu": 10, "paper": 20}),
        Param("throughput_batches", list, "batch sizes of the generation benchmark (empty: skipped; CUDA only)",
              item=int, minimum=1, defaults={"seminar": [], "gpu": [1, 16, 64, 256, 1024],
                                             "paper": [1, 16, 64, 256, 1024, 2048]}),
        Param("seed", int, "random seed", minimum=0, defaults={p: 0 for p in _ALL}),
    ),
)

# Table 2 (Alpaca validation perplexity) - LoLCATs stages, Llama 3 8B.
PAPER_TABLE2 = {
    "hedgehog": {"swap": 2448.01, "transfer": 60.86, "lora": 9.02, "transfer+lora": 3.90},
    "t2r": {"swap": 1539.39, "transfer": 79.33, "lora": 16.05, "transfer+lora": 4.11},
}
# Table 5 (6-task average / MMLU) - window x transfer, after LoRA.
PAPER_TABLE5 = {
    ("hedgehog", False, False): (44.20, 23.80), ("hedgehog", False, True): (55.32, 23.80),
    ("hedgehog", True, False): (68.78, 45.80), ("hedgehog", True, True): (70.66, 52.77),
    ("t2r", False, False): (38.84, 23.20), ("t2r", False, True): (54.83, 23.10),
    ("t2r", True, False): (39.52, 23.80), ("t2r", True, True): (68.28, 40.70),
}  # key: (feature map, window, transfer) -> (6-task avg, MMLU)
PAPER_TABLE18 = {"4": 40.8, "16": 50.3, "64": 50.3, "256": 41.5, "terraced 64": 52.8}  # MMLU by window
PAPER_TABLE23 = {0: 56.86, 200: 73.68, 1800: 73.66}  # 5-task average by transfer steps
PAPER_TABLE21 = {"converted with Alpaca": 0.0, "converted with passkey data": 100.0}  # passkey %, 8192 tokens
PAPER_FIG8 = "~3x FlashAttention-2's generation throughput at batch 2048; FA2 out of memory from batch 64"
