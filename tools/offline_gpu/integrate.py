"""Put a device run's results where the book reads them: ``python tools/offline_gpu/integrate.py gpu-out.tgz``.

The archive is what ``collect.sh`` packs: per chapter group a folder with its log and, per chapter that
finished, ``<chapter>/`` with the executed ``gpu`` notebook and result JSON files. Each notebook goes to
``book/gpu/`` and becomes its chapter's page in ``_toc.yml``, the seminar notebook its section (if it is not
yet); each JSON file goes to ``data/results/<chapter>/``, and the run it replaces to ``previous_runs/`` there
(``hybridlib.results``). A notebook with an error output or without provenance is refused, so a failed or stale
run never reaches the book.
Each notebook is cleaned for the page (``clean``), so that an integrated notebook needs no edit by hand: a
log-mode run's (``--log-output``) text progress bars (every redraw), kernel libraries' log lines and
progress-bar widgets are dropped; the all-None parameters cell is removed from the page and long code cells are
collapsed; pandas' 0..N-1 index column is dropped from tables; the title says "(on one H200)" and the chapter's
summary box is included from ``book/summaries/``, right below the claim under test. Every step is idempotent:
cleaning a committed ``book/gpu/`` notebook changes nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from hybridlib.findings import CHAPTERS  # noqa: E402 - after the repository is on the path
from hybridlib.results import archive_previous  # noqa: E402

SECTION_TITLE = "Seminar preset on a CPU"
"""The seminar section's title in the navigation when its chapter has no title to derive it from."""
SEMINAR_SUFFIX = ": seminar preset on a CPU"
GPU_SUFFIX = " on one H200"
_BAR = re.compile(r"^(?P<desc>.*?)\s*(?P<pct>\d+)%\|.*\|\s*[\d.]+\w?/(?P<total>[\d.]+\w?)\b")


def _text(value: str | list[str]) -> str:
    return "".join(value)


def _lines(text: str) -> list[str]:
    """``text`` as nbformat stores it on disk: one string per line, each but the last ending in a newline."""
    return text.splitlines(keepends=True)


def _tags(cell: dict) -> list[str]:
    return cell.setdefault("metadata", {}).setdefault("tags", [])


def _add_tag(cell: dict, tag: str) -> None:
    if tag not in _tags(cell):
        _tags(cell).append(tag)


def _streams(nb: dict, names: tuple[str, ...]) -> Iterator[dict]:
    """Every stream output of ``nb`` called one of ``names``."""
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream" and o.get("name") in names:
                yield o


def _drop_outputs(nb: dict, dropped: list[dict]) -> None:
    """Remove the outputs in ``dropped`` (compared by identity) from their cells."""
    ids = {id(o) for o in dropped}
    for cell in nb["cells"]:
        if any(id(o) in ids for o in cell.get("outputs", [])):
            cell["outputs"] = [o for o in cell["outputs"] if id(o) not in ids]


def drop_progress_bars(nb: dict) -> dict:
    """``nb`` without text progress bars (every redraw a log-mode run, ``--log-output``, left) and blank lines in
    its stderr streams; a stream left empty is dropped.

    A page keeps no stderr text (tests/test_book_html.py); the times and losses a bar showed are in the
    cells' printed output and the result JSON. Other stderr lines stay."""
    emptied = []
    for o in _streams(nb, ("stderr",)):
        segments = re.split(r"[\r\n]", _text(o["text"]))
        o["text"] = "".join(seg + "\n" for seg in segments if seg.strip() and not _BAR.match(seg))
        if not o["text"]:
            emptied.append(o)
    _drop_outputs(nb, emptied)
    return nb


#: A kernel library's log line: TileLang's (``2026-11-29 20:58:29  [TileLang:tilelang.jit.kernel:INFO] ...``),
#: or an INFO line of Triton, fla or Python logging (``INFO ...``, ``[INFO] ...``, ``2026-11-29 ... INFO ...``).
LOG_LINE = re.compile(r"\[TileLang[:\]]|^\[?INFO\b|^\d{4}-\d\d-\d\d[ T][\d:.,]+\s.{0,60}?\bINFO\b")


def drop_log_lines(nb: dict) -> dict:
    """``nb`` without kernel libraries' log lines (:data:`LOG_LINE`) in its stdout and stderr streams.

    TileLang logs its JIT compiles to stdout. A stream left empty is dropped; a stream with no such line is kept
    as it was."""
    emptied = []
    for o in _streams(nb, ("stdout", "stderr")):
        lines = _lines(_text(o["text"]))
        kept = [line for line in lines if not LOG_LINE.search(line)]
        if len(kept) < len(lines):
            o["text"] = kept
            if not "".join(kept).strip():
                emptied.append(o)
    _drop_outputs(nb, emptied)
    return nb


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def drop_widgets(nb: dict) -> dict:
    """``nb`` without its saved widget state (``metadata.widgets``) and without the outputs that are only a
    widget view (its ``text/plain`` repr aside), e.g. tqdm's notebook bars: without the state they show
    nothing."""
    nb.get("metadata", {}).pop("widgets", None)
    for cell in nb["cells"]:
        if "outputs" in cell:
            cell["outputs"] = [
                o for o in cell["outputs"] if not (set(o.get("data", {})) - {"text/plain"} == {WIDGET_VIEW})
            ]
    return nb


def hide_parameters_cell(nb: dict) -> dict:
    """``nb`` with its ``parameters`` cell (the all-None defaults) also tagged ``remove-cell``; the
    ``injected-parameters`` cell, the values this run used, stays visible."""
    for cell in nb["cells"]:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            _add_tag(cell, "remove-cell")
    return nb


def hide_long_inputs(nb: dict, max_lines: int = 10) -> dict:
    """``nb`` with each code cell of more than ``max_lines`` source lines tagged ``hide-input`` (collapsed,
    its output shown), unless its input is removed or folded anyway (``remove-cell``, ``remove-input``,
    ``hide-cell``)."""
    for cell in nb["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "code" and not {"remove-cell", "remove-input", "hide-cell"} & set(tags):
            if len(_text(cell["source"]).splitlines()) > max_lines:
                _add_tag(cell, "hide-input")
    return nb


_TABLE = re.compile(r'<table border="1" class="dataframe">.*?</table>', re.S)
_HEAD_BLANK = re.compile(r"(<thead>\s*<tr[^>]*>)\s*<th></th>", re.S)
_ROW = re.compile(r"<tr>(.*?)</tr>", re.S)


def drop_range_index_html(html: str) -> str:
    """``html`` with pandas' 0..N-1 index column removed from each table of one header row whose body rows each
    start with their position as the only ``<th>``; MultiIndex, named or other indexes are left alone."""

    def table(match: re.Match) -> str:
        t = match.group(0)
        head, _, body = t.partition("</thead>")
        if head.count("<tr") != 1 or not _HEAD_BLANK.search(head):
            return t
        rows = _ROW.findall(body)
        labels = [re.findall(r"<th[^>]*>(.*?)</th>", row, re.S) for row in rows]
        if not rows or labels != [[str(i)] for i in range(len(rows))]:
            return t
        if not all(re.match(rf"\s*<th>{i}</th>", row) for i, row in enumerate(rows)):
            return t
        head = _HEAD_BLANK.sub(r"\1", head, count=1)
        body = re.sub(r"(<tr>)\s*<th>\d+</th>", r"\1", body)
        return head + "</thead>" + body

    return _TABLE.sub(table, html)


def drop_range_index(nb: dict) -> dict:
    """``nb`` with :func:`drop_range_index_html` applied to every ``text/html`` output (``text/plain`` kept)."""
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            html = o.get("data", {}).get("text/html")
            if html is not None:
                new = drop_range_index_html(_text(html))
                if new != _text(html):
                    o["data"]["text/html"] = _lines(new) if isinstance(html, list) else new
    return nb


TITLE_SUFFIX = " (on one H200)"


def title_on_h200(nb: dict) -> dict:
    """``nb`` with the H1 title of its first markdown cell ending in :data:`TITLE_SUFFIX`."""
    cell = next((c for c in nb["cells"] if c["cell_type"] == "markdown"), None)
    if cell is None:
        return nb
    lines = _lines(_text(cell["source"]))
    for i, line in enumerate(lines):
        if line.startswith("# "):
            title = line.rstrip()
            if not title.endswith(TITLE_SUFFIX):
                lines[i] = title + TITLE_SUFFIX + line[len(title) :]
                cell["source"] = lines
            break
    return nb


_INCLUDE = re.compile(r"(```\{include\}\s+)\.\./book/summaries/")


def summary_include(nb: dict, chapter: str) -> dict:
    """``nb`` showing ``book/summaries/<chapter>.md`` once, as seen from ``book/gpu/``.

    The notebook's own include (``../book/summaries/...``, relative to ``notebooks/``) is pointed at
    ``../summaries/...``; a notebook without one gets it after its title cell, tagged ``added-at-integration``."""
    found = False
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = _text(cell["source"])
        new = _INCLUDE.sub(r"\1../summaries/", text)
        if new != text:
            cell["source"] = _lines(new)
        found = found or bool(re.search(rf"```\{{include\}}\s+\.\./summaries/{re.escape(chapter)}\.md", new))
    if not found:
        at = next((i + 1 for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"), 0)
        cell = {
            "cell_type": "markdown",
            "id": f"scoreboard-{chapter}",
            "metadata": {"tags": ["added-at-integration"]},
            "source": [f"```{{include}} ../summaries/{chapter}.md\n", "```"],
        }
        nb["cells"].insert(at, cell)
    return nb


_CLAIM = "**Claim under test.**"


def summary_first(nb: dict) -> dict:
    """``nb`` with its summary box (the include cell after the title cell) right below the title and the claim
    under test, the rest of the introduction after it: a reader sees the verdicts before the method. A title cell
    that holds only the title and the claim is left as it is."""
    cells = nb["cells"]
    if len(cells) < 2 or cells[0]["cell_type"] != "markdown" or "{include}" not in _text(cells[1]["source"]):
        return nb
    paragraphs = _text(cells[0]["source"]).split("\n\n")
    at = next((i + 1 for i, p in enumerate(paragraphs) if p.startswith(_CLAIM)), None)
    if at is None or at == len(paragraphs):
        return nb
    rest = {
        "cell_type": "markdown",
        "id": f"{cells[0].get('id', 'title')}-intro",
        "metadata": {},
        "source": _lines("\n\n".join(paragraphs[at:])),
    }
    cells[0]["source"] = _lines("\n\n".join(paragraphs[:at]))
    cells.insert(2, rest)
    return nb


def clean(nb: dict, chapter: str) -> dict:
    """``nb``, an executed ``gpu`` notebook of ``chapter``, as its ``book/gpu/`` page shows it: every step
    above, in order; applying it twice changes nothing more."""
    for step in (
        drop_log_lines,
        drop_progress_bars,
        drop_widgets,
        hide_parameters_cell,
        hide_long_inputs,
        drop_range_index,
        title_on_h200,
    ):
        nb = step(nb)
    return summary_first(summary_include(nb, chapter))


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


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _title(line: str) -> str:
    """The value of a ``title:`` line of the toc."""
    return str(yaml.safe_load(line.strip()[len("title:") :]))


def add_toc_section(toc: Path, notebook: str) -> bool:
    """Make ``book/gpu/<notebook>`` its chapter's page in ``toc``, with ``notebooks/<notebook>`` (the seminar
    run a teacher re-runs) as its first section; False if the H200 page already leads its chapter.

    Titles: a seminar title ``"<Chapter>: seminar preset on a CPU"`` (or ``"<Chapter>"``) gives ``"<Chapter> on
    one H200"`` and the seminar section ``"<Chapter>: seminar preset on a CPU"`` (an H200 page that was a section
    keeps its title); a chapter without a title keeps none (the page's H1 says "(on one
    H200)") and its seminar section is called :data:`SECTION_TITLE`. The chapter's other sections follow."""
    stem = Path(notebook).stem
    lines = toc.read_text(encoding="utf-8").splitlines(keepends=True)
    where = {line.strip(): i for i, line in enumerate(lines)}
    gpu, seminar = where.get(f"- file: book/gpu/{stem}"), where.get(f"- file: notebooks/{stem}")
    if gpu is not None and (seminar is None or _indent(lines[gpu]) < _indent(lines[seminar])):
        return False
    if seminar is None:
        raise ValueError(f"{toc} has no chapter notebooks/{stem}: add it before integrating its H200 run")
    at, indent = seminar, _indent(lines[seminar])
    end = next(
        (i for i in range(at + 1, len(lines)) if lines[i].strip() and _indent(lines[i]) <= indent), len(lines)
    )
    title, gpu_title, other, sections, item = None, None, [], [], None
    for line in lines[at + 1 : end]:
        depth = _indent(line) - indent
        if depth == 2 and line.strip().startswith("title:"):
            title = _title(line)
        elif depth == 2 and line.strip() == "sections:":
            item = []
        elif item is not None and depth >= 4:
            if depth == 4 and line.strip().startswith("- "):
                item = [line]
                sections.append(item)
            else:
                item.append(line)
        else:
            other.append(line)
    for section in list(sections):
        if section[0].strip() == f"- file: book/gpu/{stem}":  # the H200 page as a section: it leads now
            sections.remove(section)
            gpu_title = next((_title(x) for x in section[1:] if x.strip().startswith("title:")), None)
    base = title.removesuffix(SEMINAR_SUFFIX) if title else None
    gpu_title = gpu_title or (base + GPU_SUFFIX if base else None)
    pad = " " * indent
    block = [f"{pad}- file: book/gpu/{stem}\n"]
    block += [f"{pad}  title: {json.dumps(gpu_title, ensure_ascii=False)}\n"] if gpu_title else []
    block += other
    block += [
        f"{pad}  sections:\n",
        f"{pad}    - file: notebooks/{stem}\n",
        f"{pad}      title: {json.dumps(base + SEMINAR_SUFFIX if base else SECTION_TITLE, ensure_ascii=False)}\n",
    ]
    block += [line for section in sections for line in section]
    lines[at:end] = block
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
            nb = clean(json.loads(path.read_text(encoding="utf-8")), by_notebook[path.name])
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
