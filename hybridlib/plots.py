"""Figure helpers shared by the chapters, drawn in :mod:`hybridlib.style` for the book's text column.

Each figure helper returns the matplotlib Figure it drew; :func:`curve_selector` returns a plain-HTML chart with
drop-downs that works in the static book (no kernel, no CDN); :func:`flat_note` is the sentence a chapter prints
instead of a figure whose values do not vary.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from hybridlib.style import (
    COLUMN_WIDTH_IN,
    MIN_FONT_PT,
    OUTCOME_COLORS,
    PALETTE,
    figsize,
    layer_ticks,
    text_color,
)

MAX_MARKED = 40  # points per line up to which every point gets a marker


def _require(frame: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"frame lacks column(s) {missing}; it has {list(frame.columns)}")


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
    size: tuple[float, float] = (COLUMN_WIDTH_IN, 4.2),
) -> Figure:
    """Annotated heat map of a wide ``table`` (rows x columns as laid out)."""
    fig, ax = plt.subplots(figsize=size)
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
    ax.set_title(title)
    fig.tight_layout()
    return fig


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
    :data:`MAX_MARKED` points (more would hide the curve).

    ``hlines`` draws labelled horizontal reference lines (e.g. card capacities) on every facet.
    """
    _require(frame, [c for c in (x, y, hue, col, style) if c])
    ncols = min(2, frame[col].nunique()) if col else 1
    height = 3.0 if ncols == 2 else 3.4
    marker = "o" if frame[x].nunique() <= MAX_MARKED else None
    grid = sns.relplot(
        data=frame,
        x=x,
        y=y,
        hue=hue,
        col=col,
        style=style,
        kind="line",
        marker=marker,
        col_wrap=ncols if col else None,
        height=height,
        aspect=COLUMN_WIDTH_IN / ncols / height,
        facet_kws={"sharey": False, "legend_out": False},
    )
    for ax in grid.axes.flat:
        if logx:
            ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        for label, value in (hlines or {}).items():
            ax.axhline(value, color="grey", lw=0.8, ls="--")
            ax.text(ax.get_xlim()[0], value, f" {label}", va="bottom", fontsize=MIN_FONT_PT, color="grey")
        ax.set_ylabel(ylabel or y)
    if grid.legend is not None:
        labels = [t.get_text() for t in grid.legend.texts]
        # as many entries a row as fit the column (~110 characters at the book's font, a marker ~6)
        per_row = max(1, 110 // (max(map(len, labels)) + 6))
        sns.move_legend(
            grid, "upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(len(labels), 5, per_row), frameon=False
        )
    grid.figure.suptitle(title, y=1.03)
    return grid.figure


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
    sns.lineplot(
        data=frame, x="layer", y=y, hue=hue, style=hue, marker="o", errorbar=("pi", 50), ax=ax, legend=legend
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
) -> Figure:
    """One :func:`alignment_curve` panel per model of ``frame`` (column ``model``), in ``frame``'s order, two
    per row across the text column; one legend, below the panels."""
    _require(frame, ["model"])
    models = list(dict.fromkeys(frame["model"]))
    nrows = -(-len(models) // ncols)
    fig, axes = plt.subplots(
        nrows, min(ncols, len(models)), figsize=figsize(nrows, panel_height=2.8), squeeze=False, sharey=True
    )
    for i, (ax, model) in enumerate(zip(axes.flat, models)):
        alignment_curve(
            frame[frame["model"] == model], fa_layers[model], model, ax=ax, y=y, hue=hue, legend=i == 0
        )
    for ax in list(axes.flat)[len(models) :]:
        ax.set_visible(False)
    first = axes.flat[0].get_legend()
    labels = [t.get_text() for t in first.texts]
    fig.legend(
        first.legend_handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=len(labels),
        frameon=False,
    )
    first.remove()
    fig.suptitle(title)
    fig.tight_layout()
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
    values are side-by-side bars with one legend below the panels."""
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
        ax.set(title=model, xlabel="layer", ylabel=y)
        layer_ticks(ax, n_layers)
    for ax in list(axes.flat)[len(models) :]:
        ax.set_visible(False)
    if hue:
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(
            handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(labels), frameon=False
        )
    fig.suptitle(title)
    fig.tight_layout()
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
    axes[-1, 0].set_xlabel("pre-registered rules", fontsize=font)
    handles = [
        Patch(facecolor=c, edgecolor="0.6", linewidth=0.5, label=o.value) for o, c in OUTCOME_COLORS.items()
    ]
    fig.legend(
        handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, fontsize=font, frameon=False
    )
    fig.tight_layout()
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
