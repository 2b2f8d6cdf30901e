"""Every file under data/results/ is read by something (issue 46): its name, or the pattern its reader builds it from,
appears in a page generator, notebook, test, script or book page outside data/results/. A result nothing names is
dead weight: git history keeps it once it is removed."""

from __future__ import annotations

import os
import re
from pathlib import Path

from hybridlib.paths import REPO_ROOT
from hybridlib.results import PREVIOUS

RESULTS = Path("data") / "results"
#: the files that can read a result, by suffix
READERS = (".py", ".md", ".ipynb", ".sh")
#: folders that hold no reader of the repository's own (caches, builds, environments, git)
SKIP = {
    ".git",
    ".venv",
    ".cache",
    ".pytest_cache",
    ".ruff_cache",
    ".gpu",
    "_build",
    "__pycache__",
    "node_modules",
}
#: a preset's file, ``<stem>_<preset>.json``: its reader may build the name from the preset (``f"efficiency_{preset}"``)
PRESET_FILE = re.compile(r"^(?P<stem>.+)_(gpu|seminar)\.json$")


def references(path: Path) -> set[str]:
    """The strings any one of which names the result file ``path`` in its reader (as a whole word: ``gpu.json`` is
    not named by ``efficiency_gpu.json``): its file name; a preset's file
    (``efficiency_seminar.json``) also by its stem with the preset as a format field (``efficiency_{``); a replaced
    run (``previous_runs/gpu@<date>_<commit>.json``, read through :func:`hybridlib.results.history` or a glob of the
    folder) by the name of the file it replaced (``gpu.json``)."""
    name = path.name
    if path.parent.name == PREVIOUS:
        name = name.split("@")[0] + ".json"
    out = {name}
    if m := PRESET_FILE.match(name):
        out.add(f"{m['stem']}_{{")
    return out


def reader_text(root: Path, skip: Path) -> str:
    """The text of every reader file (:data:`READERS`) under ``root``, outside ``skip`` and :data:`SKIP`'s folders
    (this file left out: it names no result), one after another."""
    texts = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = [
            d
            for d in dirs
            if d not in SKIP and not d.endswith(".egg-info") and (here / d).resolve() != skip.resolve()
        ]
        texts += [
            (here / f).read_text(errors="replace")
            for f in files
            if f.endswith(READERS) and here / f != Path(__file__)
        ]
    return "\0".join(texts)


def unreferenced(root: Path) -> list[str]:
    """The files under ``root/data/results`` (relative to it) that no reader under ``root`` names
    (:func:`references`)."""
    results = root / RESULTS
    text = reader_text(root, results)
    return [
        path.relative_to(results).as_posix()
        for path in sorted(p for p in results.rglob("*") if p.is_file())
        if not any(re.search(rf"(?<![\w.@-]){re.escape(ref)}", text) for ref in references(path))
    ]


def test_every_committed_result_is_named_by_a_reader():
    assert unreferenced(REPO_ROOT) == []


def test_an_unnamed_result_is_found(tmp_path):
    results = tmp_path / RESULTS
    for rel in (
        "ch/gpu.json",
        "ch/previous_runs/gpu@2026-11-29T11-10_415875ac769b.json",
        "efficiency/efficiency_seminar.json",
        "benchmarks/orphan.json",
        "benchmarks/orphan_gpu.json",
        "ch/seminar.json",  # named only inside paper_vs_book_seminar.json: not named
    ):
        (results / rel).parent.mkdir(parents=True, exist_ok=True)
        (results / rel).write_text("{}")
    (results / "benchmarks" / "self.py").write_text('"orphan.json" names itself: not a reader')
    (tmp_path / "page.py").write_text(
        'path = results_dir(chapter) / "gpu.json"  # "paper_vs_book_seminar.json"\n'
    )
    (tmp_path / "nb.ipynb").write_text('{"source": ["f\\"efficiency_{P[\'preset\']}.json\\""]}')
    assert unreferenced(tmp_path) == [
        "benchmarks/orphan.json",
        "benchmarks/orphan_gpu.json",
        "benchmarks/self.py",
        "ch/seminar.json",
    ]
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "run.sh").write_text("cat data/results/benchmarks/orphan.json\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "x.py").write_text("orphan_gpu.json self.py")  # not the repository's own
    assert unreferenced(tmp_path) == ["benchmarks/orphan_gpu.json", "benchmarks/self.py", "ch/seminar.json"]
