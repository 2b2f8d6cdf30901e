"""When each H200 rule took its current form, from git, against the H200 runs committed by then.

Every rule row of the committed ``gpu`` runs (:func:`hybridlib.planning.rule_rows`) is matched by its rule's id to the
source that defines its rule (:data:`SOURCES`: the rule's definition and the constants it reads, named as in its
module). ``git log -L`` over those lines at ``HEAD`` gives the commits that changed them; commits that change only
whitespace or comments (a formatter, a re-wrapped line) are skipped, and the newest remaining one is when the rule
took its current form (commit date); a rule's id is a label, not part of its form. The runs are every committed
version of a chapter's H200 result files (``data/results/<chapter>/*gpu.json`` and ``previous_runs/``), one per
provenance (date, commit). A row's rule is *written before the runs it judges* when its date precedes the run the row
comes from, otherwise *changed after* that run; either way the runs of the chapter dated before the rule are listed
(they existed when it was written).
Limits: lines moved between files without a rename start their history at the move, and a rule whose behaviour
changes through code outside its named lines (the verdict core, a judge function) is not dated by that change.

``python -m hybridlib.rule_history`` writes ``data/results/rule_history.json`` (atomically, with provenance); the
scoreboard reads that file and never runs git (a CI checkout may be shallow).
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hybridlib.atomic import write_json
from hybridlib.paths import REPO_ROOT
from hybridlib.planning import rule_rows
from hybridlib.provenance import collect
from hybridlib.verdicts import under

FILE = "rule_history.json"
PRESET = "gpu"
BEFORE = "written before the runs it judges"
_RESULT_FILE = re.compile(
    r"(^|/)[^/]*gpu(@[^/]*)?\.json$"
)  # gpu.json, efficiency_gpu.json, previous_runs/gpu@...
_COMMIT = "COMMIT "


@dataclass(frozen=True)
class Source:
    """Where a rule is defined: rows of ``chapter`` whose rule id is ``rule_id`` or under it (an arm's, a group's,
    :func:`hybridlib.verdicts.under`) are judged by the rule built from ``names`` (top-level names or
    ``Class.member``) of ``path``."""

    chapter: str
    rule_id: str
    path: str
    names: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.path}:{self.names[0]}"


_EFF = "hybridlib/findings/efficiency/report.py"
_FFA = "hybridlib/findings/first_fa/report.py"
_LAY = "hybridlib/findings/layout/report.py"
_LOL = "hybridlib/findings/lolcats/report.py"
_CKA = "hybridlib/findings/softcka/report.py"
_R = ("R_PAPER", "R_RANGE", "R_FACTOR", "R_REASON", "UNIT")
_T2 = (
    "PAPER_TABLE2",
    "TABLE2_ORDERINGS",
    "_TABLE2_FACTOR",
    "_TABLE2_REASON",
    "_nll_metric",
    "UNIT",
    "MIN_SEEDS",
)
_DIR = ("direction_rule", "_ACCURACY_ONLY", "UNIT", "MIN_SEEDS")
_HOLM = (  # what every SoftCKA rule reads: its signal, the languages the teacher resolves, primary rules, Holm
    "SIGNAL",
    "MIN_STUDENTS",
    "gap",
    "_tested",
    "teacher_resolves",
    "teacher_language_gap",
    "resolves",
    "RESOLVE_LEVEL",
    "secondary_holm",
    "is_primary",
    "PRIMARY",
    "HOLM_ALPHA",
)

#: Every rule of the H200 scoreboard and the lines that define it.
SOURCES: tuple[Source, ...] = (
    Source(
        "efficiency",
        "efficiency.inflation.yoruba_qwen",
        _EFF,
        ("INFLATION_YORUBA", "Paper.yoruba_inflation_qwen"),
    ),
    Source("efficiency", "efficiency.inflation.max", _EFF, ("INFLATION_MAX", "Paper.max_inflation_olmo")),
    Source("efficiency", "efficiency.memory_128k", _EFF, ("MEMORY_128K",)),
    Source(
        "efficiency",
        "efficiency.time_64k.predicted",
        _EFF,
        ("TIME_64K", "Paper.granite_64k_hours", "Paper.time_ratio_64k"),
    ),
    Source(
        "efficiency",
        "efficiency.time_64k.whole_models",
        _EFF,
        ("TIME_64K_WHOLE", "TIME_64K", "Paper.granite_64k_hours", "Paper.time_ratio_64k"),
    ),
    Source("efficiency", "efficiency.needle.language", _EFF, ("NEEDLE_LANGUAGE", "Paper.needle_64k")),
    Source("efficiency", "efficiency.mqar.deficit_shrinks", _EFF, ("MQAR_DEFICIT", "LEARNED")),
    Source("first_fa", "first_fa.event", _FFA, ("EVENT_RULE", "UNIT", "_NO_SIZE")),
    Source("first_fa", "first_fa.event_vs_swa", _FFA, ("SWA_RULE", "UNIT", "_NO_SIZE")),
    Source("first_fa", "first_fa.swa_no_event", _FFA, ("SWA_NONE_RULE", "UNIT", "_NO_SIZE")),
    Source("first_fa", "first_fa.locality", _FFA, ("LOCALITY_RULE", "UNIT")),
    Source("first_fa", "first_fa.detokenisation", _FFA, ("DETOK_RULE", "UNIT")),
    Source("layout_distillation", "layout.r", _LAY, ("r_rule", *_R)),
    Source("layout_distillation", "layout.every_fa_first", _LAY, ("EVERY_RULE", *_R)),
    Source(
        "layout_distillation",
        "layout.test_delta.reverse_periodic",
        _LAY,
        ("DELTA_RULE", "DELTA_PAPER", "DELTA_FACTOR", "DELTA_REASON", "UNIT"),
    ),
    Source(
        "layout_distillation",
        "layout.speedup",
        _LAY,
        ("speedup_rule", "_speedups", "SPEEDUP_PAPER", "SPEEDUP_OTHERS", "SPEEDUP_REASON", "UNIT"),
    ),
    Source(
        "layout_distillation",
        "layout.languages_improved.reverse_periodic",
        _LAY,
        ("IMPROVED_RULE", "IMPROVED_PAPER", "IMPROVED_TOLERANCE", "IMPROVED_REASON", "UNIT"),
    ),
    Source("layout_distillation", "layout.script_gain.reverse_periodic", _LAY, ("SCRIPT_RULE", "UNIT")),
    Source("layout_distillation", "layout.lower_lr.best_fa_first", _LAY, ("LR_RULE", "UNIT")),
    Source(
        "layout_distillation",
        "layout.budget_trend.reverse_periodic",
        _LAY,
        ("TREND_RULE", "TREND_MARGIN", "TREND_HIGH", "TREND_REASON", "UNIT", "trend_verdict", "slopes"),
    ),
    Source(
        "layout_distillation",
        "layout.budget_repetition.standard_periodic",
        _LAY,
        (
            "REPETITION_RULE",
            "REPETITION_MARGIN",
            "REPETITION_REASON",
            "UNIT",
            "repetition_verdict",
            "_unique_tokens",
        ),
    ),
    Source(
        "layout_distillation",
        "layout.lower_lr.reverse_periodic",
        _LAY,
        ("BUDGET_LR_RULE", "UNIT", "_lr_verdict"),
    ),
    Source("lolcats", "lolcats.table2", _LOL, ("table2_rule", *_T2)),
    Source("lolcats", "lolcats.table5", _LOL, ("table5_rows", "_cloze_metric", "_nll_metric", *_DIR)),
    Source("lolcats", "lolcats.table18", _LOL, ("table18_rows", "_cloze_metric", "_nll_metric", *_DIR)),
    Source("lolcats", "lolcats.table23", _LOL, ("table23_row", *_DIR)),
    Source("lolcats", "lolcats.table21", _LOL, ("table21_row", "MIN_SEEDS")),
    Source("lolcats", "lolcats.fig7", _LOL, ("fig7_row", "FIG7_RULE_METRIC", "MIN_SEEDS")),
    Source("lolcats", "lolcats.fig8", _LOL, ("fig8_row", "PAPER_FIG8_SPEEDUP", "MIN_SEEDS")),
    Source("softcka", "softcka.lower", _CKA, ("LOWER", "lower_verdict", *_HOLM)),
    Source("softcka", "softcka.jagged", _CKA, ("JAGGED", "jagged_verdict", "jaggedness", *_HOLM)),
    Source(
        "softcka",
        "softcka.jumps",
        _CKA,
        ("JUMPS", "jumps_verdict", "fa_jumps", "_has_jump", "_jumps_at", *_HOLM),
    ),
    Source(
        "softcka",
        "softcka.jumps_vs_swa",
        _CKA,
        (
            "JUMPS_VS_SWA",
            "jumps_vs_swa_verdict",
            "fa_jumps",
            "_has_jump",
            "_jumps_at",
            "swa_binds",
            "SWA_SHARE",
            *_HOLM,
        ),
    ),
    Source(
        "softcka",
        "softcka.jagged_vs_swa",
        _CKA,
        ("JAGGED_VS_SWA", "jagged_vs_swa_verdict", "jaggedness", "swa_binds", "SWA_SHARE", *_HOLM),
    ),
)


def source_of(chapter: str, rule_id: str, sources: Sequence[Source] = SOURCES) -> Source:
    """The one source of ``chapter`` whose rule id is ``rule_id`` or above it (:func:`hybridlib.verdicts.under`)."""
    found = [s for s in sources if s.chapter == chapter and under(rule_id, s.rule_id)]
    if len(found) != 1:
        raise LookupError(f"{len(found)} sources match {chapter} rule {rule_id!r}: {[s.key for s in found]}")
    return found[0]


def _defined(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """The functions, classes and assignments of a module or class body by name."""
    out: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            out[node.name] = node
        elif isinstance(node, ast.Assign):
            out.update({t.id: node for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
    return out


def definition(text: str, name: str) -> ast.stmt | None:
    """The statement defining ``name`` (a top-level name or ``Class.member``) in the Python source ``text``; None
    where it has none or does not parse."""
    try:
        scope = _defined(ast.parse(text).body)
    except SyntaxError:
        return None
    owner, _, member = name.rpartition(".")
    if owner:
        node = scope.get(owner)
        scope = _defined(node.body) if isinstance(node, ast.ClassDef) else {}
    return scope.get(member)


def span(node: ast.stmt) -> tuple[int, int]:
    """1-based inclusive lines of a statement, decorators included."""
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return start, node.end_lineno or node.lineno


#: Names of a rule's id where a definition passes or takes it (``Rule(..., id=...)``, ``rule_id``): labels, left out
#: of a definition's form, so giving a rule its id does not date the rule.
LABELS = frozenset({"id", "rule_id"})


class _Unlabel(ast.NodeTransformer):
    """Drops the :data:`LABELS` keywords of calls and the :data:`LABELS` parameters of functions (without defaults)."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        node.keywords = [k for k in node.keywords if k.arg not in LABELS]
        return self.generic_visit(node)

    def visit_arguments(self, node: ast.arguments) -> ast.AST:
        if not node.defaults and not any(node.kw_defaults):
            node.args = [a for a in node.args if a.arg not in LABELS]
            node.kwonlyargs = [a for a in node.kwonlyargs if a.arg not in LABELS]
            node.kw_defaults = node.kw_defaults[: len(node.kwonlyargs)]
        return self.generic_visit(node)


def form(node: ast.stmt | None) -> str | None:
    """What a definition says, whatever its layout: its syntax tree without positions (comments, whitespace,
    parentheses, trailing commas and the seams of concatenated strings are gone) and without its rule ids
    (:data:`LABELS`); None for no definition."""
    return None if node is None else ast.dump(_Unlabel().visit(copy.deepcopy(node)))


@dataclass(frozen=True)
class Commit:
    """A commit that changed a rule's lines: ``sha`` (full), ``date_utc`` (commit date, ISO 8601), ``subject``."""

    sha: str
    date_utc: str
    subject: str


def rewritten(log: str, current: str | None, before: Callable[[str, str], str | None]) -> Commit:
    """The commit that gave a definition its ``current`` form (:func:`form`), from the ``git log -L`` output of
    its lines (blocks headed ``COMMIT <sha> <date> <subject>``, newest first). ``before(sha, path)``: the
    definition's form in the parent of ``sha``, where the file was ``path``. A commit after which the form is
    unchanged (a reformat, a comment, code around it) is passed over; the oldest commit ends the walk."""
    commits = []
    for block in log.split(_COMMIT)[1:]:
        head, _, patch = block.partition("\n")
        sha, date, subject = (head.split(" ", 2) + ["", ""])[:3]
        commits.append(Commit(sha, _as_utc(date), subject))
        old = re.search(r"^--- (?:a/)?(\S+)", patch, re.M)
        if old is None or old.group(1) == "/dev/null" or before(sha, old.group(1)) != current:
            return commits[-1]
    if not commits:
        raise LookupError("the log holds no commit")
    return commits[-1]


def _as_utc(stamp: str) -> str:
    return datetime.fromisoformat(stamp).astimezone(timezone.utc).isoformat()


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def written(root: Path, source: Source) -> Commit:
    """The newest commit at ``HEAD`` that gave any of ``source``'s definitions its current form
    (:func:`rewritten`)."""
    text = _git(root, "show", f"HEAD:{source.path}")
    found = []
    for name in source.names:
        node = definition(text, name)
        if node is None:
            raise KeyError(f"{source.path} defines no {name}")

        def before(sha: str, path: str, name: str = name) -> str | None:
            old = subprocess.run(["git", "show", f"{sha}^:{path}"], cwd=root, capture_output=True, text=True)
            return form(definition(old.stdout, name)) if old.returncode == 0 else None

        a, b = span(node)
        log = _git(root, "log", f"--format={_COMMIT}%H %cI %s", "-L", f"{a},{b}:{source.path}", "HEAD")
        found.append(rewritten(log, form(node), before))
    return max(found, key=lambda c: c.date_utc)


def committed_runs(root: Path, chapter: str) -> list[dict[str, Any]]:
    """Every H200 run of ``chapter`` whose results were ever committed, oldest first: its ``date_utc`` and code
    ``commit`` (from the results' provenance) and ``results_commit``, the first commit that stored them."""
    folder = f"data/results/{chapter}"
    log = _git(
        root, "log", "--reverse", f"--format={_COMMIT}%H", "--name-only", "--diff-filter=AM", "--", folder
    )
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    for block in log.split(_COMMIT)[1:]:
        sha, *paths = block.split()
        for path in paths:
            if not _RESULT_FILE.search(path.removeprefix(folder)):
                continue
            prov = json.loads(_git(root, "show", f"{sha}:{path}")).get("provenance") or {}
            if prov.get("preset") == PRESET and prov.get("date_utc"):
                key = (_as_utc(prov["date_utc"]), str(prov.get("git_commit", "")))
                runs.setdefault(key, {"date_utc": key[0], "commit": key[1], "results_commit": sha})
    return sorted(runs.values(), key=lambda r: r["date_utc"])


def relation(
    written_utc: str, judged: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]
) -> tuple[str, list[Mapping[str, Any]]]:
    """``(status, earlier)``: :data:`BEFORE` when the rule dates from before the ``judged`` run (its ``date_utc``),
    else ``"changed after the run it judges"``; ``earlier``: the ``runs`` dated before the rule."""
    when = datetime.fromisoformat(written_utc)
    earlier = [r for r in runs if datetime.fromisoformat(r["date_utc"]) < when]
    before = when < datetime.fromisoformat(judged["date_utc"])
    return (BEFORE if before else "changed after the run it judges"), earlier


def history(root: Path = REPO_ROOT, sources: Sequence[Source] = SOURCES) -> dict[str, Any]:
    """Every H200 rule row with when its rule took its current form and the runs it judges and followed."""
    results = root / "data" / "results"
    dated: dict[str, Commit] = {}
    runs: dict[str, list[dict[str, Any]]] = {}
    rows = []
    for row in rule_rows(results, PRESET):
        source = source_of(row["chapter"], row["id"], sources)
        commit = dated.get(source.key) or dated.setdefault(source.key, written(root, source))
        chapter_runs = runs.get(row["chapter"]) or runs.setdefault(
            row["chapter"], committed_runs(root, row["chapter"])
        )
        prov = json.loads((results / row["chapter"] / row["source"]).read_text())["provenance"]
        judged = {"date_utc": _as_utc(prov["date_utc"]), "commit": prov.get("git_commit", "")}
        status, earlier = relation(commit.date_utc, judged, chapter_runs)
        rows.append(
            {
                "chapter": row["chapter"],
                "id": row["id"],
                "row": row["metric"],
                "source": source.key,
                "written": {"commit": commit.sha, "date_utc": commit.date_utc, "subject": commit.subject},
                "judged_run": judged,
                "status": status,
                "runs_before": earlier,
            }
        )
    after = [r for r in rows if r["status"] != BEFORE]
    return {
        "preset": PRESET,
        "method": __doc__.split("\n\n")[1].replace("\n", " "),
        "summary": f"{len(rows)} rule rows: {len(rows) - len(after)} {BEFORE}, {len(after)} changed after it",
        "rows": rows,
        "provenance": collect(PRESET),
    }


def load(results: Path) -> dict[tuple[str, str], Mapping[str, Any]]:
    """The committed rule history (``results/rule_history.json``) by (chapter, rule id); empty without one."""
    path = results / FILE
    if not path.is_file():
        return {}
    return {(r["chapter"], r["id"]): r for r in json.loads(path.read_text())["rows"]}


def describe(entry: Mapping[str, Any], run_utc: str | None) -> str:
    """The scoreboard's sentence for a rule history ``entry`` of a row from the run dated ``run_utc``."""
    if run_utc is None or _as_utc(run_utc) != entry["judged_run"]["date_utc"]:
        return "Rule history not yet generated for this run."
    w = entry["written"]
    when = f"{w['date_utc'][:10]} ({w['commit'][:7]})"
    if entry["status"] == BEFORE:
        text = f"Rule written {when}, before the runs it judges"
        earlier = entry["runs_before"]
        if earlier:
            listed = ", ".join(f"{r['date_utc'][:10]} {r['commit'][:7]}" for r in earlier)
            text += f"; after {len(earlier)} earlier H200 run{'s' * (len(earlier) != 1)} ({listed})"
        return text + "."
    run = entry["judged_run"]
    return (
        f"Rule changed {when}, after run {run['commit'][:7]} ({run['date_utc'][:10]}), which it also judges."
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m hybridlib.rule_history", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "data" / "results" / FILE)
    args = parser.parse_args(argv)
    record = history()
    write_json(args.out, record)
    print(f"wrote {args.out}: {record['summary']}")


if __name__ == "__main__":
    main()
