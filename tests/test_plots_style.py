"""The book's plot style (hybridlib.style) and the figure helpers that use it (hybridlib.plots)."""

import json
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import seaborn as sns  # noqa: E402

from hybridlib import plots, style  # noqa: E402
from hybridlib.verdicts import Outcome  # noqa: E402

pytestmark = pytest.mark.usefixtures("book_style")  # tests/conftest.py


def _lab(hex_colour: str) -> tuple[float, float, float]:
    """sRGB hex -> CIE L*a*b* (D65), written out from the standard formulas."""
    rgb = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    x = (0.4124 * lin[0] + 0.3576 * lin[1] + 0.1805 * lin[2]) / 0.95047
    y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    z = (0.0193 * lin[0] + 0.1192 * lin[1] + 0.9505 * lin[2]) / 1.08883
    f = [t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def test_palette_separates_13_languages():
    langs = ["eng", "tel", "mal", "tam", "mya", "khm", "tha", "arb", "cmn_hans", "rus", "hin", "yor", "sot"]
    colours = list(style.language_colors(langs).values())
    assert len(set(colours)) == 13
    labs = [_lab(c) for c in colours]
    closest = min(
        sum((a - b) ** 2 for a, b in zip(p, q)) ** 0.5 for i, p in enumerate(labs) for q in labs[i + 1 :]
    )
    assert closest > 25
    with pytest.raises(ValueError, match="14 languages"):
        style.language_colors(langs + ["fra"])


def test_apply_sets_column_sized_figures_and_readable_fonts():
    rc = matplotlib.rcParams
    assert rc["figure.dpi"] == 100 and rc["savefig.dpi"] == 100
    assert rc["figure.figsize"][0] * rc["figure.dpi"] == pytest.approx(784)
    for key in ("font.size", "axes.labelsize", "xtick.labelsize", "ytick.labelsize", "legend.fontsize"):
        assert rc[key] * 100 / 72 >= 12.5  # >= 10 px even at 80% of the column
    cycle = [matplotlib.colors.to_hex(c) for c in rc["axes.prop_cycle"].by_key()["color"]]
    assert cycle == list(style.PALETTE)


def test_layer_ticks_label_every_fifth_of_30_layers():
    _, ax = plt.subplots()
    ax.plot(range(30), range(30))
    style.layer_ticks(ax, 30)
    ax.figure.canvas.draw()
    labelled = [int(t) for t in ax.get_xticks() if -0.5 <= t <= 29.5]
    assert labelled == [0, 5, 10, 15, 20, 25]
    ticks = {*ax.get_xticks(), *ax.get_xticks(minor=True)}
    assert sorted(int(t) for t in ticks if -0.5 <= t <= 29.5) == list(range(30))  # a tick per layer
    assert ax.get_xlim() == (-0.5, 29.5)
    _, small = plt.subplots()
    style.layer_ticks(small, 8)
    assert [int(t) for t in small.get_xticks() if -0.5 <= t <= 7.5] == list(range(8))


def test_figures_fit_the_text_column():
    curves = pd.DataFrame(
        [
            {"model": m, "layer": layer, "pairing": p, "softcka": 0.1 * layer}
            for m in ("a", "b", "c")
            for layer in range(30)
            for p in ("parallel", "shuffled")
        ]
    )
    grid = plots.alignment_grid(curves, {"a": [0, 10], "b": [5], "c": []}, "t")
    assert grid.get_size_inches()[0] == pytest.approx(7.84)
    assert all(ax.get_legend() is None for ax in grid.axes)  # one legend for the figure, off the panels
    assert [t.get_text() for t in grid.legends[0].texts] == ["full attention", "parallel", "shuffled"]
    ctx = pd.DataFrame(
        [
            {"T": t, "ms": t / 100, "mixer": m, "mode": mode}
            for t in (256, 512, 1024)
            for m in ("fa", "gdn")
            for mode in ("fwd", "bwd", "decode")
        ]
    )
    fig = plots.lines_vs_context(ctx, "T", "ms", "mixer", "t", col="mode")
    width, _ = fig.get_size_inches()
    assert width == pytest.approx(7.84, rel=0.02)
    rows = {round(ax.get_position().y0, 3) for ax in fig.axes if ax.get_visible() and ax.has_data()}
    assert len(rows) == 2  # three facets: two per row


def test_markers_only_on_short_lines():
    short = pd.DataFrame({"T": [256, 512, 1024], "ms": [1.0, 2.0, 4.0], "mixer": "fa"})
    long = pd.DataFrame({"step": range(500), "loss": [1 / (1 + s) for s in range(500)], "kind": "fa"})
    marked = plots.lines_vs_context(short, "T", "ms", "mixer", "t").axes[0].lines[0]
    plain = plots.lines_vs_context(long, "step", "loss", "kind", "t", logx=False).axes[0].lines[0]
    assert marked.get_marker() == "o" and plain.get_marker() in ("None", "", None)


def test_curve_selector_embeds_precomputed_curves():
    frame = pd.DataFrame(
        [
            {"model": "m1", "lang": "tel", "signal": "s", "pairing": "parallel", "layer": 0, "softcka": 0.2},
            {"model": "m1", "lang": "tel", "signal": "s", "pairing": "parallel", "layer": 1, "softcka": 0.4},
            {"model": "m1", "lang": "yor", "signal": "s", "pairing": "parallel", "layer": 0, "softcka": 0.6},
            {"model": "m1", "lang": "yor", "signal": "s", "pairing": "parallel", "layer": 1, "softcka": 0.8},
            {"model": "m1", "lang": "tel", "signal": "s", "pairing": "shuffled", "layer": 0, "softcka": 0.1},
            {"model": "m2", "lang": "yor", "signal": "s", "pairing": "parallel", "layer": 0, "softcka": 0.5},
        ]
    )
    html = plots.curve_selector(frame, shade={"m1": [1], "m2": []}, title="SoftCKA </b>")._repr_html_()
    assert "http" not in html.replace("http://www.w3.org/2000/svg", "")  # nothing loaded from elsewhere
    assert "SoftCKA &lt;/b&gt;" in html
    selects = re.findall(r'<select aria-label="(\w+)">(.*?)</select>', html)
    assert [(name, re.findall(r'value="([^"]+)"', opts)) for name, opts in selects] == [
        ("model", ["m1", "m2"]),
        ("lang", ["mean", "tel", "yor"]),
        ("signal", ["s"]),
    ]
    data = json.loads(re.search(r'<script type="application/json">(.*?)</script>', html).group(1))
    assert data["curves"] == {
        "m1|mean|s": {"parallel": [[0, 0.4], [1, 0.6]], "shuffled": [[0, 0.1]]},
        "m1|tel|s": {"parallel": [[0, 0.2], [1, 0.4]], "shuffled": [[0, 0.1]]},
        "m1|yor|s": {"parallel": [[0, 0.6], [1, 0.8]]},
        "m2|mean|s": {"parallel": [[0, 0.5]]},
        "m2|yor|s": {"parallel": [[0, 0.5]]},
    }
    assert data["shade"] == {"m1": [1], "m2": []} and data["shade_index"] == 0
    assert html == plots.curve_selector(frame, shade={"m1": [1], "m2": []}, title="SoftCKA </b>").html
    with pytest.raises(ValueError, match="shade_by"):
        plots.curve_selector(frame, controls=("lang",), shade={"m1": [1]})


def test_fit_shrinks_a_wide_grid_to_the_column_and_puts_its_legend_below():
    frame = pd.DataFrame(
        {"x": [0, 1] * 8, "y": range(16), "col": [c for c in "abcd" for _ in range(4)], "hue": ["u", "v"] * 8}
    )
    grid = sns.relplot(data=frame, x="x", y="y", col="col", hue="hue", col_wrap=4, kind="line", height=3)
    width, height = grid.figure.get_size_inches()
    fig = style.fit(grid)
    assert fig.get_size_inches() == pytest.approx(
        [style.COLUMN_WIDTH_IN, height * style.COLUMN_WIDTH_IN / width]
    )
    assert grid.legend.get_bbox_to_anchor().y0 <= fig.bbox.y0 + 1  # anchored at the panels' bottom edge
    plain = sns.catplot(data=frame, x="x", y="y", col="col", col_wrap=4, kind="bar", height=3)  # no legend
    assert style.fit(plain).get_size_inches()[0] == pytest.approx(style.COLUMN_WIDTH_IN)
    narrow = plt.figure(figsize=(4, 3))
    assert list(style.fit(narrow).get_size_inches()) == [4, 3]  # never enlarged
    with pytest.raises(TypeError, match="obj must be"):
        style.fit("figure")
    plt.close("all")


def test_save_png_writes_the_fitted_figure_atomically_and_closes_it(tmp_path):
    """A figure twice the column's width is written at the column's width (PNG header, at the book's DPI), into a
    folder made for it with nothing else left there, with the extra ``savefig`` arguments applied; then closed."""
    fig, ax = plt.subplots(figsize=(2 * style.COLUMN_WIDTH_IN, 3))
    ax.plot([0, 1], [0, 1])
    path = style.save_png(fig, tmp_path / "a" / "b.png", metadata={"Title": "column"})
    data = path.read_bytes()
    assert path == tmp_path / "a" / "b.png" and data[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(data[16:20], "big")
    assert 0.9 * style.COLUMN_WIDTH_IN * style.DPI <= width <= style.COLUMN_WIDTH_IN * style.DPI + 1
    assert b"Title" in data and b"column" in data
    assert [p.name for p in path.parent.iterdir()] == ["b.png"]
    assert not plt.fignum_exists(fig.number)


def test_layer_bars_colour_fa_layers_and_label_every_fifth_layer():
    frame = pd.DataFrame(
        [
            {"model": m, "layer": layer, "jump": (-1) ** layer * 0.1}
            for m in ("teacher", "hybrid", "swa")
            for layer in range(30)
        ]
    )
    fa = {"teacher": list(range(30)), "hybrid": [2, 6, 10], "swa": [2, 6, 10]}
    fig = plots.layer_bars(frame, "jump", 30, "t", fa_layers=fa)
    assert fig.get_size_inches()[0] == pytest.approx(style.COLUMN_WIDTH_IN)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["teacher", "hybrid", "swa"]
    rows = {round(ax.get_position().y0, 3) for ax in panels}
    assert len(rows) == 2  # three panels: two per row
    orange = [
        i
        for i, bar in enumerate(panels[1].patches)
        if matplotlib.colors.to_hex(bar.get_facecolor()) == style.PALETTE[1]
    ]
    assert orange == [2, 6, 10]
    assert not any(matplotlib.colors.to_hex(b.get_facecolor()) == style.PALETTE[1] for b in panels[0].patches)
    fig.canvas.draw()
    assert [int(t) for t in panels[1].get_xticks() if -0.5 <= t <= 29.5] == [0, 5, 10, 15, 20, 25]
    tasks = frame.assign(task="within").pipe(lambda f: pd.concat([f, f.assign(task="across", jump=0.0)]))
    grouped = plots.layer_bars(tasks, "jump", 30, "t", hue="task")
    assert [t.get_text() for t in grouped.legends[0].texts] == ["within", "across"]
    bars = grouped.axes[0].patches
    assert len(bars) == 60  # side by side at layer 0: the within bar ends where the across bar starts
    assert bars[0].get_x() + bars[0].get_width() == pytest.approx(bars[30].get_x(), abs=1e-9)


def test_flat_note_replaces_a_plot_whose_values_do_not_vary():
    """Seminar pages drew all-zero passkey bars and needle lines flat at 1 (the book issue): a sentence instead."""
    flat = pd.DataFrame({"depth": [0.0, 0.5, 1.0], "accuracy": [0.0, 0.0, 0.0]})
    assert plots.flat_note(flat, "accuracy", "passkey accuracy") == (
        "Figure not drawn: passkey accuracy is 0 at every point (3 values), a flat plot; the table gives the numbers."
    )
    assert plots.flat_note(flat.assign(accuracy=[0.0, 0.5, None]), "accuracy", "passkey accuracy") is None
    assert (
        plots.flat_note(flat.assign(accuracy=None), "accuracy", "x") == "Figure not drawn: no x was measured."
    )
    with pytest.raises(ValueError, match=r"frame lacks column\(s\) \['correct'\]"):
        plots.flat_note(flat, "correct", "needles")


def _contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two sRGB hex colours, written out from the standard formula."""

    def luminance(c: str) -> float:
        rgb = [int(c[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        lin = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in rgb]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_each_outcome_has_one_colour_with_legible_text_on_it():
    assert list(style.OUTCOME_COLORS) == list(Outcome)
    assert len(set(style.OUTCOME_COLORS.values())) == len(Outcome)
    for colour in style.OUTCOME_COLORS.values():
        assert _contrast(colour, style.text_color(colour)) >= 4.5


def test_verdict_bars_colour_by_outcome_and_stay_readable_on_a_phone():
    """Segments in the outcome colours, in outcome order; a chapter without counts gets a note; every text at
    least the chart's font, which shows >= MIN_FONT_PX px with the chart shrunk into a 420 px screen's 356 px
    column."""
    fig = plots.verdict_bars(
        {"P": {"a": {"not tested": 1, "reproduced": 2}, "b": {}}, "Q": {"a": {}, "b": {}}}
    )
    top = fig.axes[0]
    assert [matplotlib.colors.to_hex(p.get_facecolor()) for p in top.patches] == [
        style.OUTCOME_COLORS[Outcome.REPRODUCED],
        style.OUTCOME_COLORS[Outcome.NOT_TESTED],
    ]
    assert [p.get_width() for p in top.patches] == [2, 1]
    texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_text() and t.get_visible()]
    assert {"2", "1", "a", "b", "no run under the rules", "reproduced", "not tested"} <= {
        t.get_text() for t in texts
    }
    assert min(t.get_fontsize() for t in texts) >= plots.VERDICT_CHART_FONT_PT
    shown = 356 / (fig.get_figwidth() * style.DPI)
    assert plots.VERDICT_CHART_FONT_PT * style.DPI / 72 * shown >= style.MIN_FONT_PX


# --- issue 50: the H200 pages' figures (30 layers, up to 12 panels, ~22 languages) read at the column's width

MODELS = [
    "smollm2-135m",
    "standard_periodic",
    "reverse_periodic",
    "periodic_first_at_0",
    "standard_periodic+swa",
    "layout_distillation_long_name",
]
LANGS = ["tel", "mal", "tam", "mya", "khm", "tha", "arb", "cmn_hans", "rus", "hin", "yor", "sot"]


def _texts(fig):
    return [t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip()]


def _min_shown_px(fig) -> float:
    """The smallest text of ``fig`` as displayed: its points at the figure's dpi, shrunk to the text column."""
    shown = min(1.0, style.TEXT_WIDTH_PX / (fig.get_figwidth() * fig.dpi))
    return min(t.get_fontsize() for t in _texts(fig)) * fig.dpi / 72 * shown


def _overlap(texts, renderer) -> list[tuple[str, str]]:
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_visible() and t.get_text()]
    return [(a, b) for i, (a, p) in enumerate(boxes) for b, q in boxes[i + 1 :] if p.overlaps(q)]


def _assert_ticks_readable(fig, max_ticks: int | None = None):
    """Every visible panel has x tick labels, none of its tick labels overlap, titles do not run together."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.has_data()]
    for ax in panels:
        xlabels = [t for t in ax.get_xticklabels() if t.get_text() and t.get_visible()]
        assert xlabels, f"panel {ax.get_title()!r} has no x tick labels"
        assert not _overlap(xlabels, renderer), ax.get_title()
        assert not _overlap(ax.get_yticklabels(), renderer), ax.get_title()
        if max_ticks:
            assert len(xlabels) <= max_ticks
    assert not _overlap([ax.title for ax in panels] + [fig._suptitle] * (fig._suptitle is not None), renderer)
    for ax in panels:  # a y label never reaches into the panel to its left
        label = ax.yaxis.label.get_window_extent(renderer)
        assert not any(
            label.overlaps(other.get_window_extent(renderer)) for other in panels if other is not ax
        )


def test_lines_vs_context_legend_lists_values_not_column_names_and_every_panel_has_x_labels():
    """Efficiency Fig. 2: the decode panel had no x tick labels; the legend listed "mixer" and "shape"."""
    best = pd.DataFrame(
        [
            {"T": t, "latency_ms": t / 1e3 * (1 + i), "mixer": m, "mode": mode, "shape": s}
            for t in (512, 1024, 2048, 4096)
            for m in ("gdn", "sdpa")
            for mode in ("decode", "fwd", "fwd_bwd")
            for i, s in enumerate(("gemma3-270m", "qwen3-4b", "smollm2-135m"))
        ]
    )
    fig = plots.lines_vs_context(best, "T", "latency_ms", "mixer", "t", col="mode", style="shape", logy=True)
    labels = [t.get_text() for legend in fig.legends for t in legend.texts]
    assert labels == ["gdn", "sdpa", "gemma3-270m", "qwen3-4b", "smollm2-135m"]
    assert not set(labels) & set(best.columns)
    assert not any(ax.get_legend() for ax in fig.axes)
    _assert_ticks_readable(fig)
    assert [ax.get_ylabel() for ax in fig.axes if ax.get_visible() and ax.has_data()] == [
        "latency_ms",
        "",
        "latency_ms",
    ]
    markers = {str(line.get_marker()) for line in fig.axes[0].lines if line.get_xydata().size}
    assert len(markers) == 3  # the shapes differ in marker (and dash)


def test_lines_vs_context_gives_each_line_style_a_row_when_a_panel_would_hold_too_many_lines():
    """Efficiency Fig. 3: 4 stacks x 3 shapes = 12 lines a panel, and the right y label over the left panel."""
    pred = pd.DataFrame(
        [
            {"T": t, "latency_ms": t * (1 + j) * (1 + i), "stack": st, "shape": s, "mode": mode}
            for t in (1024, 4096, 16384, 65536)
            for j, st in enumerate(("full-attention", "gdn", "hybrid-3:1", "hybrid-9:1"))
            for i, s in enumerate(("gemma3-270m", "qwen3-4b", "smollm2-135m"))
            for mode in ("fwd", "decode")
        ]
    )
    fig = plots.lines_vs_context(pred, "T", "latency_ms", "stack", "t", col="mode", style="shape", logy=True)
    panels = [ax for ax in fig.axes if ax.has_data()]
    assert len(panels) == 6
    assert max(sum(1 for line in ax.lines if line.get_xydata().size) for ax in panels) <= plots.MAX_LINES
    assert "qwen3-4b" in panels[2].get_title() and "decode" in panels[1].get_title()
    assert fig.get_figwidth() == pytest.approx(style.COLUMN_WIDTH_IN)
    _assert_ticks_readable(fig)
    assert [t.get_text() for t in fig.legends[0].texts] == [
        "full-attention",
        "gdn",
        "hybrid-3:1",
        "hybrid-9:1",
    ]


def _curves(panels: list[str], hues: list[str], col: str, hue: str, y: str = "softcka") -> pd.DataFrame:
    return pd.DataFrame(
        [
            {col: p, hue: h, "layer": layer, "rep": r, y: 0.1 * (layer % 7) + 0.01 * r + 0.02 * k}
            for p in panels
            for k, h in enumerate(hues)
            for layer in range(30)
            for r in range(3)
        ]
    )


def test_alignment_grid_per_language_reads_at_the_column_width():
    """SoftCKA Fig. 2: twelve language panels drawn 12.5 in wide and shrunk to the column showed ~8 px text."""
    frame = _curves(LANGS, MODELS[:5], "lang", "model")
    fig = plots.alignment_grid(frame, {}, "t", hue="model", col="lang", ncols=3)
    fig = style.fit(fig)
    assert fig.get_figwidth() == pytest.approx(style.COLUMN_WIDTH_IN)
    assert _min_shown_px(fig) >= 9
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == LANGS
    assert len({round(ax.get_position().x0, 3) for ax in panels}) == 3
    _assert_ticks_readable(fig, max_ticks=8)
    assert [t.get_text() for t in fig.legends[0].texts] == MODELS[:5]


def test_alignment_grid_fades_the_bands_of_many_curves():
    """SoftCKA Fig. 4: five IQR bands at seaborn's default alpha covered each other."""
    five = plots.alignment_grid(
        _curves(["mean", "last"], MODELS[:5], "pooling", "model", "cka"),
        {},
        "t",
        y="cka",
        hue="model",
        col="pooling",
    )
    bands = [c for c in five.axes[0].collections if c.get_alpha() is not None]
    assert len(bands) == 5 and max(c.get_alpha() for c in bands) <= 0.1
    _assert_ticks_readable(five, max_ticks=8)
    two = plots.alignment_grid(_curves(["m"], ["parallel", "shuffled"], "model", "pairing"), {"m": [3]}, "t")
    assert min(c.get_alpha() for c in two.axes[0].collections if c.get_alpha() is not None) >= 0.15


def test_heatmap_of_22_languages_keeps_its_labels_and_numbers_apart():
    """SoftCKA Fig. 3: numbers ran into each other and column labels ran together once shrunk to the column."""
    for rows, cols in ((4, 12), (11, 22), (3, 4)):
        table = pd.DataFrame(
            [[(-1) ** (i + j) * 0.031 for j in range(cols)] for i in range(rows)],
            index=pd.Index((MODELS * 2)[:rows], name="model"),
            columns=pd.Index((LANGS * 2)[:cols], name="lang"),
        )
        fig = plots.heatmap(table, "hybrid - teacher", fmt=".3f", cmap="vlag", center=0.0, size=(11, 4))
        fig = style.fit(fig)
        assert fig.get_figwidth() <= style.COLUMN_WIDTH_IN + 1e-9
        assert _min_shown_px(fig) >= 9
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        assert not _overlap(ax.get_xticklabels(), renderer)
        assert not _overlap(ax.get_yticklabels(), renderer)
        cell_w = ax.get_window_extent(renderer).width / cols
        numbers = [t for t in ax.texts if t.get_text()]
        assert not _overlap(numbers, renderer)
        assert all(t.get_window_extent(renderer).width < cell_w for t in numbers)
        if (rows, cols) == (3, 4):
            assert len(numbers) == 12 and numbers[0].get_text() == "0.031"


def test_layer_panels_of_12_models_wrap_titles_and_label_every_fifth_layer():
    """First FA Figs. 1-3: facet titles ran together and layers 0-29 were all labelled (four panels a row
    here, the H200 page's layout, so that long names must wrap)."""
    names = [f"{m}_{i}" for i in range(2) for m in MODELS]
    bars = pd.DataFrame([{"model": m, "layer": layer, "jump": 0.1} for m in names for layer in range(30)])
    fa = {m: [3, 10, 20] for m in names} | {names[0]: list(range(30))}  # the first all attention: unshaded
    for fig in (
        plots.layer_bars(
            bars,
            "jump",
            30,
            "jump of the language-mean attn_delta SoftCKA at every layer",
            fa_layers=fa,
            ncols=4,
        ),
        plots.alignment_grid(_curves(names, ["parallel", "shuffled"], "model", "pairing"), fa, "t", ncols=4),
    ):
        assert fig.get_figwidth() == pytest.approx(style.COLUMN_WIDTH_IN)
        assert _min_shown_px(fig) >= 9
        _assert_ticks_readable(fig, max_ticks=8)
        titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
        assert [t.replace("\n", "") for t in titles] == names
        assert any("\n" in t for t in titles)  # the longest names wrapped to their panel
    assert [t.get_text() for t in fig.legends[0].texts] == ["full attention", "parallel", "shuffled"]
    # six rows of panels: the figure's title sat on the first row's titles
    curves = _curves(names, ["parallel", "shuffled"], "model", "pairing")
    tall = plots.alignment_grid(
        curves, fa, "attn_delta SoftCKA, English vs each language (mean, IQR over languages)"
    )
    _assert_ticks_readable(tall, max_ticks=8)


def _beside_frame() -> pd.DataFrame:
    """Two feature maps x three stages x two runs of a LoLCATs-like Table 2: perplexities from 900 to 40, the
    paper's from 2448 to 3.9 (Llama 3 8B)."""
    paper = {"swap": 2448.0, "transfer": 60.9, "transfer+lora": 3.9}
    ours = {"swap": (900.0, 700.0), "transfer": (120.0, 100.0), "transfer+lora": (44.0, 40.0)}
    return pd.DataFrame(
        [
            {
                "feature_map": fm,
                "stage": stage,
                "seed": seed,
                "ppl": runs[seed] * scale,
                "paper": paper[stage],
            }
            for fm, scale in (("hedgehog", 1.0), ("t2r", 1.5))
            for stage, runs in ours.items()
            for seed in (0, 1)
        ]
    )


def test_beside_paper_draws_each_mean_and_the_papers_values_on_the_same_arms():
    frame = _beside_frame()
    fig = plots.beside_paper(
        frame,
        "stage",
        "ppl",
        "paper",
        hue="feature_map",
        logy=True,
        title="t",
        ours_label="a",
        paper_label="b",
    )
    left, right = fig.axes[:2]
    for ax in (left, right):
        assert [t.get_text().replace("\n", "") for t in ax.get_xticklabels()] == [
            "swap",
            "transfer",
            "transfer+lora",
        ]
        assert ax.get_yscale() == "log"  # both span more than 10x
    drawn = sorted(
        y for line in left.lines for y in line.get_ydata()
    )  # the diamonds: one mean per arm and map
    means = sorted(frame.groupby(["feature_map", "stage"])["ppl"].mean())
    assert drawn == pytest.approx(means)
    runs = sorted(y for c in left.collections for _, y in c.get_offsets())  # the dots: every run
    assert runs == pytest.approx(sorted(frame["ppl"]))
    paper = sorted(y for line in right.lines for y in line.get_ydata())
    assert paper == pytest.approx(sorted([2448.0, 60.9, 3.9] * 2))
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["hedgehog", "t2r"]


def test_beside_paper_leaves_a_narrow_range_linear_skips_missing_paper_values_and_rejects_bad_frames():
    frame = _beside_frame().query("feature_map == 'hedgehog' and stage != 'swap'")
    frame = frame.assign(
        paper=frame["paper"].where(frame["stage"] == "transfer")
    )  # no paper value for one arm
    fig = plots.beside_paper(
        frame, "stage", "ppl", "paper", logy=True, title="t", ours_label="a", paper_label="b"
    )
    left, right = fig.axes[:2]
    assert left.get_yscale() == "linear"  # 40-120: under 10x
    assert [y for line in right.lines for y in line.get_ydata() if y == y] == [60.9]
    with pytest.raises(ValueError, match="no rows"):
        plots.beside_paper(
            frame.iloc[:0], "stage", "ppl", "paper", title="t", ours_label="a", paper_label="b"
        )
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['nll'\]"):
        plots.beside_paper(frame, "stage", "nll", "paper", title="t", ours_label="a", paper_label="b")
