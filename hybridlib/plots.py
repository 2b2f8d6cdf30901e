"""Seaborn figure helpers shared by the chapters (each returns the matplotlib Figure it drew)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure


def _require(frame: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"frame lacks column(s) {missing}; it has {list(frame.columns)}")


def heatmap(table: pd.DataFrame, title: str, fmt: str = ".1f", cmap: str = "rocket_r", center: float | None = None,
            size: tuple[float, float] = (9, 5)) -> Figure:
    """Annotated heat map of a wide ``table`` (rows x columns as laid out)."""
    fig, ax = plt.subplots(figsize=size)
    sns.heatmap(table, annot=True, fmt=fmt, cmap=cmap, center=center, ax=ax, cbar_kws={"shrink": 0.8})
    ax.set_title(title)
    fig.tight_layout()
    return fig


def lines_vs_context(frame: pd.DataFrame, x: str, y: str, hue: str, title: str, col: str | None = None,
                     style: str | None = None, logx: bool = True, logy: bool = False, ylabel: str | None = None,
                     hlines: dict[str, float] | None = None) -> Figure:
    """Line plot of ``y`` against context ``x`` per ``hue`` (optionally faceted by ``col``), log-x by default.

    ``hlines`` draws labelled horizontal reference lines (e.g. card capacities) on every facet.
    """
    _require(frame, [c for c in (x, y, hue, col, style) if c])
    grid = sns.relplot(data=frame, x=x, y=y, hue=hue, col=col, style=style, kind="line", marker="o",
                       height=3.6, aspect=1.25, facet_kws={"sharey": False})
    for ax in grid.axes.flat:
        if logx:
            ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        for label, value in (hlines or {}).items():
            ax.axhline(value, color="grey", lw=0.8, ls="--")
            ax.text(ax.get_xlim()[0], value, f" {label}", va="bottom", fontsize=8, color="grey")
        ax.set_ylabel(ylabel or y)
    grid.figure.suptitle(title, y=1.03)
    return grid.figure


def _shade_layers(ax, layers: Sequence[int], label: str = "full attention") -> None:
    """Shade each layer in ``layers`` (a band one layer wide) on ``ax``; one legend entry."""
    for i, layer in enumerate(layers):
        ax.axvspan(layer - 0.5, layer + 0.5, color="tab:orange", alpha=0.15, lw=0, label=label if i == 0 else None)


def alignment_curve(frame: pd.DataFrame, fa_layers: Sequence[int], title: str, ax=None, y: str = "softcka",
                    hue: str = "pairing") -> Figure:
    """``y`` per layer (mean over the rows of each layer, band = interquartile range over languages) per ``hue``,
    ``fa_layers`` shaded. ``frame``: a tidy frame with columns layer, ``y``, ``hue``."""
    _require(frame, ["layer", y, hue])
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.6))
    n_layers = int(frame["layer"].max()) + 1
    if len(fa_layers) < n_layers:
        _shade_layers(ax, fa_layers)
    sns.lineplot(data=frame, x="layer", y=y, hue=hue, style=hue, marker="o", errorbar=("pi", 50), ax=ax)
    ax.set(title=title, xlabel="layer", ylabel=y, xlim=(-0.5, n_layers - 0.5))
    ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return ax.figure


def alignment_grid(frame: pd.DataFrame, fa_layers: dict[str, Sequence[int]], title: str, y: str = "softcka",
                   hue: str = "pairing", ncols: int = 3) -> Figure:
    """One :func:`alignment_curve` panel per model of ``frame`` (column ``model``), in ``frame``'s order."""
    _require(frame, ["model"])
    models = list(dict.fromkeys(frame["model"]))
    nrows = -(-len(models) // ncols)
    fig, axes = plt.subplots(nrows, min(ncols, len(models)), figsize=(4.6 * min(ncols, len(models)), 3.4 * nrows),
                             squeeze=False, sharey=True)
    for ax, model in zip(axes.flat, models):
        alignment_curve(frame[frame["model"] == model], fa_layers[model], model, ax=ax, y=y, hue=hue)
    for ax in list(axes.flat)[len(models):]:
        ax.set_visible(False)
    fig.suptitle(title, y=1.01)
    fig.tight_layout()
    return fig


def throughput_figure(frame: pd.DataFrame, title: str) -> Figure:
    """Decoded tokens/s, peak memory while decoding and cache size against batch size (log 2), one line per
    ``model``, from ``generation_throughput`` rows with a ``model`` column; out-of-memory points are dotted
    lines labelled with the phase that ran out."""
    _require(frame, ["model", "batch", "status", "oom_in", "tokens_per_s", "decode_peak_gib", "cache_gib"])
    panels = {"tokens_per_s": "decoded tokens / s", "decode_peak_gib": "peak memory decoding (GiB)",
              "cache_gib": "cache after decoding (GiB)"}
    fig, axes = plt.subplots(1, len(panels), figsize=(13, 3.6))
    ok = frame[frame.status == "ok"]
    for i, (ax, (column, label)) in enumerate(zip(axes, panels.items())):
        sns.lineplot(data=ok, x="batch", y=column, hue="model", marker="o", ax=ax, legend=i == 0)
        for batch, rows in frame[frame.status == "oom"].groupby("batch"):
            ax.axvline(batch, ls=":", c="grey")
            text = "OOM: " + ", ".join(f"{m.split()[0]} in {phase}" for m, phase in zip(rows.model, rows.oom_in))
            ax.annotate(text, (batch, 0), xycoords=("data", "axes fraction"), textcoords="offset points",
                        xytext=(-2, 4), fontsize=7, rotation=90, ha="right", va="bottom")
        ax.set_xscale("log", base=2)
        ax.set_ylabel(label)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
