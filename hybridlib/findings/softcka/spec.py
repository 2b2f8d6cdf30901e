"""Chapter 2 - SoftCKA: layer-wise cross-lingual alignment in hybrid vs full-attention models.

The teacher and the students are the layout-distillation chapter's (same preset, same recipe, so
``hybridlib.findings.softcka.alignment.load_models`` loads its cached students).
"""

from hybridlib.data.languages import UDHR_LANGUAGES as LANGUAGES
from hybridlib.findings.layout.spec import LAYOUTS
from hybridlib.findings.layout.spec import SPEC as DISTILLATION
from hybridlib.params import ChapterSpec, Param

_ALL = ("seminar", "gpu", "paper")
TEACHERS = DISTILLATION.param("teacher").choices
OBSERVED = ("gemma3-270m", "smollm2-135m")
# On one H200 each student costs ~1 min to distil when the layout chapter has not run in the same session: the
# baseline, the paper's reverse periodic and the single-change ablation (first FA moved to layer 0, the cleanest
# test of the first-FA event) keep the SoftCKA and first-FA runs within their ~10 minutes.
GPU_LAYOUTS = ("standard_periodic", "reverse_periodic", "periodic_first_at_0")

SPEC = ChapterSpec(
    name="softcka",
    title="SoftCKA: layer-wise cross-lingual alignment",
    notebook="02_softcka.ipynb",
    claim=(
        "Hybrids align languages less than full-attention models, and their layer-wise SoftCKA curves are jagged, "
        "jumping at full-attention layers, where non-hybrids rise smoothly through the middle and fall at the end."
    ),
    params=(
        Param(
            "teacher",
            str,
            "full-attention teacher (the layout-distillation chapter's for the same preset)",
            choices=TEACHERS,
            defaults=dict(DISTILLATION.param("teacher").defaults),
        ),
        Param(
            "layouts",
            list,
            "Gated DeltaNet students probed (distilled by the layout chapter)",
            item=str,
            choices=LAYOUTS,
            unique=True,
            defaults={
                "seminar": ["standard_periodic", "reverse_periodic"],
                "gpu": list(GPU_LAYOUTS),
                "paper": list(LAYOUTS[:5]),
            },
        ),
        Param(
            "swa_control",
            bool,
            "also probe the sliding-window student (standard periodic layout)",
            defaults={p: True for p in _ALL},
        ),
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
        Param(
            "languages",
            list,
            "UDHR languages compared with English",
            item=str,
            choices=LANGUAGES,
            defaults={p: list(LANGUAGES) for p in _ALL},
        ),
        Param(
            "articles",
            int,
            "UDHR articles per language (pairs per language)",
            minimum=2,
            unit="articles",
            defaults={"seminar": 10, "gpu": 30, "paper": 30},
        ),
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
        Param(
            "bootstrap",
            int,
            "bootstrap resamples over articles",
            minimum=10,
            defaults={"seminar": 300, "gpu": 1000, "paper": 1000},
        ),
        Param(
            "torch_threads",
            int,
            "torch CPU threads (0: torch's default)",
            minimum=0,
            defaults={"seminar": 1, "gpu": 1, "paper": 1},
        ),
        Param(
            "cpu_workers",
            int,
            "threads computing SoftCKA layers in parallel on a CPU (0: one per core; on a GPU SoftCKA runs there)",
            minimum=0,
            defaults={"seminar": 1, "gpu": 0, "paper": 0},
        ),
        Param(
            "seed",
            int,
            "random seed (shuffled-pairs derangement, random-init weights, bootstrap)",
            minimum=0,
            defaults={p: 0 for p in _ALL},
        ),
    ),
    depends_on=("layout_distillation",),
)
