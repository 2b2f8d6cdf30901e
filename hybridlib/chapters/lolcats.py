"""Chapter 4 - LoLCATs ablations: attention transfer, LoRA, window + linear attention."""

from hybridlib.params import ChapterSpec, Param

SPEC = ChapterSpec(
    name="lolcats",
    title="LoLCATs ablations: attention transfer, LoRA and window + linear attention",
    notebook="04_lolcats.ipynb",
    claim=(
        "Linearising a pretrained Transformer works when the new feature maps are first trained to reproduce "
        "softmax attention outputs (attention transfer) and then LoRA-adapted; a small softmax window helps most."
    ),
    params=(
        Param("model", str, "pretrained softmax model to linearise",
              choices=("tiny-teacher", "smollm2-135m", "gemma3-270m"),
              defaults={"seminar": "tiny-teacher", "gpu": "smollm2-135m", "paper": "smollm2-135m"}),
        Param("feature_maps", list, "feature maps compared", item=str, choices=("hedgehog", "t2r"),
              defaults={p: ["hedgehog", "t2r"] for p in ("seminar", "gpu", "paper")}),
        Param("window", int, "softmax window of the window + linear hybrid", minimum=1, unit="tokens",
              defaults={"seminar": 16, "gpu": 64, "paper": 64}),
        Param("transfer_steps", int, "attention-transfer optimiser steps", minimum=0,
              defaults={"seminar": 40, "gpu": 400, "paper": 1000}),
        Param("lora_steps", int, "LoRA optimiser steps", minimum=0,
              defaults={"seminar": 40, "gpu": 400, "paper": 1000}),
        Param("seq_len", int, "training sequence length", minimum=16, unit="tokens",
              defaults={"seminar": 128, "gpu": 512, "paper": 1024}),
        Param("seed", int, "random seed", minimum=0, defaults={"seminar": 0, "gpu": 0, "paper": 0}),
    ),
)
