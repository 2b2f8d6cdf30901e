"""Measure some of a chapter's models ahead of its notebook, so that two GPUs share the SoftCKA measurements.

Each measurement lands in the alignment cache (:func:`~hybridlib.alignment.chapter_measure`),
where the chapter's notebook then finds it instead of measuring again::

    python -m hybridlib.findings.softcka.prealign --preset gpu --layouts standard_periodic --replicates

measures the standard-periodic student of the first-FA chapter's ``gpu`` preset and its replicates 1, 2, ...
(students are trained first if not cached, as the notebook would; that notebook measures replicates only of
students whose first full-attention layer follows recurrent layers). ``tools/offline_gpu/replicated.sh first_fa``
splits the chapter's models over two GPUs this way.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import torch

from hybridlib import alignment
from hybridlib.findings import chapter, students
from hybridlib.layouts import LAYOUT_NAMES
from hybridlib.params import PRESETS

CHAPTERS = ("first_fa", "softcka")


def chosen(
    probed: Sequence[alignment.Probed],
    more: dict[str, list[alignment.Probed]],
    *,
    teacher: bool,
) -> list[alignment.Probed]:
    """What to measure: ``probed`` (the teacher first) without the teacher unless ``teacher``, then ``more``
    (label -> the students' further replicates) in ``probed``'s order."""
    first = list(probed if teacher else probed[1:])
    return first + [r for m in probed for r in more.get(m.label, [])]


def main(argv: Sequence[str] | None = None) -> list[str]:
    """Measure and return the labels measured, in order."""
    parser = argparse.ArgumentParser(
        prog="python -m hybridlib.findings.softcka.prealign", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--preset", required=True, choices=PRESETS)
    parser.add_argument(
        "--chapter", choices=CHAPTERS, default="first_fa", help="whose parameters to measure with"
    )
    parser.add_argument(
        "--layouts", nargs="*", default=[], choices=LAYOUT_NAMES, help="GDN students to measure"
    )
    parser.add_argument("--teacher", action="store_true", help="also the full-attention teacher")
    parser.add_argument(
        "--swa", action="store_true", help="also the sliding-window student (standard periodic)"
    )
    parser.add_argument("--replicates", action="store_true", help="also the students' replicates 1, 2, ...")
    args = parser.parse_args(argv)
    if not (args.layouts or args.teacher or args.swa):
        parser.error("nothing to measure: give --layouts, --teacher or --swa")
    params = chapter(args.chapter).resolve(args.preset)
    if params["torch_threads"]:
        # as the notebooks do: torch's default (a thread per core) beside a second GPU's queue oversubscribed
        # the host on the H200 machine (2026-11-30: 150-210 s a model, 30 cores busy, GPU 2-27% busy)
        torch.set_num_threads(params["torch_threads"])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    probed = students.load_models(
        params["teacher"], args.layouts, preset=args.preset, swa_control=args.swa, device=device
    )
    more = (
        students.load_replicates(params["teacher"], probed, preset=args.preset, device=device)
        if args.replicates
        else {}
    )
    labels = []
    for m in chosen(probed, more, teacher=args.teacher):
        start = time.perf_counter()
        alignment.chapter_measure(m, params)
        labels.append(m.label)
        print(f"{m.label} ({m.identity[:12]}): {time.perf_counter() - start:.0f} s on {device}", flush=True)
    return labels


if __name__ == "__main__":
    main()
