"""Chapter parameters that more than one chapter declares. The SoftCKA and first-FA chapters probe the same models
(the layout chapter's teacher for each preset, with its distilled students) with the same alignment settings, so one
finds the other's measurements in the cache; their specs share these :class:`~hybridlib.params.Param` objects
instead of importing one another. Not a finding of its own."""

from hybridlib.data.languages import UDHR_LANGUAGES
from hybridlib.layouts import LAYOUT_NAMES
from hybridlib.params import Param
from hybridlib.recipes import PRESET_TEACHERS, RECIPES

_ALL = ("seminar", "gpu", "paper")
# On one H200 each student costs ~1 min to distil when the layout chapter has not run in the same session: the
# baseline, the paper's reverse periodic and the single-change ablation (first FA moved to layer 0, the cleanest
# test of the first-FA event) keep the SoftCKA and first-FA runs within their ~10 minutes.
GPU_LAYOUTS = ("standard_periodic", "reverse_periodic", "periodic_first_at_0")

#: The probed models: the layout chapter's teacher, its GDN students and its sliding-window student.
TEACHER = Param(
    "teacher",
    str,
    "full-attention teacher (the layout-distillation chapter's for the same preset)",
    choices=tuple(RECIPES),
    defaults=dict(PRESET_TEACHERS),
)
LAYOUTS = Param(
    "layouts",
    list,
    "Gated DeltaNet students probed (distilled by the layout chapter)",
    item=str,
    choices=LAYOUT_NAMES,
    unique=True,
    defaults={
        "seminar": ["standard_periodic", "reverse_periodic"],
        "gpu": list(GPU_LAYOUTS),
        "paper": list(LAYOUT_NAMES[:5]),
    },
)
SWA_CONTROL = Param(
    "swa_control",
    bool,
    "also probe the sliding-window student (standard periodic layout)",
    defaults={p: True for p in _ALL},
)

#: The alignment settings (the first-FA chapter sets its own ``max_tokens``: long enough for the window to bind).
LANGUAGES = Param(
    "languages",
    list,
    "UDHR languages compared with English",
    item=str,
    choices=UDHR_LANGUAGES,
    defaults={p: list(UDHR_LANGUAGES) for p in _ALL},
)
ARTICLES = Param(
    "articles",
    int,
    "UDHR articles per language (pairs per language)",
    minimum=2,
    unit="articles",
    defaults={"seminar": 10, "gpu": 30, "paper": 30},
)
BOOTSTRAP = Param(
    "bootstrap",
    int,
    "bootstrap resamples over articles",
    minimum=10,
    defaults={"seminar": 300, "gpu": 1000, "paper": 1000},
)
TORCH_THREADS = Param(
    "torch_threads",
    int,
    "torch CPU threads (0: torch's default)",
    minimum=0,
    defaults={"seminar": 1, "gpu": 1, "paper": 1},
)
CPU_WORKERS = Param(
    "cpu_workers",
    int,
    "threads computing SoftCKA layers in parallel on a CPU (0: one per core; on a GPU SoftCKA runs there)",
    minimum=0,
    defaults={"seminar": 1, "gpu": 0, "paper": 0},
)
SEED = Param(
    "seed",
    int,
    "random seed (shuffled-pairs derangement, random-init weights, bootstrap)",
    minimum=0,
    defaults={p: 0 for p in _ALL},
)
