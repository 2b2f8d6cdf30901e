"""The library's layering, checked on the source (an import-linter-style contract without the dependency).

Layers, lowest first: ``kernels`` -> base utilities -> ``hybridlib.data`` -> ``hybridlib.models`` -> the shared
core (``train``, ``convert``, ``layouts``, ``softcka``, ...) -> ``hybridlib.findings`` -> the book runner ->
``benchmarks`` (outside the package: it may import anything, and ``hybridlib`` and ``kernels`` never import it).
A module may import its own layer or lower ones, never a higher one, and first-party imports sit at module level (an
import inside a function hides a dependency) unless listed in :data:`DEFERRED` with its reason. Within their
layers, no finding imports another finding (what they share sits in a lower layer or in a module directly under
``hybridlib.findings``), and no page (``hybridlib.pages.<page>``) imports another page or the runner; the pages
share only :data:`PAGE_HELPERS`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = ("hybridlib", "kernels", "benchmarks")

#: (rank, module prefixes). Longest prefix wins, so ``hybridlib.findings.x`` is ranked by ``hybridlib.findings``.
LAYERS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (0, ("kernels",)),
    (
        1,
        (
            "hybridlib",
            "hybridlib.atomic",
            "hybridlib.paths",
            "hybridlib.progress",
            "hybridlib.params",
            "hybridlib.provenance",
            "hybridlib.results",
            "hybridlib.memo",
            "hybridlib.integrity",
        ),
    ),
    (2, ("hybridlib.data",)),
    (3, ("hybridlib.models", "hybridlib.losses")),
    (
        4,
        (
            "hybridlib.train",
            "hybridlib.recipes",
            "hybridlib.convert",
            "hybridlib.layouts",
            "hybridlib.softcka",
            "hybridlib.alignment",
            "hybridlib.probe",
            "hybridlib.metrics",
            "hybridlib.verdicts",
            "hybridlib.planning",
            "hybridlib.rule_history",
            "hybridlib.plots",
            "hybridlib.style",
        ),
    ),
    (5, ("hybridlib.findings",)),
    (
        6,
        (
            "hybridlib.book",
            "hybridlib.campaign",
            "hybridlib.notebook",
            "hybridlib.prepare",
            "hybridlib.pages",
        ),
    ),
    (7, ("benchmarks",)),
)

#: First-party imports allowed inside a function: ``(importing module, imported module)`` -> reason.
DEFERRED: dict[tuple[str, str], str] = {
    ("kernels.ops.conv_onepass", "kernels.ops._conv_onepass_triton"): (
        "a @triton.jit kernel's module imports Triton at its top; the CPU environment has no Triton"
    ),
}


#: the modules of ``hybridlib.pages`` that are no page: what the pages share, and the command that writes them all
PAGE_HELPERS = ("hybridlib.pages.tables", "hybridlib.pages.equivalence", "hybridlib.pages.__main__")
#: the book runner, which runs chapters; a page only reads what they wrote
RUNNER = "hybridlib.book"


def rank(module: str) -> int:
    """The layer of ``module`` (a dotted name); the longest matching prefix decides."""
    best, best_len = None, -1
    for r, prefixes in LAYERS:
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len:
                best, best_len = r, len(p)
    if best is None:
        raise KeyError(f"{module} is in no layer; add it to LAYERS in {Path(__file__).name}")
    return best


def modules() -> dict[str, Path]:
    """Every first-party module of the repository: dotted name -> file."""
    out = {}
    for pkg in FIRST_PARTY:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imports(name: str, path: Path) -> list[tuple[str, int, bool]]:
    """``(imported first-party module, line, inside a function)`` for each import statement of one file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            targets: list[str] = []
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(
                        package.split(".")[: len(package.split(".")) - child.level + 1] + [base]
                    ).strip(".")
                targets = [base] if base not in FIRST_PARTY else [f"{base}.{a.name}" for a in child.names]
            for t in targets:
                if t.split(".")[0] in FIRST_PARTY:
                    found.append((t, child.lineno, in_function))
            visit(child, nested)

    visit(tree, False)
    return found


EDGES = [
    (name, target, line, deferred)
    for name, path in modules().items()
    for target, line, deferred in imports(name, path)
]


def test_every_module_has_a_layer():
    for name in modules():
        rank(name)


def test_no_module_imports_a_higher_layer():
    bad = [
        f"{name}:{line} imports {target} (layer {rank(target)} > {rank(name)})"
        for name, target, line, _ in EDGES
        if rank(target) > rank(name)
    ]
    assert not bad, "\n".join(bad)


def test_first_party_imports_are_at_module_level():
    bad = [
        f"{name}:{line} imports {target} inside a function"
        for name, target, line, deferred in EDGES
        if deferred
        and not any(name == a and (target == b or target.startswith(b + ".")) for a, b in DEFERRED)
    ]
    assert not bad, "\n".join(bad)


def test_the_library_never_imports_the_benchmarks():
    """``benchmarks/`` sits outside the package: neither ``hybridlib`` nor ``kernels`` imports it, even deferred."""
    bad = [
        f"{name}:{line} imports {target}"
        for name, target, line, _ in EDGES
        if target.split(".")[0] == "benchmarks" and name.split(".")[0] != "benchmarks"
    ]
    assert not bad, "\n".join(bad)


def unit(module: str, package: str) -> str | None:
    """The ``package.<unit>`` that ``module`` lies in (``hybridlib.findings.layout.spec`` -> ``...findings.layout``);
    None outside ``package`` or for the package itself."""
    if not module.startswith(package + "."):
        return None
    return f"{package}.{module[len(package) + 1 :].split('.')[0]}"


def finding(module: str) -> str | None:
    """The finding package (a folder of ``hybridlib/findings/``) ``module`` belongs to; None for any other module (a
    shared one directly under ``hybridlib.findings``, such as ``rejudge``)."""
    name = unit(module, "hybridlib.findings")
    return name if name and (ROOT / name.replace(".", "/")).is_dir() else None


def page(module: str) -> str | None:
    """The page ``module`` is (None for a module outside ``hybridlib.pages`` or in :data:`PAGE_HELPERS`)."""
    name = unit(module, "hybridlib.pages")
    return None if name is None or name in PAGE_HELPERS else name


def test_no_finding_imports_another_finding():
    bad = [
        f"{name}:{line} imports {target}"
        for name, target, line, _ in EDGES
        if finding(name) and finding(target) and finding(name) != finding(target)
    ]
    assert not bad, "\n".join(bad)


def test_no_page_imports_another_page_or_the_runner():
    bad = [
        f"{name}:{line} imports {target}"
        for name, target, line, _ in EDGES
        if page(name)
        and (
            (page(target) and page(target) != page(name))
            or target == RUNNER
            or target.startswith(RUNNER + ".")
        )
    ]
    assert not bad, "\n".join(bad)


def test_page_helpers_import_no_page():
    """What the pages share depends on no page, so no page reaches another through it."""
    bad = [
        f"{name}:{line} imports {target}"
        for name, target, line, _ in EDGES
        if name in PAGE_HELPERS[:2] and page(target)
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    ("module", "expected_finding", "expected_page"),
    [
        ("hybridlib.findings.layout.spec", "hybridlib.findings.layout", None),
        ("hybridlib.findings.rejudge", None, None),
        ("hybridlib.findings", None, None),
        ("hybridlib.pages.speed", None, "hybridlib.pages.speed"),
        ("hybridlib.pages.tables", None, None),
        ("hybridlib.pagesx", None, None),
    ],
)
def test_the_units_the_contracts_compare(module, expected_finding, expected_page):
    assert (finding(module), page(module)) == (expected_finding, expected_page)


def test_the_page_contract_sees_the_pages():
    """The pages exist and import their shared helpers (a contract over no edges passes vacuously)."""
    pages = {page(name) for name in modules()} - {None}
    assert pages == {
        "hybridlib.pages.budgets",
        "hybridlib.pages.scoreboard",
        "hybridlib.pages.speed",
        "hybridlib.pages.wholemodel",
    }
    assert ("hybridlib.pages.speed", "hybridlib.pages.tables") in {(n, t) for n, t, _, _ in EDGES}


@pytest.mark.parametrize(
    "name",
    ["kernels.ops", "hybridlib.data.corpus", "hybridlib.train.distill", "benchmarks.distill_step"],
)
def test_the_checker_sees_imports(name):
    """An independent check that the parser finds imports at all (a contract over no edges passes vacuously)."""
    assert any(edge[0] == name for edge in EDGES)
