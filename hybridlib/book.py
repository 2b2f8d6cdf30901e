"""Execute the book's chapters with Papermill: ``python -m hybridlib.book run [chapter ...] --preset seminar``.

Chapters run in dependency order. Each executed notebook is written atomically where the book reads it
(``seminar``: in place under ``notebooks/``; ``gpu``/``paper``: ``book/<preset>/``), with provenance and a
cache key in its metadata. A chapter whose notebook source, resolved parameters, library code and data
manifests are unchanged is skipped, provided the execution record its parameter cell stored
(:func:`hybridlib.notebook.execution_record`) says so too. A failed execution's notebook is kept under
``_build/failed/``; temporary notebooks a killed run left are removed when the runner starts.

``--records-only`` judges the chapters that read the layout chapter's students from the students already in the
cache (a GPU campaign's records, ``python -m hybridlib.carry unpack``) and trains none, so the ``gpu`` preset's
layout, SoftCKA and first-FA chapters run on a CPU once its records are complete.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest.mock import patch

import yaml

from hybridlib import provenance
from hybridlib.atomic import atomic_path, file_lock, write_text
from hybridlib.findings import CHAPTERS, STUDENT_CHAPTERS, chapter, execution_order
from hybridlib.params import (
    PRESETS,
    RECORDS_ONLY_ENV,
    ChapterSpec,
    ParameterError,
    check_choice,
    check_device,
    near_match,
)
from hybridlib.paths import REPO_ROOT, book_notebook
from hybridlib.progress import LOG_ENV, OFF_ENV
from hybridlib.results import NOTEBOOK_ENV

NOTEBOOKS = REPO_ROOT / "notebooks"
FAILED = REPO_ROOT / "_build" / "failed"  # the notebook of a failed execution, traceback included
LOCKS = REPO_ROOT / "_build" / "locks"  # one lock per output notebook while the runner executes it


def output_path(spec: ChapterSpec, preset: str, out_dir: Path | None = None) -> Path:
    """Where the executed notebook of ``spec`` goes for ``preset`` (the book reads these paths)."""
    if out_dir is not None:
        return Path(out_dir) / spec.notebook
    return book_notebook(spec.notebook, preset)


def parse_overrides(pairs: Sequence[str]) -> dict[str, Any]:
    """``["steps=10", "layouts=[a, b]"]`` -> ``{"steps": 10, "layouts": ["a", "b"]}`` (values read as YAML).
    The preset is not one of them: it is chosen with ``--preset``."""
    parsed = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ParameterError(
                f"-p expects name=value in one argument (e.g. -p 'layouts=[sandwich, standard_periodic]'), got {pair!r}"
            )
        if name.strip() == "preset":
            raise ParameterError(
                f"-p {pair}: choose the preset with --preset {value.strip() or 'NAME'} "
                f"(allowed: {', '.join(PRESETS)}), not with -p"
            )
        try:
            parsed[name.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise ParameterError(
                f"-p {pair}: the value is not valid YAML ({getattr(err, 'problem', err)})"
            ) from None
    return parsed


def source_digest(notebook: Path) -> str:
    """Hash of a notebook's cell sources and tags, ignoring outputs and Papermill's injected cell."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    cells = [
        (c["cell_type"], "".join(c["source"]), sorted(c.get("metadata", {}).get("tags", [])))
        for c in nb["cells"]
        if "injected-parameters" not in c.get("metadata", {}).get("tags", [])
    ]
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()


def cache_key(spec: ChapterSpec, params: dict[str, Any]) -> str:
    """Content address of one chapter execution."""
    parts = [
        source_digest(NOTEBOOKS / spec.notebook),
        json.dumps(params, sort_keys=True),
        provenance.code_digest(),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def stored_key(path: Path) -> str | None:
    """The cache key recorded in an executed notebook, if any."""
    if not path.exists():
        return None
    return (
        json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("hybridlib", {}).get("cache_key")
    )


def stored_record(path: Path) -> dict[str, Any] | None:
    """The execution record (:func:`hybridlib.notebook.execution_record`) in an executed notebook's outputs."""
    if not path.exists():
        return None
    for cell in json.loads(path.read_text(encoding="utf-8")).get("cells", []):
        for output in cell.get("outputs", []):
            record = output.get("metadata", {}).get("hybridlib")
            if record is not None:
                return record
    return None


def up_to_date(spec: ChapterSpec, params: dict[str, Any], out: Path) -> bool:
    """Whether ``out`` holds this very execution: its cache key matches and so does the record its own execution
    stored (chapter, parameters, code digest), which a notebook copied from another run does not pass."""
    record = stored_record(out)
    return (
        stored_key(out) == cache_key(spec, params)
        and record is not None
        and record.get("chapter") == spec.name
        and record.get("params") == json.loads(json.dumps(params, sort_keys=True, default=str))
        and record.get("code_digest") == provenance.code_digest()
    )


def _lock(out: Path) -> Path:
    """The lock file of output notebook ``out``."""
    return LOCKS / (hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:16] + ".lock")


def remove_stale_temporaries(outs: Sequence[Path]) -> list[Path]:
    """Delete the temporary notebooks (``.<stem>.*.tmp.ipynb``) killed runs left beside ``outs``, except those of
    a run still executing (it holds the notebook's lock); returns the removed paths."""
    removed = []
    for out in outs:
        with file_lock(_lock(out), wait=False) as free:
            if free:
                for tmp in out.parent.glob(f".{out.stem}.*.tmp{out.suffix}"):
                    tmp.unlink(missing_ok=True)
                    removed.append(tmp)
    return removed


def kernel_config(socket_dir: str):
    """Kernel settings for Papermill: IPC transport (Unix sockets under ``socket_dir``, which should be
    private to this user) instead of TCP on localhost, so no port is open to other users and ipykernel
    does not warn "Kernel is running over TCP without encryption"."""
    from traitlets.config import Config

    return Config({"KernelManager": {"transport": "ipc", "ip": os.path.join(socket_dir, "kernel")}})


def run_chapter(
    spec: ChapterSpec,
    preset: str,
    overrides: dict[str, Any],
    out: Path,
    *,
    force: bool,
    log_output: bool = False,
) -> str:
    """Execute one chapter unless its cache key matches; returns ``"skipped"`` or ``"executed"``.
    ``log_output`` streams the cells' output (text progress bars, prints) to this process's stderr as it comes."""
    import papermill

    params = spec.resolve(preset, overrides)
    key = cache_key(spec, params)
    injected = {"preset": preset, **overrides}
    # text progress bars reach a log (widgets do not); in a stored page a bar is only residue
    env = {NOTEBOOK_ENV: str(out.resolve()), **({LOG_ENV: "1"} if log_output else {OFF_ENV: "1"})}
    with file_lock(_lock(out)):  # a second identical run waits here, then finds this one's notebook
        if not force and up_to_date(spec, params, out):
            return "skipped"
        start = time.monotonic()
        with (
            atomic_path(out) as tmp,
            patch.dict(os.environ, env),
            tempfile.TemporaryDirectory(prefix="hybridlib-kernel-") as sockets,
        ):
            try:
                papermill.execute_notebook(
                    str(NOTEBOOKS / spec.notebook),
                    str(tmp),
                    parameters=injected,
                    cwd=str(NOTEBOOKS),
                    kernel_name="python3",
                    progress_bar=not log_output,
                    request_save_on_cell_execute=False,
                    config=kernel_config(sockets),
                    **({"stdout_file": sys.stderr, "stderr_file": sys.stderr} if log_output else {}),
                )
            except Exception:
                if tmp.is_file() and tmp.stat().st_size:
                    kept = FAILED / preset / spec.notebook
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(tmp, kept)
                    print(
                        f"      the failed notebook, traceback included: {kept}", file=sys.stderr, flush=True
                    )
                raise
            _finish(tmp, spec, preset, params, key, start)
    return "executed"


def _finish(
    tmp: Path, spec: ChapterSpec, preset: str, params: dict[str, Any], key: str, start: float
) -> None:
    """Store the cache key and provenance (wall time since ``start``) in the executed notebook ``tmp``."""
    import nbformat

    nb = nbformat.read(tmp, as_version=4)
    record = provenance.collect(preset, params)
    record["wall_time_s"] = round(time.monotonic() - start, 1)
    nb.metadata["hybridlib"] = {"chapter": spec.name, "cache_key": key, "provenance": record}
    drop_unshown_widget_state(nb)
    nbformat.write(nb, tmp)


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def drop_unshown_widget_state(nb: Any) -> None:
    """Remove ``nb``'s stored widget state when no output shows a widget: state left by an earlier run's progress
    bars (the runner turns them off) makes every page load the widget manager from a CDN for nothing."""
    shown = any(WIDGET_VIEW in out.get("data", {}) for cell in nb.cells for out in cell.get("outputs", []))
    if not shown:
        nb.metadata.pop("widgets", None)


def run(
    names: Sequence[str],
    preset: str,
    overrides: dict[str, Any],
    *,
    out_dir: Path | None = None,
    force: bool = False,
    dependencies: bool = True,
    log_output: bool = False,
    records_only: bool = False,
) -> dict[str, str]:
    """Run ``names`` (default: every chapter) and, unless ``dependencies`` is off, the chapters they depend on;
    returns chapter -> status. Without dependencies a chapter still trains the students it needs itself.
    ``records_only``: run only chapters of :data:`~hybridlib.findings.STUDENT_CHAPTERS` (default: those), which
    then find every student in the cache (carried records) and train none, on any device and with any preset
    (:func:`hybridlib.params.records_only`); a missing student stops its chapter with its name."""
    check_choice("preset", preset, PRESETS)
    if records_only:
        names = list(names) or list(STUDENT_CHAPTERS)
        if bad := [name for name in execution_order(names) if name not in STUDENT_CHAPTERS]:
            raise ParameterError(
                f"--records-only runs only the chapters that read the layout chapter's students "
                f"({', '.join(STUDENT_CHAPTERS)}), not {', '.join(bad)}"
            )
        with patch.dict(os.environ, {RECORDS_ONLY_ENV: "1"}):
            return run(
                names,
                preset,
                overrides,
                out_dir=out_dir,
                force=force,
                dependencies=dependencies,
                log_output=log_output,
            )
    check_device(preset)
    order = execution_order(list(names) or None)
    if not dependencies and names:
        order = [name for name in order if name in names]
    known = {p.name for c in order for p in chapter(c).params}
    for name in overrides:
        if name not in known:
            raise ParameterError(
                f"no chosen chapter has a parameter {name!r}{near_match(name, known)} (chapters: "
                f"{', '.join(order)}); see `python -m hybridlib.book params`"
            )
    own = {c: {k: v for k, v in overrides.items() if k in {p.name for p in chapter(c).params}} for c in order}
    for name in order:  # every chapter's values are checked before the first one runs
        for note in chapter(name).notes(chapter(name).resolve(preset, own[name])):
            print(f"{name}: {note}", flush=True)
    for stale in remove_stale_temporaries([output_path(chapter(name), preset, out_dir) for name in order]):
        print(f"removed {stale}, the temporary notebook of a killed run", flush=True)
    statuses = {}
    for i, name in enumerate(order, 1):
        spec = chapter(name)
        out = output_path(spec, preset, out_dir)
        print(
            f"[{i}/{len(order)}] {name} ({preset}) -> "
            f"{out.relative_to(REPO_ROOT) if out.is_relative_to(REPO_ROOT) else out}",
            flush=True,
        )
        start = time.monotonic()
        statuses[name] = run_chapter(spec, preset, own[name], out, force=force, log_output=log_output)
        print(f"      {statuses[name]} in {time.monotonic() - start:.1f} s", flush=True)
    return statuses


def parameter_docs() -> str:
    """Markdown tables of every chapter's parameters and preset values (book/parameters.md)."""
    lines = [
        "# Parameters of every chapter",
        "",
        "Generated by `python -m hybridlib.book docs` from `hybridlib/findings/*/spec.py`; do not edit by hand.",
        "",
    ]
    for spec in CHAPTERS.values():
        lines += [
            f"## {spec.title}",
            "",
            f"Notebook `notebooks/{spec.notebook}`"
            + (f"; needs {', '.join(spec.depends_on)} first" if spec.depends_on else "")
            + ".",
            "",
            "| parameter | type | meaning | " + " | ".join(PRESETS) + " |",
            "|---|---|---|" + "---|" * len(PRESETS),
        ]
        for p in spec.params:
            cells = [f"`{p.defaults[pr]}`" for pr in PRESETS]
            lines.append(f"| `{p.name}` | {p.describe()} | {p.doc} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hybridlib.book",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="execute chapters with Papermill")
    run_p.add_argument("chapters", nargs="*", help=f"chapters (default: all): {', '.join(CHAPTERS)}")
    run_p.add_argument("--preset", default="seminar", help=f"one of {', '.join(PRESETS)}")
    run_p.add_argument(
        "-p",
        dest="params",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a parameter (YAML value), e.g. -p train_tokens=100000",
    )
    run_p.add_argument(
        "--out", type=Path, help="write executed notebooks here instead of where the book reads them"
    )
    run_p.add_argument("--force", action="store_true", help="execute even when nothing changed")
    run_p.add_argument(
        "--no-deps", action="store_true", help="run only the named chapters, not the chapters they depend on"
    )
    run_p.add_argument(
        "--log-output",
        action="store_true",
        help="stream the cells' output to stderr while they run (long runs on remote machines)",
    )
    run_p.add_argument(
        "--records-only",
        action="store_true",
        help="judge the layout, SoftCKA and first-FA chapters from the students in the cache (carried records: "
        "python -m hybridlib.carry unpack), training none; any preset on any device",
    )
    params_p = sub.add_parser("params", help="print the parameters of chapters")
    params_p.add_argument("chapters", nargs="*")
    sub.add_parser("docs", help="regenerate book/parameters.md")
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            overrides = parse_overrides(args.params)
            out_dir = args.out if args.out or not overrides else REPO_ROOT / "_build" / "runs" / args.preset
            run(
                args.chapters,
                args.preset,
                overrides,
                out_dir=out_dir,
                force=args.force,
                dependencies=not args.no_deps,
                log_output=args.log_output,
                records_only=args.records_only,
            )
        elif args.command == "params":
            for name in args.chapters or CHAPTERS:
                spec = chapter(name)
                print(f"{spec.name}: {spec.claim}\n  preset: str (allowed: {', '.join(PRESETS)})")
                for p in spec.params:
                    print(f"  {p.name}: {p.describe()} - {p.doc}; defaults {dict(p.defaults)}")
        else:
            write_text(REPO_ROOT / "book" / "parameters.md", parameter_docs())
    except ParameterError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # papermill execution errors: name the chapter's failing cell, keep old outputs
        if type(err).__name__ == "PapermillExecutionError":
            print(
                f"error: a chapter failed ({err.ename}: {err.evalue}); its previous notebook is unchanged",
                file=sys.stderr,
            )
            return 1
        raise
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
