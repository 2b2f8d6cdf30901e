"""Chapter 3 - the first full-attention layer: the largest cross-lingual event in hybrids."""

from hybridlib.chapters.efficiency import LANGUAGES
from hybridlib.params import ChapterSpec, Param

SPEC = ChapterSpec(
    name="first_fa",
    title="The first full-attention layer",
    notebook="03_first_fa.ipynb",
    claim=(
        "In hybrids with recurrent mixers the first full-attention layer adds the largest cross-lingual change "
        "to the residual stream (attn_delta SoftCKA spike); sliding-window hybrids show no such event."
    ),
    params=(
        Param("models", list, "models probed", item=str,
              defaults={"seminar": ["tiny-teacher"], "gpu": ["smollm2-135m"], "paper": ["qwen3-4b-base"]}),
        Param("languages", list, "UDHR languages compared with English", item=str, choices=LANGUAGES,
              defaults={p: list(LANGUAGES) for p in ("seminar", "gpu", "paper")}),
        Param("articles", int, "UDHR articles per language", minimum=2, unit="articles",
              defaults={"seminar": 10, "gpu": 30, "paper": 30}),
        Param("bootstrap", int, "bootstrap resamples over articles", minimum=10,
              defaults={"seminar": 200, "gpu": 1000, "paper": 1000}),
        Param("seed", int, "random seed", minimum=0, defaults={"seminar": 0, "gpu": 0, "paper": 0}),
    ),
    depends_on=("layout_distillation",),
)
