"""Put a device run's results where the book reads them: ``python tools/offline_gpu/integrate.py gpu-out.tgz``.

The archive is what ``collect.sh`` packs: per chapter group a folder with its log and, per chapter that
finished, ``<chapter>/`` with the executed ``gpu`` notebook and result JSON files. Each notebook goes to
``book/gpu/`` and gets a section under its chapter in ``_toc.yml`` (if it has none yet); each JSON file goes to
``data/results/<chapter>/``, and the run it replaces to ``previous_runs/`` there (``hybridlib.results``). A
notebook with an error output or without provenance is refused, so a failed or stale run never reaches the book.
A log-mode run (``--log-output``) leaves every redraw of its text progress bars in the notebook; each bar is
reduced to its last state (``compact_progress``), all other output is kept as it was.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from hybridlib.findings import CHAPTERS  # noqa: E402 - after the repository is on the path
from hybridlib.results import archive_previous  # noqa: E402

SECTION_TITLE = "On one H200 (gpu preset)"
_BAR = re.compile(r"^(?P<desc>.*?)\s*(?P<pct>\d+)%\|.*\|\s*[\d.]+\w?/(?P<total>[\d.]+\w?)\b")


def compact_progress(nb: dict) -> dict:
    """``nb`` with each text progress bar on stderr cut to its last redraw per cell; blank lines dropped.

    A redraw continues the previous bar of the same description and total unless its percentage went down
    (a new bar, e.g. the next model's training run)."""
    for cell in nb["cells"]:
        streams = [
            o for o in cell.get("outputs", []) if o.get("output_type") == "stream" and o["name"] == "stderr"
        ]
        segments = [
            (o, seg) for o in streams for seg in re.split(r"[\r\n]", "".join(o["text"])) if seg.strip()
        ]
        keep = [True] * len(segments)
        last: dict[tuple[str, str], tuple[int, int]] = {}  # (desc, total) -> (segment index, percent)
        for i, (_, seg) in enumerate(segments):
            bar = _BAR.match(seg)
            if not bar:
                continue
            key, pct = (bar["desc"].strip(), bar["total"]), int(bar["pct"])
            if key in last and pct >= last[key][1]:
                keep[last[key][0]] = False
            last[key] = (i, pct)
        for o in streams:
            o["text"] = "".join(seg + "\n" for (owner, seg), k in zip(segments, keep) if k and owner is o)
        cell["outputs"] = [o for o in cell.get("outputs", []) if o.get("name") != "stderr" or o["text"]]
    return nb


def check_notebook(path: Path) -> str:
    """The notebook's recorded git commit; raises if it has an error output or no provenance."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    errors = [
        o.get("ename") for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    if errors:
        raise ValueError(f"{path.name} has error outputs {errors}: not integrated")
    record = nb.get("metadata", {}).get("hybridlib", {}).get("provenance")
    if not record or record.get("preset") != "gpu":
        raise ValueError(f"{path.name} has no gpu-preset provenance (metadata.hybridlib): not integrated")
    return str(record.get("git_commit"))


def add_toc_section(toc: Path, notebook: str) -> bool:
    """Add ``book/gpu/<notebook>`` as a section of ``notebooks/<notebook>`` in ``toc``; False if already there."""
    stem = Path(notebook).stem
    text = toc.read_text(encoding="utf-8")
    if f"file: book/gpu/{stem}\n" in text:
        return False
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.strip() == f"- file: notebooks/{stem}")
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    block = [
        f"{indent}  sections:\n",
        f"{indent}    - file: book/gpu/{stem}\n",
        f'{indent}      title: "{SECTION_TITLE}"\n',
    ]
    if at + 1 < len(lines) and lines[at + 1].strip() == "sections:":
        block = block[1:]
        at += 1
    lines[at + 1 : at + 1] = block
    toc.write_text("".join(lines), encoding="utf-8")
    return True


def integrate(archive: Path, root: Path = ROOT) -> list[str]:
    """Copy the archive's notebooks and JSON into ``root``; returns one line per file placed."""
    by_notebook = {spec.notebook: name for name, spec in CHAPTERS.items()}
    done = []
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        for path in sorted(Path(tmp).rglob("*.ipynb")):
            if path.name not in by_notebook:
                continue
            commit = check_notebook(path)
            target = root / "book" / "gpu" / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            nb = compact_progress(json.loads(path.read_text(encoding="utf-8")))
            target.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            toc = add_toc_section(root / "_toc.yml", path.name)
            done.append(f"{target.relative_to(root)} (commit {commit}{', new toc section' if toc else ''})")
        for path in sorted(Path(tmp).rglob("*.json")):
            if path.parent.name not in CHAPTERS:
                continue
            target = root / "data" / "results" / path.parent.name / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            moved = archive_previous(target, json.loads(path.read_text(encoding="utf-8")))
            shutil.copyfile(path, target)
            done.append(
                str(target.relative_to(root))
                + (f" (previous run kept as {moved.relative_to(root)})" if moved else "")
            )
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    args = parser.parse_args()
    for line in integrate(args.archive):
        print(line)


if __name__ == "__main__":
    main()
