"""Chapter 2 - SoftCKA: layer-wise cross-lingual alignment in hybrid vs full-attention models."""

from hybridlib.chapters.efficiency import LANGUAGES
from hybridlib.params import ChapterSpec, Param

SPEC = ChapterSpec(
    name="softcka",
    title="SoftCKA: layer-wise cross-lingual alignment",
    notebook="02_softcka.ipynb",
    claim=(
        "Hybrids align languages less than full-attention models, and their layer-wise SoftCKA curves are jagged, "
        "jumping at full-attention layers, where non-hybrids rise smoothly through the middle and fall at the end."
    ),
    params=(
        Param("models", list, "models probed (hub names need the paper preset)", item=str,
              defaults={"seminar": ["tiny-teacher"], "gpu": ["gemma3-270m", "smollm2-135m"],
                        "paper": ["qwen3-4b-base"]}),
        Param("languages", list, "UDHR languages compared with English", item=str, choices=LANGUAGES,
              defaults={p: list(LANGUAGES) for p in ("seminar", "gpu", "paper")}),
        Param("articles", int, "UDHR articles per language", minimum=2, unit="articles",
              defaults={"seminar": 10, "gpu": 30, "paper": 30}),
        Param("bandwidth", str, "RBF bandwidth rule", choices=("median",),
              defaults={"seminar": "median", "gpu": "median", "paper": "median"}),
        Param("seed", int, "random seed (shuffled-pairs control)", minimum=0,
              defaults={"seminar": 0, "gpu": 0, "paper": 0}),
    ),
    depends_on=("layout_distillation",),
)
