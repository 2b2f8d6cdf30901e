"""The book's chapters: one :class:`~hybridlib.params.ChapterSpec` each, in the book's reading order."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hybridlib.findings.efficiency.spec import SPEC as EFFICIENCY
from hybridlib.findings.first_fa.spec import SPEC as FIRST_FA
from hybridlib.findings.layout.spec import RULE_CHANGES as LAYOUT_RULE_CHANGES
from hybridlib.findings.layout.spec import SPEC as LAYOUT_DISTILLATION
from hybridlib.findings.lolcats.spec import SPEC as LOLCATS
from hybridlib.findings.softcka.spec import SPEC as SOFTCKA
from hybridlib.params import ChapterSpec, ParameterError, assigned_names, check_choice, check_device
from hybridlib.verdicts import RuleChange

CHAPTERS: dict[str, ChapterSpec] = {
    spec.name: spec for spec in (EFFICIENCY, SOFTCKA, FIRST_FA, LOLCATS, LAYOUT_DISTILLATION)
}

#: The chapters whose models are the layout chapter's students, which a records-only run
#: (:func:`hybridlib.params.records_only`) reads from carried records on any machine.
STUDENT_CHAPTERS = (LAYOUT_DISTILLATION.name, SOFTCKA.name, FIRST_FA.name)

#: Per chapter, its rules changed after a committed run they judged (:class:`~hybridlib.verdicts.RuleChange`).
RULE_CHANGES: dict[str, tuple[RuleChange, ...]] = {LAYOUT_DISTILLATION.name: LAYOUT_RULE_CHANGES}


def chapter(name: str) -> ChapterSpec:
    """The chapter called ``name``; an unknown name raises a :class:`ParameterError` listing the chapters."""
    return CHAPTERS[check_choice("chapter", name, list(CHAPTERS))]


def execution_order(names: list[str] | None = None) -> list[str]:
    """``names`` (default: all) plus everything they depend on, dependencies first."""
    order: list[str] = []

    def visit(name: str, stack: tuple[str, ...]) -> None:
        if name in stack:
            raise ParameterError(f"chapter dependency cycle: {' -> '.join(stack + (name,))}")
        if name not in order:
            for dep in chapter(name).depends_on:
                visit(dep, stack + (name,))
            order.append(name)

    for name in names or list(CHAPTERS):
        visit(name, ())
    return order


def notebook_params(name: str, namespace: Mapping[str, Any]) -> dict[str, Any]:
    """Resolve a notebook's parameters from its global ``namespace`` (the ``parameters`` cell's variables).

    Variables left ``None`` take the preset's default; every value is validated, a name that Papermill injected
    but the chapter does not know (IPython's history ``In``) stops with its near match, and a CUDA preset stops
    where there is no CUDA device.
    """
    spec = chapter(name)
    for injected in assigned_names(namespace.get("In") or ()):
        if injected != "preset" and not injected.startswith("PAPERMILL_"):  # papermill --inject-paths
            spec.param(injected)
    overrides = {p.name: namespace.get(p.name) for p in spec.params}
    values = spec.resolve(namespace.get("preset", "seminar"), overrides)
    check_device(values["preset"])
    return values


def sync_parameter_cells(notebooks: Path, *, write: bool = False) -> list[str]:
    """The chapter notebooks under ``notebooks`` whose ``parameters`` cell differs from its spec's
    (:meth:`~hybridlib.params.ChapterSpec.parameters_cell`); ``write`` rewrites those cells, nothing else."""
    import nbformat

    stale = []
    for spec in CHAPTERS.values():
        path = notebooks / spec.notebook
        nb = nbformat.read(path, as_version=4)
        cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
        if cell.source != spec.parameters_cell():
            stale.append(spec.notebook)
            if write:
                cell.source = spec.parameters_cell()
                nbformat.write(nb, path)
    return stale
