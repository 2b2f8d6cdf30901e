"""The layout chapter's per-language figure (hybridlib.findings.layout.report.language_figure, issue 50): readable
at the text column with the Bible corpus's 22 languages and the H200 preset's arms, checked on the drawn figure."""

import itertools

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.image import AxesImage  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from hybridlib import style  # noqa: E402
from hybridlib.data.languages import BIBLE_LANGUAGES, LANGUAGES  # noqa: E402
from hybridlib.findings.layout import report  # noqa: E402

SEMINAR_ARMS = (
    "reverse_periodic",
    "sandwich",
    "interleaved_sandwich",
    "endpoint_spread",
    "periodic_first_at_0",
    "standard_periodic+swa",
)
H200_ARMS = (*SEMINAR_ARMS, "standard_periodic+capped")
DISPLAY_MIN_PX = 9  # smallest text as displayed in the 784 px column of a 1400 px page


@pytest.fixture(autouse=True, scope="module")
def _styled():
    with matplotlib.rc_context():
        style.apply()
        yield
    plt.close("all")


def _frame(arms, *, low=-65.0, high=12.0, seed=0) -> pd.DataFrame:
    """perplexity_by_script's per-language frame: (layout, lang) index, script and ppl_change_pct columns."""
    rng = np.random.default_rng(seed)
    rows = [
        {
            "layout": arm,
            "lang": lang,
            "script": LANGUAGES[lang].script,
            "ppl_change_pct": rng.uniform(low, high),
        }
        for arm in arms
        for lang in BIBLE_LANGUAGES
    ]
    return pd.DataFrame(rows).set_index(["layout", "lang"])


def _texts(fig):
    """Every visible, non-empty text of the drawn figure."""
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def _tick_labels(fig):
    labels = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            labels += [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text().strip()]
    for ax in fig.axes:  # secondary axes (the script labels) are children of their parent
        for child in ax.child_axes:
            labels += [t for t in child.yaxis.get_ticklabels() if t.get_visible() and t.get_text().strip()]
    return labels


def _numbers(fig):
    return [t for t in fig.axes[0].texts if t.get_visible()]


SIZES = {"h200": H200_ARMS, "seminar": SEMINAR_ARMS}


@pytest.fixture(params=sorted(SIZES), scope="module")
def drawn(request):  # drawn once per size for the module's tests (a figure takes ~1 s)
    fig = report.language_figure(_frame(SIZES[request.param]))
    fig.canvas.draw()
    return fig


def test_every_language_and_arm_is_a_tick_label(drawn):
    ax = drawn.axes[0]
    assert sorted(t.get_text() for t in ax.get_yticklabels()) == sorted(BIBLE_LANGUAGES)
    arms = [t.get_text().replace("\n", " ").replace(" +", "+") for t in ax.get_xticklabels()]
    assert arms[0] == "reverse periodic" and len(arms) in {len(a) for a in SIZES.values()}


def test_no_two_tick_labels_overlap(drawn):
    renderer = drawn.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _tick_labels(drawn)]
    assert len(boxes) > len(BIBLE_LANGUAGES)
    clashes = [(a, b) for (a, p), (b, q) in itertools.combinations(boxes, 2) if p.overlaps(q)]
    assert not clashes


def test_numbers_fit_their_cells_and_miss_the_labels(drawn):
    renderer = drawn.canvas.get_renderer()
    ax = drawn.axes[0]
    numbers = _numbers(drawn)
    assert len(numbers) == len(BIBLE_LANGUAGES) * len(ax.get_xticklabels())  # they fit at these sizes
    area = ax.get_window_extent(renderer)
    cell_w = area.width / len(ax.get_xticklabels())
    labels = [t.get_window_extent(renderer) for t in _tick_labels(drawn)]
    for t in numbers:
        box = t.get_window_extent(renderer)
        assert box.width < cell_w and area.x0 <= box.x0 and box.x1 <= area.x1
        assert not any(box.overlaps(label) for label in labels)


def test_smallest_text_as_displayed_at_the_column_width(drawn):
    assert drawn.get_figwidth() == pytest.approx(style.COLUMN_WIDTH_IN)
    renderer = drawn.canvas.get_renderer()
    shown_px = drawn.get_tightbbox(renderer).width * drawn.dpi  # the notebook saves with bbox_inches="tight"
    shrink = min(1.0, style.TEXT_WIDTH_PX / shown_px)
    smallest = min(t.get_fontsize() for t in _texts(drawn)) * drawn.dpi / 72 * shrink
    assert smallest >= DISPLAY_MIN_PX


def test_colour_scale_is_symmetric_about_zero(drawn):
    (image,) = [a for a in drawn.axes[0].get_children() if isinstance(a, AxesImage)]
    norm = image.norm
    assert norm.vmin == -norm.vmax and norm.vmax > 0
    assert norm(0.0) == pytest.approx(0.5)
    values = image.get_array()
    assert np.nanmax(np.abs(values)) <= norm.vmax  # no cell clipped
    mid = np.array(image.cmap(0.5)[:3])
    assert mid.min() > 0.9  # a diverging map: near white at 0


def test_index_levels_or_columns_and_script_groups():
    frame = _frame(SEMINAR_ARMS)
    a = report.language_figure(frame)
    b = report.language_figure(frame.reset_index())
    ticks = [t.get_text() for t in a.axes[0].get_yticklabels()]
    assert ticks == [t.get_text() for t in b.axes[0].get_yticklabels()]
    scripts = [LANGUAGES[lang].script for lang in ticks]
    assert scripts == sorted(scripts)  # languages grouped by script
    (right,) = a.axes[0].child_axes
    assert {t.get_text() for t in right.yaxis.get_ticklabels()} == set(scripts)


def test_many_arms_or_wide_numbers_stay_legible():
    arms = [
        f"{name}_{i}" for i in range(5) for name in SEMINAR_ARMS
    ]  # 30 arms: names upright, numbers dropped
    fig = report.language_figure(_frame(arms, low=-150.0, high=150.0))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in _tick_labels(fig)]
    assert not any(p.overlaps(q) for p, q in itertools.combinations(boxes, 2))
    assert not _numbers(fig)
    norm = fig.axes[0].images[0].norm
    assert norm.vmin == -norm.vmax and norm.vmax >= 150


def test_draws_what_perplexity_by_script_returns():
    """The notebook's call: perplexity_by_script's per-language frame, 22 languages, the baseline left out."""
    rng = np.random.default_rng(3)
    docs = pd.DataFrame(
        [(lang, f"d{d}", 50, 2 + rng.random()) for lang in BIBLE_LANGUAGES for d in range(2)],
        columns=["lang", "doc_id", "tokens", "ce_teacher"],
    )
    scores = {
        arm: docs.assign(ce_student=docs["ce_teacher"] + 0.5 - 0.1 * i, kl=0.5 - 0.1 * i)
        for i, arm in enumerate(("standard_periodic", *SEMINAR_ARMS[:3]))
    }
    per_lang, _ = report.perplexity_by_script(scores)
    fig = report.language_figure(per_lang)
    ax = fig.axes[0]
    assert [t.get_text().replace("\n", " ") for t in ax.get_xticklabels()] == [
        "reverse periodic",
        "sandwich",
        "interleaved sandwich",
    ]
    assert len(ax.get_yticklabels()) == len(BIBLE_LANGUAGES)
    assert {t.get_text() for t in _numbers(fig)} == {
        "-10",
        "-18",
        "-26",
    }  # 100 (e^-0.1 - 1) etc., whole percent
