"""What the layout chapter's ``gpu`` pages still lack of the committed records: per arm the replicates whose student
no archive holds, then the learning-rate check and the other teachers, which wait for every FA-first replicate (they
train with the best FA-first layout). Unpacks the archives into a temporary cache and trains nothing::

    python tools/offline_gpu/todo.py [ARCHIVE ...]    # default: every data/gpu_memo/*/records-*.tgz
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hybridlib import carry
from hybridlib.findings import chapter
from hybridlib.findings.layout import replicates
from hybridlib.params import RECORDS_ONLY_ENV
from hybridlib.paths import REPO_ROOT, cache_dir


def found(load: Callable[[], Any]) -> bool:
    """Whether ``load`` finds its students in the records (a missing one raises FileNotFoundError)."""
    try:
        load()
    except FileNotFoundError:
        return False
    return True


def lacking(params: Mapping[str, Any]) -> dict[str, list[int]]:
    """Arm label (the layout chapter's arms, then ``lr_check`` and ``other_teachers``) -> replicate indices whose
    students the cache lacks; the two checks list every replicate while an FA-first replicate is lacking."""
    seeds = range(params["seeds"])
    out = {
        label: [
            r
            for r in seeds
            if not found(lambda r=r: replicates.train(params, [r], labels=[label], progress=False))
        ]
        for label in replicates.plans(params)
    }
    if any(out.get(label) for label in replicates.FA_FIRST):
        return out | {"lr_check": list(seeds), "other_teachers": [0]}
    best = replicates.best_fa_first(replicates.train(params, labels=replicates.FA_FIRST, progress=False))
    out["lr_check"] = [
        r
        for r in seeds
        if not found(lambda r=r: replicates.train_lr_check(params, best, [r], progress=False))
    ]
    out["other_teachers"] = (
        [] if found(lambda: replicates.train_other_teachers(params, best, progress=False)) else [0]
    )
    return out


def main(argv: Sequence[str]) -> None:
    archives = [Path(a) for a in argv] or sorted(REPO_ROOT.glob("data/gpu_memo/*/records-*.tgz"))
    if bad := [str(a) for a in archives if not (a.is_file() and a.name.endswith(".tgz"))]:
        print(
            f"todo.py: ARCHIVE must be a records .tgz (python -m hybridlib.carry pack), got {bad}",
            file=sys.stderr,
        )
        sys.exit(2)
    models = cache_dir("models")  # the converted teachers, shared with the temporary cache
    with tempfile.TemporaryDirectory(prefix="hybridlib-todo-") as tmp:
        os.environ["HYBRIDLIB_CACHE"] = tmp
        os.environ[RECORDS_ONLY_ENV] = "1"
        (Path(tmp) / "models").symlink_to(models)
        for archive in archives:
            carry.unpack(archive)
        params = chapter("layout_distillation").resolve("gpu")
        gaps = lacking(params)
    planned = {label: (1 if label == "other_teachers" else params["seeds"]) for label in gaps}
    for label, missing in gaps.items():
        have = planned[label] - len(missing)
        print(
            f"{label}: {have} of {planned[label]}"
            + (f", lacking {' '.join(map(str, missing))}" if missing else "")
        )
    print(
        f"{sum(map(len, gaps.values()))} of {sum(planned.values())} replicates lacking ({len(archives)} archives)"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
