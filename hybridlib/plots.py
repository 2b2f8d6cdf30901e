"""Figure helpers shared by the chapters, drawn in :mod:`hybridlib.style` for the book's text column.

Each figure helper returns the matplotlib Figure it drew; :func:`curve_selector` returns a plain-HTML chart with
drop-downs that works in the static book (no kernel, no CDN); :func:`flat_note` is the sentence a chapter prints
instead of a figure whose values do not vary.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, NullFormatter

from hybridlib.style import (
    COLUMN_WIDTH_IN,
    MIN_FONT_PT,
    OUTCOME_COLORS,
    PALETTE,
    figsize,
    layer_ticks,
    text_color,
)
from hybridlib.verdicts import Outcome

MAX_MARKED = 40  # points per line up to which every point gets a marker


def _require(frame: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"frame lacks column(s) {missing}; it has {list(frame.columns)}")


MAX_LINES = (
    8  # lines per panel (colour x line style) above which lines_vs_context gives each line style a row
)
CHAR_WIDTH_EM = 0.6  # mean width of a label character, in font sizes (DejaVu Sans, a little generous)


def _wrap(text: str, width_in: float, fontsize_pt: float) -> str:
    """``text`` broken into lines that fit ``width_in`` inches at ``fontsize_pt``: at spaces, or after ``_``,
    ``+``, ``-`` inside a long name (``standard_periodic+swa`` -> ``standard_periodic+`` / ``swa``)."""
    chars = max(8, int(width_in * 72 / (CHAR_WIDTH_EM * fontsize_pt)))
    lines, line = [], ""
    for token in re.split(r"(?<=[\s_+\-])", text):
        if line and len(line + token.rstrip()) > chars:
            lines.append(line.rstrip())
            line = ""
        line += token
    return "\n".join(lines + [line.rstrip()])


def _panel_title(ax, text: str) -> None:
    """``text`` as ``ax``'s title, wrapped to the panel's width (neighbouring titles never run together)."""
    size = plt.rcParams["axes.titlesize"]
    size = size if isinstance(size, (int, float)) else plt.rcParams["font.size"]
    ax.set_title(_wrap(text, ax.get_position().width * ax.figure.get_size_inches()[0], size))


def _suptitle(fig: Figure, title: str) -> None:
    """``title`` above the panels, laid out so that it never touches the first row's titles (tight_layout alone
    leaves it over them in a tall figure)."""
    text = fig.suptitle(title)
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    panels = [ax.get_tightbbox(renderer).y1 for ax in fig.axes if ax.get_visible()]
    gap = text.get_window_extent(renderer).y0 - max(panels)  # px; negative: the title over the panels
    fig.subplots_adjust(top=fig.subplotpars.top + (gap - 6) / fig.bbox.height)


def _legend_below(fig: Figure, handles, labels: Sequence[str], title: str | None = None) -> None:
    """One figure legend below the panels, as many entries a row as fit the text column (~110 characters at
    the book's legend font, a marker ~6)."""
    per_row = max(1, 110 // (max(map(len, labels)) + 6))
    fig.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=min(len(labels), 5, per_row),
        frameon=False,
        title=title,
    )


def flat_note(frame: pd.DataFrame, y: str, what: str) -> str | None:
    """A sentence to print instead of a figure whose ``y`` values are all the same (a flat, empty-looking plot);
    None when they vary. ``what`` names the quantity (e.g. "passkey accuracy")."""
    _require(frame, [y])
    values = frame[y].dropna().unique()
    if len(values) > 1:
        return None
    if len(values) == 0:
        return f"Figure not drawn: no {what} was measured."
    return (
        f"Figure not drawn: {what} is {values[0]:g} at every point ({frame[y].notna().sum()} values), a flat "
        "plot; the table gives the numbers."
    )


def heatmap(
    table: pd.DataFrame,
    title: str,
    fmt: str = ".1f",
    cmap: str = "rocket_r",
    center: float | None = None,
    size: tuple[float, float] | None = None,
) -> Figure:
    """Annotated heat map of a wide ``table`` (rows x columns as laid out), sized to its cells: the text column's
    width (a wider ``size`` is narrowed to it, so that no later shrink makes its text smaller) and, without
    ``size``, :data:`HEATMAP_ROW_IN` per row. Column labels that would run together are turned upright; the
    numbers lose their leading zero (``-.030``) when one is wider or taller than its cell, and are left out of
    the cells when that is still too wide (the colour bar reads)."""
    width, height = size or (COLUMN_WIDTH_IN, HEATMAP_ROW_IN * len(table) + 1.8)
    fig, ax = plt.subplots(figsize=(min(width, COLUMN_WIDTH_IN), height))
    sns.heatmap(
        table,
        annot=True,
        fmt=fmt,
        cmap=cmap,
        center=center,
        ax=ax,
        cbar_kws={"shrink": 0.8},
        annot_kws={"fontsize": MIN_FONT_PT},
    )
    ax.set_title(_wrap(title, COLUMN_WIDTH_IN, MIN_FONT_PT + 2))
    ax.tick_params(axis="y", rotation=0)
    ax.tick_params(axis="x", rotation=0)
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    if _overlapping(ax.get_xticklabels(), renderer):
        ax.tick_params(axis="x", rotation=90)
        fig.tight_layout()
    cell_w = ax.get_window_extent(renderer).width / max(1, table.shape[1])
    cell_h = ax.get_window_extent(renderer).height / max(1, len(table))

    def too_big() -> bool:
        boxes = [t.get_window_extent(renderer) for t in ax.texts]
        return any(b.width > 0.92 * cell_w or b.height > 0.92 * cell_h for b in boxes)

    if too_big():  # first the shorter form of a fraction: -0.030 -> -.030
        for text in ax.texts:
            text.set_text(re.sub(r"^(-?)0\.", r"\1.", text.get_text()))
    if too_big():
        for text in list(ax.texts):
            text.remove()
        fig.tight_layout()
    return fig


HEATMAP_ROW_IN = 0.4  # height of a heat map row: a 9-point number with room above and below


def _overlapping(texts, renderer, pad_px: float = 2.0) -> bool:
    """Whether any two of the visible, non-empty ``texts`` (tick labels) overlap once drawn, ``pad_px`` apart."""
    boxes = [
        t.get_window_extent(renderer).padded(pad_px / 2) for t in texts if t.get_visible() and t.get_text()
    ]
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def lines_vs_context(
    frame: pd.DataFrame,
    x: str,
    y: str,
    hue: str,
    title: str,
    col: str | None = None,
    style: str | None = None,
    logx: bool = True,
    logy: bool = False,
    ylabel: str | None = None,
    hlines: dict[str, float] | None = None,
) -> Figure:
    """Line plot of ``y`` against context ``x`` per ``hue`` (optionally faceted by ``col``, two facets per row),
    log-x by default, legend below the panels; a marker on each point only where lines have at most
    :data:`MAX_MARKED` points (more would hide the curve). With ``style`` the lines differ in dash and marker
    too; where colours x styles exceed :data:`MAX_LINES` lines a panel, each ``style`` value gets its own row of
    panels instead (no panel holds more lines than it can tell apart). Every panel has its x tick labels; the
    y label stands left of the first column only; the legend lists values, never the column names (its title
    says which column is colour and which line style).

    ``hlines`` draws labelled horizontal reference lines (e.g. card capacities) on every facet.
    """
    _require(frame, [c for c in (x, y, hue, col, style) if c])
    row = style if style and frame[hue].nunique() * frame[style].nunique() > MAX_LINES else None
    if row:
        style = None
    ncols = (frame[col].nunique() if row else min(2, frame[col].nunique())) if col else 1
    height = 3.0 if ncols == 2 else 3.4
    if row:
        height = 2.5
    marked = frame[x].nunique() <= MAX_MARKED
    lines = (
        {"style": style, "markers": marked, "dashes": True} if style else {"marker": "o" if marked else None}
    )
    grid = sns.relplot(
        data=frame,
        x=x,
        y=y,
        hue=hue,
        col=col,
        row=row,
        kind="line",
        col_wrap=ncols if col and not row else None,
        height=height,
        aspect=COLUMN_WIDTH_IN / ncols / height,
        facet_kws={"sharey": False, "legend_out": False},
        **lines,
    )
    if row:
        grid.set_titles(template="{row_name}, {col_var} {col_name}" if col else "{row_name}")
    for i, ax in enumerate(grid.axes.flat):
        if logx:
            ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        for label, value in (hlines or {}).items():
            ax.axhline(value, color="grey", lw=0.8, ls="--")
            ax.text(ax.get_xlim()[0], value, f" {label}", va="bottom", fontsize=MIN_FONT_PT, color="grey")
        ax.set_ylabel((ylabel or y) if i % ncols == 0 else "")
        ax.set_xlabel(x)
        ax.tick_params(axis="x", labelbottom=True)
    if grid.legend is not None:
        entries = [
            (h, t.get_text())
            for h, t in zip(grid.legend.legend_handles, grid.legend.texts)
            if t.get_text() not in {hue, style}  # seaborn's group titles, drawn as entries
        ]
        grid.legend.remove()
        grid._legend = None
        _legend_below(
            grid.figure,
            [h for h, _ in entries],
            [label for _, label in entries],
            title=f"{hue} (colour), {style} (line)" if style else hue,
        )
    grid.figure.tight_layout()
    grid.figure.suptitle(title, y=1.02)
    return grid.figure


def beside_paper(
    frame: pd.DataFrame,
    x: str,
    ours: str,
    paper: str,
    *,
    title: str,
    ours_label: str,
    paper_label: str,
    hue: str | None = None,
    logy: bool = False,
) -> Figure:
    """One row per run (``frame``: the arm ``x``, the run's value ``ours``, the paper's value of that arm
    ``paper``, NaN where the paper has none, optionally a ``hue``): our runs (small dots) and their mean (a
    diamond) in the left panel, the paper's values in the right, the arms in the same order along both x axes, so
    that the two orderings can be set side by side although the metrics differ. ``logy``: a panel whose values
    span a factor of 10 or more on a log scale (perplexities), its ticks in plain numbers."""
    _require(frame, [c for c in (x, ours, paper, hue) if c])
    if frame.empty:
        raise ValueError("frame has no rows: nothing to draw")
    order = [str(v) for v in dict.fromkeys(frame[x])]
    frame = frame.assign(**{x: frame[x].astype(str)})
    fig, (left, right) = plt.subplots(1, 2, figsize=figsize(1, panel_height=2.9))
    common = {"x": x, "hue": hue, "order": order, "dodge": 0.35 if hue else False}
    sns.stripplot(data=frame, y=ours, ax=left, alpha=0.45, size=3.5, legend=False, jitter=0.08, **common)
    sns.pointplot(
        data=frame, y=ours, ax=left, errorbar=None, linestyles="none", markers="D", legend=bool(hue), **common
    )
    shown = frame.drop_duplicates([x] + ([hue] if hue else [])).dropna(subset=[paper])
    sns.pointplot(data=shown, y=paper, ax=right, errorbar=None, linestyles="none", legend=False, **common)
    right.set_xlim(left.get_xlim())
    for ax, values in ((left, frame[ours]), (right, shown[paper])):
        if logy and values.min() > 0 and values.max() >= 10 * values.min():
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
    font = plt.rcParams["font.size"]
    per_arm = left.get_position().width * fig.get_size_inches()[0] / len(order)
    height = left.get_position().height * fig.get_size_inches()[1]
    for ax, label, who in ((left, ours_label, "this book"), (right, paper_label, "the paper")):
        ax.set_ylabel(_wrap(label, height, font))
        ax.set_xlabel(x.replace("_", " "))
        _panel_title(ax, who)
        ax.set_xticks(range(len(order)), [_wrap(a.replace(", ", " "), per_arm, font) for a in order])
    if hue:
        handles, labels = left.get_legend_handles_labels()
        left.get_legend().remove()
        _legend_below(fig, handles, labels, title=hue.replace("_", " "))
    _suptitle(fig, title)
    return fig


def _shade_layers(ax, layers: Sequence[int], label: str = "full attention") -> None:
    """Shade each layer in ``layers`` (a band one layer wide) on ``ax``; one legend entry."""
    for i, layer in enumerate(layers):
        ax.axvspan(
            layer - 0.5, layer + 0.5, color="tab:orange", alpha=0.15, lw=0, label=label if i == 0 else None
        )


def alignment_curve(
    frame: pd.DataFrame,
    fa_layers: Sequence[int],
    title: str,
    ax=None,
    y: str = "softcka",
    hue: str = "pairing",
    legend: bool = True,
) -> Figure:
    """``y`` per layer (mean over the rows of each layer, band = interquartile range over languages) per ``hue``,
    ``fa_layers`` shaded, a label on every 5th layer. ``frame``: a tidy frame with columns layer, ``y``, ``hue``."""
    _require(frame, ["layer", y, hue])
    if ax is None:
        _, ax = plt.subplots(figsize=figsize(panel_height=3.4))
    n_layers = int(frame["layer"].max()) + 1
    if len(fa_layers) < n_layers:
        _shade_layers(ax, fa_layers)
    bands = 0.2 if frame[hue].nunique() <= 2 else 0.07  # more curves: fainter bands, overlaps still read
    sns.lineplot(
        data=frame,
        x="layer",
        y=y,
        hue=hue,
        style=hue,
        marker="o",
        errorbar=("pi", 50),
        err_kws={"alpha": bands, "lw": 0},
        ax=ax,
        legend=legend,
    )
    ax.set(title=title, xlabel="layer", ylabel=y)
    layer_ticks(ax, n_layers)
    if legend:
        ax.legend()
    ax.figure.tight_layout()
    return ax.figure


def alignment_grid(
    frame: pd.DataFrame,
    fa_layers: dict[str, Sequence[int]],
    title: str,
    y: str = "softcka",
    hue: str = "pairing",
    ncols: int = 2,
    col: str = "model",
) -> Figure:
    """One :func:`alignment_curve` panel per value of ``col`` (default: per model; e.g. ``col="lang"``,
    ``hue="model"`` overlays the models in a panel per language), in ``frame``'s order, ``ncols`` per row across
    the text column at the book's font size (no later shrink), titles wrapped to their panel; ``fa_layers`` maps
    a panel's value to the layers it shades (a value it lacks: none). One legend, below the panels."""
    _require(frame, [col])
    panels = list(dict.fromkeys(frame[col]))
    ncols = min(ncols, len(panels))
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=figsize(nrows, panel_height=2.8 if ncols <= 2 else 2.4),
        squeeze=False,
        sharey=True,
    )
    for i, (ax, panel) in enumerate(zip(axes.flat, panels)):
        rows = frame[frame[col] == panel]
        alignment_curve(rows, fa_layers.get(panel, ()), "", ax=ax, y=y, hue=hue, legend=i == 0)
        _panel_title(ax, str(panel))
        if i % ncols:
            ax.set_ylabel("")
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    first = axes.flat[0].get_legend()
    handles, labels = list(first.legend_handles), [t.get_text() for t in first.texts]
    shaded = [p for ax in axes.flat for p in ax.patches if p.get_label() == "full attention"]
    if shaded and "full attention" not in labels:  # the first panel is all attention, a later one shaded
        handles, labels = [shaded[0], *handles], ["full attention", *labels]
    _legend_below(fig, handles, labels)
    first.remove()
    _suptitle(fig, title)
    return fig


def layer_bars(
    frame: pd.DataFrame,
    y: str,
    n_layers: int,
    title: str,
    fa_layers: Mapping[str, Sequence[int]] | None = None,
    hue: str | None = None,
    ncols: int = 2,
) -> Figure:
    """A bar per layer (columns ``model``, ``layer``, ``y``), one panel per model in ``frame``'s order, ``ncols``
    per row across the text column, a zero line and every 5th layer labelled. Without ``hue`` the bars of a
    model's full-attention layers (``fa_layers``; all-attention models stay plain) are orange; with ``hue`` its
    values are side-by-side bars with one legend below the panels. Titles are wrapped to their panel; the y
    label stands left of the first column only."""
    _require(frame, ["model", "layer", y] + ([hue] if hue else []))
    models = list(dict.fromkeys(frame["model"]))
    groups = list(dict.fromkeys(frame[hue])) if hue else [None]
    nrows = -(-len(models) // ncols)
    fig, axes = plt.subplots(
        nrows, min(ncols, len(models)), figsize=figsize(nrows, panel_height=2.4), squeeze=False, sharey=True
    )
    width = 0.8 / len(groups)
    for ax, model in zip(axes.flat, models):
        rows = frame[frame["model"] == model]
        fa = set((fa_layers or {}).get(model, ()))
        for i, group in enumerate(groups):
            part = rows if group is None else rows[rows[hue] == group]
            x = part["layer"].to_numpy() + (i - (len(groups) - 1) / 2) * width
            if group is None:
                colors = [
                    PALETTE[1] if (layer in fa and len(fa) < n_layers) else PALETTE[0]
                    for layer in part["layer"]
                ]
                ax.bar(x, part[y], width=width, color=colors)
            else:
                ax.bar(x, part[y], width=width, color=PALETTE[i], label=str(group))
        ax.axhline(0, color="black", lw=0.8)
        ax.set(xlabel="layer", ylabel=y if ax.get_subplotspec().is_first_col() else "")
        _panel_title(ax, str(model))
        layer_ticks(ax, n_layers)
    for ax in list(axes.flat)[len(models) :]:
        ax.set_visible(False)
    if hue:
        handles, labels = axes.flat[0].get_legend_handles_labels()
        _legend_below(fig, handles, labels, title=hue)
    _suptitle(fig, _wrap(title, COLUMN_WIDTH_IN, MIN_FONT_PT + 3))
    return fig


def throughput_figure(frame: pd.DataFrame, title: str) -> Figure:
    """Decoded tokens/s, peak memory while decoding and cache size against batch size (log 2), one line per
    ``model``, from ``generation_throughput`` rows with a ``model`` column; out-of-memory points are dotted
    lines labelled with the phase that ran out."""
    _require(frame, ["model", "batch", "status", "oom_in", "tokens_per_s", "decode_peak_gib", "cache_gib"])
    panels = {
        "tokens_per_s": "decoded tokens / s",
        "decode_peak_gib": "peak memory decoding (GiB)",
        "cache_gib": "cache after decoding (GiB)",
    }
    fig, axes = plt.subplots(2, 2, figsize=figsize(2, panel_height=2.9))
    ok = frame[frame.status == "ok"]
    for i, (ax, (column, label)) in enumerate(zip(axes.flat, panels.items())):
        sns.lineplot(data=ok, x="batch", y=column, hue="model", marker="o", ax=ax, legend=i == 0)
        for batch, rows in frame[frame.status == "oom"].groupby("batch"):
            ax.axvline(batch, ls=":", c="grey")
            text = "OOM: " + ", ".join(
                f"{m.split()[0]} in {phase}" for m, phase in zip(rows.model, rows.oom_in)
            )
            ax.annotate(
                text,
                (batch, 0),
                xycoords=("data", "axes fraction"),
                textcoords="offset points",
                xytext=(-2, 4),
                fontsize=MIN_FONT_PT,
                rotation=90,
                ha="right",
                va="bottom",
            )
        ax.set_xscale("log", base=2)
        ax.set_ylabel(label)
    legend_ax = axes.flat[len(panels)]  # the fourth slot holds the legend, off the data
    handles, labels = axes.flat[0].get_legend_handles_labels()
    axes.flat[0].get_legend().remove()
    legend_ax.axis("off")
    legend_ax.legend(handles, labels, title="model", loc="center")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


#: The verdict chart's width (inches) and font (points): shown at 1:1 in the text column and shrunk to a phone's
#: 356 px column (a 420 px screen), its smallest text stays above 10 px.
VERDICT_CHART_WIDTH_IN = 5.6
VERDICT_CHART_FONT_PT = 12


def verdict_bars(panels: Mapping[str, Mapping[str, Mapping[str, int]]]) -> Figure:
    """Stacked horizontal bars of rules per outcome: one panel per key of ``panels`` (e.g. a preset), in it one
    bar per chapter (the inner keys, top to bottom, each named above its bar) split into its outcomes' counts
    (outcome word -> rules), each segment in :data:`~hybridlib.style.OUTCOME_COLORS` and labelled with its count;
    the legend above. A chapter without counts gets a note instead of a bar."""
    chapters = max(len(bars) for bars in panels.values())
    font = VERDICT_CHART_FONT_PT
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(VERDICT_CHART_WIDTH_IN, 0.6 + len(panels) * (0.45 + 0.52 * chapters)),
        sharex=True,
        squeeze=False,
    )
    for ax, (title, bars) in zip(axes[:, 0], panels.items()):
        for y, (name, counts) in enumerate(bars.items()):
            ax.text(0, y - 0.04, name, va="bottom", fontsize=font)
            left = 0
            for outcome, colour in OUTCOME_COLORS.items():
                n = counts.get(outcome.value, 0)
                if n:
                    ax.barh(y + 0.2, n, left=left, color=colour, edgecolor="white", linewidth=1, height=0.42)
                    ax.text(
                        left + n / 2,
                        y + 0.2,
                        str(n),
                        ha="center",
                        va="center",
                        fontsize=font,
                        color=text_color(colour),
                    )
                left += n
            if not left:
                ax.text(0, y + 0.2, "no run under the rules", va="center", fontsize=font, style="italic")
        ax.set_yticks([])
        ax.set_ylim(len(bars) - 0.45, -0.5)
        ax.set_title(title, fontsize=font + 1, loc="left", fontweight="bold")
        ax.tick_params(axis="x", labelsize=font)
    axes[-1, 0].set_xlabel("rules", fontsize=font)
    handles = [
        Patch(facecolor=c, edgecolor="0.6", linewidth=0.5, label=o.value) for o, c in OUTCOME_COLORS.items()
    ]
    fig.legend(
        handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, fontsize=font, frameon=False
    )
    fig.tight_layout()
    return fig


def effect_fraction(x: float, null: float, paper: float) -> float:
    """``x`` on the common relative scale of the paper-vs-book chart: ``(x - null) / (paper - null)``, so 0 is no
    effect (the rule's null) and 1 the paper's effect, for a claim in either direction (``paper < null`` too)."""
    if paper == null:
        raise ValueError(f"the paper's value {paper!r} equals the null: no effect to scale by")
    return (x - null) / (paper - null)


def effect_points(rows: Sequence[Mapping]) -> list[dict]:
    """The quantitative claims of ``rows`` (rows of a ``paper_vs_book_*.json``: ``id`` and ``rule``) on the
    :func:`effect_fraction` scale, in order: ``label`` (the id without its chapter prefix), ``outcome``,
    ``estimate``, ``low`` and ``high`` (the interval, low <= high; None for one measurement without one) and
    ``tol_low``, ``tol_high`` (the rule's tolerance; None where it has none on that side). Rows without an
    estimate, a paper value or a null, or whose paper value is the null, are not quantitative: left out."""
    points = []
    for row in rows:
        rule = row.get("rule") or {}
        estimate, null, paper = rule.get("estimate"), rule.get("null"), rule.get("paper_value")
        if estimate is None or null is None or paper is None or paper == null:
            continue

        def scaled(a, b):
            if a is None and b is None:
                return None, None
            ends = [None if v is None else effect_fraction(v, null, paper) for v in (a, b)]
            if paper < null:  # the scale flips a negative-direction claim: its low end maps to the high one
                ends.reverse()
            return ends[0], ends[1]

        tolerance = rule.get("tolerance") or {}
        low, high = scaled(rule.get("low"), rule.get("high"))
        tol_low, tol_high = scaled(tolerance.get("low"), tolerance.get("high"))
        points.append(
            {
                "label": row["id"].split(".", 1)[-1],
                "outcome": rule["outcome"],
                "estimate": effect_fraction(estimate, null, paper),
                "low": low,
                "high": high,
                "tol_low": tol_low,
                "tol_high": tol_high,
            }
        )
    return points


#: the paper-vs-book chart's x range (effect fractions); points beyond it sit at its edge as arrows
EFFECT_XLIM = (-1.5, 3.0)
#: its font (points; shown at 1:1 on the scoreboard's wide column) and row pitch (inches)
EFFECT_FONT_PT = 9.5
EFFECT_ROW_IN = 0.15
#: its width (inches): the scoreboard's column at 1400 px, which shows no "on this page" column (1120 px)
EFFECT_CHART_WIDTH_IN = 10.1
_TOLERANCE_COLOUR = "#d4e3f1"
_INTERVAL_COLOUR = "#555555"


def _columns(sizes: Mapping[str, int], ncols: int) -> list[list[str]]:
    """The chapters split into ``ncols`` columns of about equal rows (largest first to the shortest column), each
    column and the columns in the chapters' order."""
    columns: list[list[str]] = [[] for _ in range(ncols)]
    height = [0] * ncols
    for name in sorted(sizes, key=lambda n: -sizes[n]):
        i = height.index(min(height))
        columns[i].append(name)
        height[i] += sizes[name] + 1
    order = list(sizes)
    return sorted((sorted(c, key=order.index) for c in columns if c), key=lambda c: order.index(c[0]))


def paper_vs_book_effects(rows_by_chapter: Mapping[str, Sequence[Mapping]], ncols: int = 2) -> Figure:
    """Each quantitative claim (:func:`effect_points`) of each chapter (keys: the chapters' names, in reading
    order; values: their rows) on one line of a common relative scale: 0 no effect (the rule's null), 1 the paper's
    effect. The interval a grey bar, the estimate a dot in its verdict's :data:`~hybridlib.style.OUTCOME_COLORS`,
    the rule's tolerance a light band; a point beyond :data:`EFFECT_XLIM` an arrow at the edge (an estimate's with
    its value). The chapters (a bold header line each) in ``ncols`` columns of about equal length; chapters without
    a quantitative claim left out."""
    points = {name: effect_points(rows) for name, rows in rows_by_chapter.items()}
    points = {name: p for name, p in points.items() if p}
    if not points:
        raise ValueError("no quantitative claim: no row has an estimate, a null and a paper value apart")
    columns = _columns({name: len(p) for name, p in points.items()}, ncols)
    lines = max(sum(len(points[n]) + 1 for n in col) for col in columns)
    font = EFFECT_FONT_PT
    lo, hi = EFFECT_XLIM
    fig, axes = plt.subplots(
        1,
        len(columns),
        figsize=(EFFECT_CHART_WIDTH_IN, 0.75 + EFFECT_ROW_IN * lines),
        squeeze=False,
    )
    for ax, column in zip(axes[0], columns):
        y, ticks, labels = 0, [], []
        for name in column:
            ax.text(lo + 0.05, y, name, va="center", ha="left", fontsize=font, fontweight="bold")
            if y:
                ax.axhline(y - 0.5, color="0.75", lw=0.6)
            y += 1
            for p in points[name]:
                ticks.append(y)
                labels.append(p["label"])
                if p["tol_low"] is not None or p["tol_high"] is not None:
                    a = lo if p["tol_low"] is None else max(p["tol_low"], lo)
                    b = hi if p["tol_high"] is None else min(p["tol_high"], hi)
                    ax.fill_betweenx([y - 0.42, y + 0.42], a, b, color=_TOLERANCE_COLOUR, lw=0, zorder=0)
                if p["low"] is not None and p["high"] is not None:
                    ax.plot(
                        [max(p["low"], lo), min(p["high"], hi)],
                        [y, y],
                        color=_INTERVAL_COLOUR,
                        lw=2.2,
                        solid_capstyle="butt",
                        zorder=2,
                    )
                    for edge, marker, beyond in ((lo, "<", p["low"] < lo), (hi, ">", p["high"] > hi)):
                        if beyond:  # the interval runs on past the axis
                            ax.plot(edge, y, marker, color=_INTERVAL_COLOUR, ms=5, zorder=2, clip_on=False)
                colour = OUTCOME_COLORS[Outcome(p["outcome"])]
                x = p["estimate"]
                if lo <= x <= hi:
                    ax.plot(x, y, "o", color=colour, mec="black", mew=0.6, ms=6.5, zorder=3)
                else:
                    edge = hi if x > hi else lo
                    ax.plot(
                        edge,
                        y,
                        ">" if x > hi else "<",
                        color=colour,
                        mec="black",
                        mew=0.6,
                        ms=8,
                        zorder=3,
                        clip_on=False,
                    )
                    ax.text(
                        edge - 0.14 if x > hi else edge + 0.14,
                        y,
                        f"{x:.1f}",
                        ha="right" if x > hi else "left",
                        va="center",
                        fontsize=font,
                        bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5},
                        zorder=4,
                    )
                y += 1
        ax.axvline(0, color="black", lw=1.0, zorder=1)
        ax.axvline(1, color=OUTCOME_COLORS[Outcome.REPRODUCED], lw=1.0, ls="--", zorder=1)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lines - 0.5, -0.5)
        ax.set_yticks(ticks, labels, fontsize=font)
        ax.tick_params(axis="y", length=0, pad=2)
        ax.tick_params(axis="x", labelsize=font, pad=1)
        ax.set_xticks([t for t in (-1, 0, 1, 2, 3) if lo <= t <= hi])
        ax.grid(axis="y", visible=False)
        ax.set_xlabel("effect as a fraction of the paper's", fontsize=font, labelpad=2)
    fig.tight_layout(pad=0.3, w_pad=1.0)
    return fig


@dataclass(frozen=True)
class StaticHTML:
    """HTML that needs no kernel and no CDN: Jupyter shows it, the built book renders it as it is."""

    html: str

    def _repr_html_(self) -> str:
        return self.html


_SELECTOR_JS = """
(function () {
  const root = document.getElementById("%(id)s");
  const data = JSON.parse(root.querySelector('script[type="application/json"]').textContent);
  const selects = Array.from(root.querySelectorAll("select"));
  const svg = root.querySelector("svg");
  const NS = "http://www.w3.org/2000/svg";
  function add(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  }
  function step(span) {
    const raw = span / 4, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    return mag * [1, 2, 2.5, 5, 10].find(f => f * mag >= raw);
  }
  function draw() {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const W = Math.max(root.clientWidth, 260), H = Math.round(Math.min(340, Math.max(220, W * 0.5)));
    svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    const m = {l: 52, r: 10, t: 10, b: 44};
    const curves = data.curves[selects.map(s => s.value).join("|")] || {};
    const pts = Object.values(curves).flat();
    if (!pts.length) { add("text", {x: m.l, y: H / 2}, "no measurement for this choice"); return; }
    const xs = pts.map(p => p[0]), ys = pts.map(p => p[1]);
    const x0 = Math.min(...xs) - 0.5, x1 = Math.max(...xs) + 0.5;
    let y0 = Math.min(...ys), y1 = Math.max(...ys);
    if (y0 === y1) { y0 -= 0.5; y1 += 0.5; }
    const pad = (y1 - y0) * 0.06; y0 -= pad; y1 += pad;
    const X = v => m.l + (v - x0) / (x1 - x0) * (W - m.l - m.r);
    const Y = v => H - m.b - (v - y0) / (y1 - y0) * (H - m.t - m.b);
    let shaded = data.shade_index >= 0 ? (data.shade[selects[data.shade_index].value] || []) : [];
    if (shaded.length >= new Set(xs).size) shaded = [];  // every position (a full-attention model): no contrast
    shaded.forEach(l => add("rect", {x: X(l - 0.5), width: X(l + 0.5) - X(l - 0.5), y: m.t, height: H - m.t - m.b,
                                    fill: "#ff7f0e", "fill-opacity": 0.15}));
    const dy = step(y1 - y0);
    for (let t = Math.ceil(y0 / dy) * dy; t <= y1; t += dy) {
      add("line", {x1: m.l, x2: W - m.r, y1: Y(t), y2: Y(t), stroke: "#ddd"});
      add("text", {x: m.l - 4, y: Y(t) + 4, "text-anchor": "end"}, +t.toFixed(6));
    }
    const every = x1 - x0 > 2 * data.every ? data.every : 1;
    for (let t = Math.ceil(x0); t <= x1; t++) {
      add("line", {x1: X(t), x2: X(t), y1: H - m.b, y2: H - m.b + (t %% every ? 3 : 6), stroke: "#444"});
      if (t %% every === 0) add("text", {x: X(t), y: H - m.b + 18, "text-anchor": "middle"}, t);
    }
    add("rect", {x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, fill: "none", stroke: "#444"});
    add("text", {x: (m.l + W - m.r) / 2, y: H - 6, "text-anchor": "middle"}, data.x);
    add("text", {x: 12, y: (m.t + H - m.b) / 2, "text-anchor": "middle",
                 transform: `rotate(-90 12 ${(m.t + H - m.b) / 2})`}, data.y);
    Object.entries(curves).forEach(([name, line], i) => {
      const color = data.colors[data.series.indexOf(name) %% data.colors.length];
      add("polyline", {points: line.map(p => `${X(p[0])},${Y(p[1])}`).join(" "), fill: "none", stroke: color,
                       "stroke-width": 1.8});
      line.forEach(p => add("circle", {cx: X(p[0]), cy: Y(p[1]), r: 2.5, fill: color}));
      add("text", {x: W - m.r - 6, y: m.t + 16 + 16 * i, "text-anchor": "end", fill: color,
                   "font-weight": "bold"}, name);
    });
  }
  selects.forEach(s => s.addEventListener("change", draw));
  window.addEventListener("resize", draw);
  draw();
})();
"""


def curve_selector(
    frame: pd.DataFrame,
    controls: Sequence[str] = ("model", "lang", "signal"),
    x: str = "layer",
    y: str = "softcka",
    series: str = "pairing",
    mean_over: Sequence[str] = ("lang",),
    shade: Mapping[str, Sequence[int]] | None = None,
    shade_by: str = "model",
    title: str = "",
) -> StaticHTML:
    """An interactive chart in plain HTML: one drop-down per column of ``controls``, one line of ``y`` against
    ``x`` per value of ``series`` for the chosen values, drawn as SVG by a few lines of inline JavaScript.

    Every curve is pre-computed here (the mean of ``y`` over the rows of each ``x``) and embedded as JSON, so the
    chart works in the static book. A column in ``mean_over`` also offers ``mean``, the average over its
    values. ``shade`` maps a value of the ``shade_by`` control (e.g. a model) to the ``x`` positions to shade
    (e.g. its full-attention layers; nothing is shaded when every position would be). The x axis labels every 5th
    position.
    """
    _require(frame, [*controls, x, y, series])
    if shade is not None and shade_by not in controls:
        raise ValueError(f"shade_by {shade_by!r} must be one of controls {list(controls)}")
    options = {
        c: [*(["mean"] if c in mean_over else []), *map(str, dict.fromkeys(frame[c]))] for c in controls
    }
    curves: dict[str, dict[str, list[list[float]]]] = {}
    for choice in _choices(options):
        rows = frame
        for column, value in zip(controls, choice):
            if value != "mean" or column not in mean_over:
                rows = rows[rows[column].astype(str) == value]
        if rows.empty:
            continue
        means = rows.groupby([series, x], sort=True)[y].mean()
        curves["|".join(choice)] = {
            str(name): [[float(k), round(float(v), 4)] for k, v in line.droplevel(0).items()]
            for name, line in means.groupby(level=0, sort=False)
        }
    data = {
        "curves": curves,
        "x": x,
        "y": y,
        "every": 5,
        "series": list(map(str, dict.fromkeys(frame[series]))),
        "colors": list(PALETTE),
        "shade": {str(k): [int(v) for v in vs] for k, vs in (shade or {}).items()},
        "shade_index": list(controls).index(shade_by) if shade is not None else -1,
    }
    payload = json.dumps(data, separators=(",", ":"), sort_keys=True).replace("</", "<\\/")
    uid = "selector-" + hashlib.sha256(payload.encode()).hexdigest()[:10]
    selects = "".join(
        f'<label>{escape(c)} <select aria-label="{escape(c)}">'
        + "".join(f'<option value="{escape(o)}">{escape(o)}</option>' for o in opts)
        + "</select></label> "
        for c, opts in options.items()
    )
    return StaticHTML(
        f'<div class="hybrid-selector" id="{uid}" style="max-width:100%;font:12px sans-serif">'
        + (f"<p><strong>{escape(title)}</strong></p>" if title else "")
        + f'<div style="display:flex;flex-wrap:wrap;gap:0.5em">{selects}</div>'
        + '<svg role="img" style="display:block;font:12px sans-serif"></svg>'
        + "<noscript>This chart needs JavaScript.</noscript>"
        + f'<script type="application/json">{payload}</script>'
        + f"<script>{_SELECTOR_JS % {'id': uid}}</script></div>"
    )


def _choices(options: Mapping[str, Sequence[str]]) -> list[tuple[str, ...]]:
    """Every combination of one value per control, in the order of ``options``."""
    combos: list[tuple[str, ...]] = [()]
    for values in options.values():
        combos = [(*c, v) for c in combos for v in values]
    return combos
