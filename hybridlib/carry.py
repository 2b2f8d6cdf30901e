"""Carry finished experiments' records, not their weights, from one machine's artefact cache to another's.

A GPU machine that is lent for a short while cannot send back trained students (270 MB each for SmolLM2-135M),
but everything a chapter reads from a student once it is measured is small: its run record and held-out scores
(``students/<key>/*.json``), its SoftCKA measurements (``alignment/*.npz``) and the memoized results of every
other experiment (``memo/<kind>/*.pkl``, keyed by the library code). ``pack`` gathers those files into one
archive; ``unpack`` restores them into this machine's cache and marks each student folder that arrived without
weights as carried (:data:`CARRIED`), so ``distill_layout`` returns its record instead of training it again::

    python -m hybridlib.carry pack records.tgz          # on the machine that trained (and measured) them
    python -m hybridlib.carry pack --newer MARK r.tgz   # only those written since MARK was touched
    python -m hybridlib.carry unpack records.tgz        # on the next one, before the chapters run

A carried student's weights are not here: whatever needs them and finds no cached measurement fails with an
error naming the student (:func:`missing_weights`). Records only match under the same library code, so every
machine of a campaign runs the same frozen commit.
"""

from __future__ import annotations

import argparse
import json
import tarfile
from collections.abc import Sequence
from pathlib import Path

from hybridlib.atomic import atomic_path, write_json
from hybridlib.paths import cache_dir
from hybridlib.provenance import device_name

CARRIED = "carried.json"  #: marker of a student folder whose weights stayed on the machine that trained it
#: cache-relative glob patterns of the records a chapter reads (never weights, checkpoints or corpora)
RECORDS = ("students/*/*.json", "alignment/*.npz", "memo/*/*.pkl")


def records(root: Path, newer: Path | None = None) -> list[Path]:
    """The record files under cache ``root`` (relative paths, sorted), :data:`CARRIED` markers included; with
    ``newer``, only those modified after that file was (a share's start mark)."""
    since = None if newer is None else newer.stat().st_mtime
    found = {
        p
        for pattern in RECORDS
        for p in root.glob(pattern)
        if p.is_file() and not p.name.startswith(".") and (since is None or p.stat().st_mtime > since)
    }
    return sorted(p.relative_to(root) for p in found)  # "."-names: an interrupted atomic write's temporary


def pack(archive: Path, root: Path | None = None, newer: Path | None = None) -> list[Path]:
    """Write the records under ``root`` (default: this machine's cache; with ``newer``, only those modified after
    that file) into the gzipped tar ``archive`` (atomically); returns the paths packed. Raises
    ``ValueError`` when there is nothing to pack, ``FileNotFoundError`` when ``newer`` is missing."""
    root = cache_dir() if root is None else root
    if newer is not None and not newer.is_file():
        raise FileNotFoundError(f"newer={newer}: no such file (the mark whose time the records must follow)")
    found = records(root, newer)
    if not found:
        since = "" if newer is None else f" newer than {newer}"
        raise ValueError(f"no records{since} under {root} to pack (looked for {', '.join(RECORDS)})")
    with atomic_path(archive) as tmp, tarfile.open(tmp, "w:gz") as tar:
        for rel in found:
            tar.add(root / rel, arcname=str(rel))
    return found


def unpack(archive: Path, root: Path | None = None) -> list[Path]:
    """Restore ``archive``'s records into ``root`` (default: this machine's cache) without replacing a file
    that is already there, and mark every student folder that has a run record but no weights as carried;
    returns the paths restored. Raises ``ValueError`` for a member outside :data:`RECORDS`."""
    root = cache_dir() if root is None else root
    restored = []
    with tarfile.open(archive, "r:gz") as tar:
        members = [m for m in tar.getmembers() if not m.isdir()]  # folders are made as their files need them
        bad = [m.name for m in members if not m.isfile() or not any(Path(m.name).match(p) for p in RECORDS)]
        if bad:
            raise ValueError(f"{archive}: members {bad[:3]} are not records ({', '.join(RECORDS)})")
        for member in members:
            target = root / member.name
            if target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(target) as tmp:
                tmp.write_bytes(tar.extractfile(member).read())
            restored.append(Path(member.name))
    origin = {"archive": archive.name, "unpacked_on": device_name()}
    for run in root.glob("students/*/run.json"):
        folder = run.parent
        if not (folder / "student").exists() and not (folder / CARRIED).is_file():
            write_json(folder / CARRIED, origin)
    return restored


def missing_weights(folder: Path) -> FileNotFoundError:
    """The error for a carried student whose weights are needed: names the folder and what to do."""
    origin = json.loads((folder / CARRIED).read_text(encoding="utf-8"))
    return FileNotFoundError(
        f"the student in {folder} was carried here as its record ({origin.get('archive')}), without weights, "
        "and no cached measurement of it answers this call: run this on the machine that trained it, or delete "
        "the folder to train it here again"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m hybridlib.carry", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("pack", "unpack"))
    parser.add_argument("archive", type=Path, help="the .tgz to write (pack) or read (unpack)")
    parser.add_argument("--newer", type=Path, help="pack: only records modified after this file")
    args = parser.parse_args(argv)
    if args.newer is not None and args.command != "pack":
        parser.error("--newer applies to pack only")
    done = pack(args.archive, newer=args.newer) if args.command == "pack" else unpack(args.archive)
    print(f"{args.command}: {len(done)} record file(s) ({args.archive})")


if __name__ == "__main__":
    main()
