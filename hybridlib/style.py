"""The book's one plot style: figures drawn for the 784 px text column, fonts that stay readable there.

A figure :data:`COLUMN_WIDTH_IN` wide at :data:`DPI` fills the column at 1:1, so a font of ``p`` points shows
as ``p * DPI / 72`` px; :data:`MIN_FONT_PT` keeps every text at least :data:`MIN_FONT_PX` px even when a figure
is shrunk to 80% (a tight bounding box, a narrow screen's first step). The browser test assumes these values
for every figure of the built book. :func:`apply` is called by ``hybridlib.notebook.start``; chapters never
set rcParams themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MultipleLocator

from hybridlib.atomic import atomic_path
from hybridlib.verdicts import Outcome

TEXT_WIDTH_PX = 784  # the main column of the book's pages (sphinx-book-theme, desktop)
DPI = 100
COLUMN_WIDTH_IN = TEXT_WIDTH_PX / DPI
MIN_FONT_PX = 10  # smallest text as displayed
MIN_FONT_PT = 9  # smallest text drawn: 12.5 px at 1:1
BASE_FONT_PT = 10

#: 13 categorical colours, one per language of the UDHR comparison set (tab10, then black, a dark gold and a
#: light violet): neighbours differ by at least 25 units of CIE L*a*b* distance (tests/test_style.py).
PALETTE: tuple[str, ...] = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#000000",
    "#b8860b",
    "#c5b0d5",
)

#: One colour per verdict, for the verdict chart and the verdict words of every page (the CSS that
#: ``python -m hybridlib.pages.scoreboard`` writes): blue for the paper's side, red against it, greys for no decision,
#: so that the two ends stay apart for red-green colour-blind readers and in greyscale.
OUTCOME_COLORS: dict[Outcome, str] = {
    Outcome.REPRODUCED: "#2166ac",
    Outcome.DIRECTION_ONLY: "#92c5de",
    Outcome.INCONCLUSIVE: "#a3a3a3",
    Outcome.CONTRADICTED: "#b2182b",
    Outcome.NOT_TESTED: "#e8e8e8",
}

RC: dict[str, object] = {
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "figure.figsize": (COLUMN_WIDTH_IN, 3.6),
    "font.size": BASE_FONT_PT,
    "axes.titlesize": BASE_FONT_PT + 1,
    "axes.labelsize": BASE_FONT_PT,
    "figure.titlesize": BASE_FONT_PT + 2,
    "xtick.labelsize": MIN_FONT_PT,
    "ytick.labelsize": MIN_FONT_PT,
    "legend.fontsize": MIN_FONT_PT,
    "legend.title_fontsize": MIN_FONT_PT,
    "legend.framealpha": 0.85,
    "lines.linewidth": 1.6,
    "lines.markersize": 3.5,  # markers mark the measured points without hiding the line
}


def apply() -> None:
    """Set the seaborn theme (white grid), the 13-colour palette and :data:`RC` for every later figure."""
    sns.set_theme(context="notebook", style="whitegrid", palette=list(PALETTE), rc=RC)
    mpl.rcParams.update(RC)


def figsize(nrows: int = 1, panel_height: float = 3.0) -> tuple[float, float]:
    """Width and height (inches) of a figure spanning the text column with ``nrows`` rows of panels."""
    if nrows < 1:
        raise ValueError(f"nrows must be >= 1, got {nrows}")
    return COLUMN_WIDTH_IN, panel_height * nrows


def language_colors(languages: Sequence[str]) -> dict[str, str]:
    """One :data:`PALETTE` colour per language, in the given order (at most 13 languages)."""
    if len(languages) > len(PALETTE):
        raise ValueError(f"{len(languages)} languages, the palette separates {len(PALETTE)}")
    return dict(zip(languages, PALETTE))


def layer_ticks(ax: Axes, n_layers: int, every: int = 5) -> None:
    """Layer-index x axis of ``n_layers`` layers: a tick per layer, a label on every ``every``-th (0, 5, ...)."""
    if n_layers < 1 or every < 1:
        raise ValueError(f"n_layers and every must be >= 1, got {n_layers}, {every}")
    ax.xaxis.set_major_locator(MultipleLocator(every if n_layers > 2 * every else 1))
    ax.xaxis.set_minor_locator(MultipleLocator(1))
    ax.set_xlim(-0.5, n_layers - 0.5)


def fit(obj: Any) -> Figure:
    """Shrink a matplotlib ``Figure`` or a seaborn grid to the text column: width :data:`COLUMN_WIDTH_IN`, height
    scaled by the same factor, a grid's legend moved below its panels (where it adds height, not width)."""
    fig = getattr(obj, "figure", obj)
    if not isinstance(fig, Figure):
        raise TypeError(f"obj must be a matplotlib Figure or a seaborn grid, got {type(obj).__name__}")
    width, height = fig.get_size_inches()
    legend = getattr(obj, "legend", None)
    entries = len(legend.get_texts()) if legend is not None and not callable(legend) else 0  # a grid's legend
    if entries:
        sns.move_legend(obj, "upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(entries, 5), frameon=False)
    if width > COLUMN_WIDTH_IN:
        fig.set_size_inches(COLUMN_WIDTH_IN, height * COLUMN_WIDTH_IN / width)
    fig.tight_layout()
    return fig


def save_png(obj: Any, path: Path, **savefig: Any) -> Path:
    """Write ``obj`` (:func:`fit` to the column) to ``path`` as the book's PNG (:data:`DPI`, tight bounding box;
    ``savefig``: more of matplotlib's ``savefig`` arguments) atomically, its folder made, and close it."""
    fig = fit(obj)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=DPI, bbox_inches="tight", format="png", **savefig)
    plt.close(fig)
    return path


def _luminance(hex_colour: str) -> float:
    """WCAG relative luminance of an sRGB hex colour."""
    rgb = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def text_color(background: str) -> str:
    """Black or white, whichever contrasts more with ``background`` (a ``#rrggbb`` colour)."""
    light = _luminance(background)
    return "#ffffff" if (1.05 / (light + 0.05)) > ((light + 0.05) / 0.05) else "#000000"
