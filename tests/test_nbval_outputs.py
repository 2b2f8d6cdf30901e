"""nbval compares only outputs that no CPU can change: every cell whose stored output it checks is listed here with
the reason it does not depend on trained weights or floating-point kernels (CPU-trained numbers move between
processors and ATen capabilities; ``book/rerun.md`` says by how much)."""

import json

from hybridlib.paths import REPO_ROOT

CHECK = "nbval-check-output"

#: (notebook, first line of the cell) -> why its output is the same on every CPU.
CHECKED = {
    (
        "01_efficiency.ipynb",
        "print(ratios.round(2).to_string())",
    ): "token counts of fixed texts per tokenizer",
    ("01_efficiency.ipynb", 'n_articles = udhr.to_pandas().groupby("lang")["article"].nunique()'): (
        "token counts of fixed texts per tokenizer"
    ),
    (
        "01_efficiency.ipynb",
        "oom = eff.oom_table(qwen, 131072)",
    ): "arithmetic on a model config and memory sizes",
    (
        "02_softcka.ipynb",
        'pd.DataFrame({"kind": [m.kind for m in probed], "layers": [m.n_layers for m in probed],',
    ): ("model structure: kinds, depths and full-attention layers"),
    (
        "02_softcka.ipynb",
        'pd.DataFrame(results[0].tokens, index=["English tokens", "other-language tokens"]).T',
    ): ("token counts of the probed UDHR articles"),
    ("05_layout_distillation.ipynb", "import time"): "the teacher's config and the layouts' FA layer sets",
}


def checked_cells() -> dict[tuple[str, str], str]:
    cells = {}
    for path in sorted((REPO_ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "code" and (
                CHECK in cell["metadata"].get("tags", []) or "NBVAL_CHECK" in source
            ):
                cells[(path.name, source.splitlines()[0])] = source
    return cells


def test_nbval_checks_only_the_reviewed_cells():
    assert sorted(checked_cells()) == sorted(CHECKED), (
        "a cell's stored output is checked by nbval: list it in CHECKED with the reason no CPU can change it, or "
        "leave it unchecked when it shows trained numbers"
    )


def test_the_softcka_summary_of_trained_students_is_not_checked():
    nb = json.loads((REPO_ROOT / "notebooks" / "02_softcka.ipynb").read_text(encoding="utf-8"))
    (summary,) = [
        c for c in nb["cells"] if "".join(c["source"]).startswith("summary = alignment.summary(results)")
    ]
    assert CHECK not in summary["metadata"].get("tags", [])
