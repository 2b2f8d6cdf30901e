"""Chapter 3 - the first full-attention layer: the largest cross-lingual event in hybrids.

Models and alignment settings mirror the SoftCKA chapter (same preset; both declare the parameters of
:mod:`hybridlib.findings.shared_params`), so its cached measurements are reused, except
``max_tokens``: the probes must be long enough for the sliding-window control to bind (at least twice its window,
checked below for every preset; on ``gpu`` that means longer probes than the SoftCKA chapter's).
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
from hybridlib.recipes import preset_defaults

_ALL = ("seminar", "gpu", "paper")
DETOK_LANGUAGES = ("eng", "rus", "arb", "hin", "yor", "sot", "tel", "mal", "tam")  # whitespace between words

SPEC = ChapterSpec(
    name="first_fa",
    title="The first full-attention layer",
    notebook="03_first_fa.ipynb",
    claim=(
        "In hybrids with recurrent mixers the first full-attention layer adds the largest cross-lingual change "
        "to the residual stream (attn_delta SoftCKA spike); sliding-window hybrids show no such event."
    ),
    params=(
        TEACHER,
        LAYOUTS,
        SWA_CONTROL,
        LANGUAGES,
        ARTICLES,
        BOOTSTRAP,
        TORCH_THREADS,
        CPU_WORKERS,
        SEED,
        Param(
            "max_tokens",
            int,
            "tokens kept of the longer side of each pair (both cut to the same fraction); at "
            "least twice the SWA control's window",
            minimum=2,
            unit="tokens",
            defaults={"seminar": 96, "gpu": 256, "paper": 512},
        ),
        Param(
            "locality_window",
            int,
            "attention locality: mass on the last this-many keys",
            minimum=1,
            unit="tokens",
            defaults={"seminar": 16, "gpu": 64, "paper": 64},
        ),
        Param(
            "detok_languages",
            list,
            "UDHR languages of the detokenisation probe",
            item=str,
            choices=DETOK_LANGUAGES,
            defaults={
                "seminar": ["eng", "rus", "arb", "hin"],
                "gpu": list(DETOK_LANGUAGES[:6]),
                "paper": list(DETOK_LANGUAGES[:6]),
            },
        ),
        Param(
            "detok_max_tokens",
            int,
            "tokens per UDHR article in the detokenisation probe",
            minimum=8,
            unit="tokens",
            defaults={"seminar": 256, "gpu": 512, "paper": 1024},
        ),
        Param(
            "detok_min_count",
            int,
            "probe labels need at least this many occurrences",
            minimum=2,
            defaults={p: 4 for p in _ALL},
        ),
    ),
    depends_on=("layout_distillation", "softcka"),
)


def _check_swa_binds() -> None:
    """Every preset's probes are at least twice the SWA control's window (else the control sees everything)."""
    for preset in _ALL:
        window = preset_defaults("swa_window")[preset]  # the layout chapter's default (its teacher's recipe)
        probe = SPEC.param("max_tokens").defaults[preset]
        if not 2 * window <= probe:
            raise ValueError(f"preset {preset!r}: max_tokens {probe} must be >= 2 x swa_window {window}")


_check_swa_binds()
