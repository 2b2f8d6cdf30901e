"""Where the whole-model benchmark's result lives and how the chapters read it (the efficiency chapter's tables
and rules, LoLCATs' Fig. 8, the whole-models page): one JSON per preset, ``data/results/efficiency/
wholemodel_<preset>.json``, written by ``python -m benchmarks.whole_model`` (:func:`run_command`). Shared by those
chapters, not a finding of its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from hybridlib.paths import REPO_ROOT, results_dir
from kernels.shapes import SHAPES

KINDS = (
    "teacher",
    "gdn",
    "window-linear",
)  #: what each measured model is, per name (a teacher before its students)


def result_path(preset: str) -> Path:
    """The whole-model JSON the chapters read for ``preset``: ``data/results/efficiency/wholemodel_<preset>.json``."""
    if not preset or "/" in preset:
        raise ValueError(f"preset must be a plain name, got {preset!r}")
    return results_dir("efficiency") / f"wholemodel_{preset}.json"


def load_result(preset: str) -> dict[str, object] | None:
    """The whole-model result of ``preset`` (None: not measured for this preset)."""
    path = result_path(preset)
    return json.loads(path.read_text()) if path.exists() else None


def run_command(preset: str) -> str:
    """The command that writes :func:`result_path` of a book preset (``paper`` books use the ``gpu`` sizes)."""
    cli = "seminar" if preset == "seminar" else "gpu"
    out = result_path(preset).relative_to(REPO_ROOT)
    return f"python -m benchmarks.whole_model --preset {cli} --out {out}"


def labels(data: Mapping[str, object]) -> list[str]:
    """The measured models' labels (the JSON's keys are sorted): by name in the run's ``--models`` order (other
    names after, sorted), then by kind in :data:`KINDS` order (a teacher before its students)."""
    given = ((data.get("provenance") or {}).get("params") or {}).get("models") or []
    names = list(
        dict.fromkeys(
            [x.partition(":")[0] for x in given] + sorted(x.partition(":")[0] for x in data["models"])
        )
    )
    return sorted(
        data["models"], key=lambda x: (names.index(x.partition(":")[0]), KINDS.index(x.partition(":")[2]))
    )


def attends_fully(name: str) -> bool:
    """Whether teacher ``name`` attends globally in every layer (a model outside :data:`kernels.shapes.SHAPES` is
    a Llama: it does); Gemma 3 does not (a sliding window in 15 of its 18 layers)."""
    shape = SHAPES.get(name)
    return shape is None or shape.attends_fully


def paired_name(data: Mapping[str, object], kind: str, *, full_attention: bool = False) -> str | None:
    """The first model name of ``data`` (:func:`labels` order) measured as teacher and as ``kind``, with
    ``full_attention`` only a teacher that :func:`attends_fully` (None: none)."""
    names = dict.fromkeys(x.partition(":")[0] for x in labels(data))
    return next(
        (
            n
            for n in names
            if {f"{n}:teacher", f"{n}:{kind}"} <= set(data["models"])
            and (attends_fully(n) or not full_attention)
        ),
        None,
    )
