"""Chapter 5 - layout distillation: which full-attention layout learns multilingual modelling fastest.

Recipe values (tokens, lengths, learning rates) equal ``hybridlib.distill.RECIPES`` of each preset's teacher
(checked in tests/test_distill.py), so ``distill.load_student(teacher, layout)`` in later chapters returns the
students this chapter trained.
"""

from hybridlib.params import ChapterSpec, Param

LAYOUTS = ("standard_periodic", "reverse_periodic", "sandwich", "interleaved_sandwich", "endpoint_spread",
           "periodic_first_at_0")
_ALL = ("seminar", "gpu", "paper")

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
              defaults={p: list(LAYOUTS) for p in _ALL}),
        Param("fa_fraction", float, "share of layers kept full attention (rounded half up)", minimum=0.0,
              exclusive_minimum=True, maximum=1.0,
              defaults={p: 0.25 for p in _ALL}),
        Param("train_tokens", int, "distillation tokens per layout", minimum=1, unit="tokens",
              defaults={"seminar": 16_384, "gpu": 1_048_576, "paper": 1_000_000_000}),
        Param("seq_len", int, "packed sequence length", minimum=16, unit="tokens",
              defaults={"seminar": 128, "gpu": 512, "paper": 1024}),
        Param("batch_size", int, "sequences per optimizer step", minimum=1, unit="sequences",
              defaults={"seminar": 4, "gpu": 32, "paper": 96}),
        Param("lr_recurrent", float, "peak learning rate of the Gated DeltaNet parameters", minimum=0.0,
              defaults={"seminar": 2.1e-3, "gpu": 7e-4, "paper": 7e-5}),
        Param("lr_rest", float, "peak learning rate of every other parameter", minimum=0.0,
              defaults={"seminar": 6e-4, "gpu": 2e-4, "paper": 2e-5}),
        Param("eval_every_tokens", int, "validation interval", minimum=1, unit="tokens",
              defaults={"seminar": 2_048, "gpu": 65_536, "paper": 10_000_000}),
        Param("swa_window", int, "window of the sliding-window control's non-FA layers", minimum=1, unit="tokens",
              defaults={"seminar": 16, "gpu": 128, "paper": 256}),
        Param("data_seed", int, "training-data shuffle seed (the held-out split does not depend on it)", minimum=0,
              defaults={p: 0 for p in _ALL}),
        Param("swa_control", bool, "also distil the sliding-window control (standard periodic layout)",
              defaults={p: True for p in _ALL}),
        Param("replicate", bool, "rerun the baseline and the best FA-first layout with data_seed + 1",
              defaults={"seminar": False, "gpu": True, "paper": True}),
        Param("other_teachers", list, "more teachers distilled into the baseline and the best FA-first layout "
              "(each with its own recipe)", item=str, choices=("tiny-teacher", "smollm2-135m", "gemma3-270m",
                                                               "qwen3-4b-base", "granite-4.1-3b-base"),
              defaults={"seminar": [], "gpu": ["gemma3-270m"], "paper": ["granite-4.1-3b-base"]}),
        Param("test_docs_per_language", int, "test chapters per language for R and delta", minimum=1,
              unit="documents", defaults={"seminar": 4, "gpu": 16, "paper": 1000}),
        Param("bootstrap", int, "bootstrap resamples over test documents", minimum=10,
              defaults={"seminar": 300, "gpu": 1000, "paper": 1000}),
    ),
)
