"""Chapter 5 - layout distillation: which full-attention layout learns multilingual modelling fastest."""

from hybridlib.params import ChapterSpec, Param

LAYOUTS = ("standard_periodic", "reverse_periodic", "sandwich", "interleaved_sandwich", "endpoint_spread",
           "periodic_first_at_0")

SPEC = ChapterSpec(
    name="layout_distillation",
    title="Layout distillation: where should the full-attention layers go?",
    notebook="05_layout_distillation.ipynb",
    claim=(
        "At a fixed 25% full-attention budget, Gated DeltaNet hybrids whose first layer is full attention learn "
        "multilingual modelling from a full-attention teacher much faster than the standard periodic layout."
    ),
    params=(
        Param("teacher", str, "full-attention teacher", choices=("tiny-teacher", "smollm2-135m", "gemma3-270m",
                                                                  "qwen3-4b-base", "granite-4.1-3b-base"),
              defaults={"seminar": "tiny-teacher", "gpu": "smollm2-135m", "paper": "qwen3-4b-base"}),
        Param("layouts", list, "full-attention layouts raced", item=str, choices=LAYOUTS,
              defaults={p: list(LAYOUTS) for p in ("seminar", "gpu", "paper")}),
        Param("fa_fraction", float, "share of layers kept full attention", minimum=0.0,
              defaults={"seminar": 0.25, "gpu": 0.25, "paper": 0.25}),
        Param("train_tokens", int, "distillation tokens per layout", minimum=1, unit="tokens",
              defaults={"seminar": 200_000, "gpu": 20_000_000, "paper": 1_000_000_000}),
        Param("seq_len", int, "packed sequence length", minimum=16, unit="tokens",
              defaults={"seminar": 128, "gpu": 512, "paper": 1024}),
        Param("data_seed", int, "training-data shuffle seed (the held-out split does not depend on it)", minimum=0,
              defaults={"seminar": 0, "gpu": 0, "paper": 0}),
    ),
)
