"""Chapter 2 - SoftCKA: layer-wise cross-lingual alignment in hybrid vs full-attention models.

The teacher and the students are the layout-distillation chapter's (same preset, same recipe, so
``hybridlib.findings.students.load_models`` loads its cached students); the models and alignment settings it shares
with the first-FA chapter are :mod:`hybridlib.findings.shared_params`.
"""

from hybridlib.findings.shared_params import (
    ARTICLES,
    BOOTSTRAP,
    CPU_WORKERS,
    LANGUAGES,
    LAYOUTS,
    SEED,
    SWA_CONTROL,
    TEACHER,
    TORCH_THREADS,
)
from hybridlib.params import ChapterSpec, Param

_ALL = ("seminar", "gpu", "paper")
OBSERVED = ("gemma3-270m", "smollm2-135m")

SPEC = ChapterSpec(
    name="softcka",
    title="SoftCKA: layer-wise cross-lingual alignment",
    notebook="02_softcka.ipynb",
    claim=(
        "Hybrids align languages less than full-attention models, and their layer-wise SoftCKA curves are jagged, "
        "jumping at full-attention layers, where non-hybrids rise smoothly through the middle and fall at the end."
    ),
    params=(
        TEACHER,
        LAYOUTS,
        SWA_CONTROL,
        Param(
            "random_init",
            bool,
            "also probe a randomly initialised copy of the teacher (control)",
            defaults={p: True for p in _ALL},
        ),
        Param(
            "observed",
            list,
            "extra models observed as they are (global layers marked)",
            item=str,
            choices=OBSERVED,
            defaults={"seminar": [], "gpu": ["gemma3-270m"], "paper": ["gemma3-270m"]},
        ),
        LANGUAGES,
        ARTICLES,
        Param(
            "max_tokens",
            int,
            "tokens kept of the longer side of each pair (both cut to the same fraction)",
            minimum=2,
            unit="tokens",
            defaults={"seminar": 96, "gpu": 256, "paper": 512},
        ),
        Param(
            "bandwidth",
            str,
            "RBF bandwidth rule",
            choices=("median", "corpus-median"),
            defaults={p: "median" for p in _ALL},
        ),
        BOOTSTRAP,
        TORCH_THREADS,
        CPU_WORKERS,
        SEED,
    ),
    depends_on=("layout_distillation",),
)
