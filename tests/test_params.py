"""Chapter specs and parameter validation: every bad input names the parameter and the allowed values."""

import pytest

from hybridlib.findings import CHAPTERS, chapter, execution_order, notebook_params
from hybridlib.params import PRESETS, ChapterSpec, Param, ParameterError


def test_every_chapter_resolves_on_every_preset():
    for spec in CHAPTERS.values():
        for preset in PRESETS:
            values = spec.resolve(preset)
            assert values["preset"] == preset
            assert set(values) == {"preset", *(p.name for p in spec.params)}


def test_none_takes_the_preset_default_and_overrides_win():
    values = notebook_params(
        "layout_distillation", {"preset": "seminar", "train_tokens": 1234, "seq_len": None}
    )
    assert values["train_tokens"] == 1234
    assert values["seq_len"] == chapter("layout_distillation").param("seq_len").defaults["seminar"]


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"device": "tpu"}, "device"),
        ({"bench_lengths": "512"}, "must be a list"),
        ({"bench_lengths": [512, 8]}, "bench_lengths[1]"),
        ({"seed": 1.5}, "must be of type int"),
        ({"seed": True}, "must be of type int"),
        ({"languages": ["eng", "xx"]}, "cpu" if False else "eng, tel"),
        ({"not_a_param": 1}, "has no parameter 'not_a_param'"),
    ],
)
def test_bad_values_name_the_parameter(overrides, message):
    with pytest.raises(ParameterError, match=message.replace("[", r"\[").replace("]", r"\]")):
        chapter("efficiency").resolve("seminar", overrides)


def test_unknown_preset_and_chapter_list_the_allowed():
    with pytest.raises(ParameterError, match="seminar, gpu, paper"):
        chapter("efficiency").resolve("laptop")
    with pytest.raises(ParameterError, match="efficiency, softcka"):
        chapter("nope")


def test_int_accepted_for_float():
    assert chapter("layout_distillation").resolve("seminar", {"fa_fraction": 1})["fa_fraction"] == 1.0


def test_execution_order_puts_dependencies_first():
    order = execution_order(["softcka"])
    assert order == ["layout_distillation", "softcka"]
    full = execution_order()
    assert sorted(full) == sorted(CHAPTERS)
    for name in full:
        for dep in chapter(name).depends_on:
            assert full.index(dep) < full.index(name)


def test_param_needs_every_preset():
    with pytest.raises(ValueError, match="gpu"):
        Param("x", int, "doc", defaults={"seminar": 1, "paper": 1})


def test_dependency_cycle_is_reported(monkeypatch):
    from hybridlib import findings as chapters

    a = ChapterSpec("a", "A", "a.ipynb", "claim", (), depends_on=("b",))
    b = ChapterSpec("b", "B", "b.ipynb", "claim", (), depends_on=("a",))
    monkeypatch.setattr(chapters, "CHAPTERS", {"a": a, "b": b})
    with pytest.raises(ParameterError, match="cycle"):
        chapters.execution_order(["a"])


@pytest.mark.parametrize(
    "chapter_name, overrides, message",
    [
        ("layout_distillation", {"fa_fraction": 1.5}, "'fa_fraction' must be in (0.0, 1.0], got 1.5"),
        ("layout_distillation", {"fa_fraction": 0.0}, "'fa_fraction' must be in (0.0, 1.0], got 0.0"),
        ("efficiency", {"needle_depths": [0.5, 1.01]}, "'needle_depths[1]' must be in [0.0, 1.0]"),
        ("lolcats", {"passkey_depths": [-0.1]}, "'passkey_depths[0]' must be in [0.0, 1.0]"),
        ("softcka", {"articles": 1}, "'articles' must be >= 2, got 1"),
    ],
)
def test_bounds_name_the_parameter_and_the_range(chapter_name, overrides, message):
    with pytest.raises(ParameterError) as err:
        chapter(chapter_name).resolve("seminar", overrides)
    assert message in str(err.value)


def test_bounds_are_inclusive_unless_the_minimum_is_exclusive():
    spec = chapter("layout_distillation")
    assert spec.resolve("seminar", {"fa_fraction": 1.0})["fa_fraction"] == 1.0
    depths = chapter("efficiency").resolve("seminar", {"needle_depths": [0.0, 1.0]})["needle_depths"]
    assert depths == [0.0, 1.0]
    assert Param("x", int, "doc", defaults=dict.fromkeys(PRESETS, 3), maximum=3).bounds() == "<= 3"
    assert "in (0.0, 1.0]" in spec.param("fa_fraction").describe()


def test_defaults_outside_the_bounds_are_refused_when_declared():
    with pytest.raises(ValueError, match="seminar default of parameter 'x'"):
        Param("x", float, "doc", defaults=dict.fromkeys(PRESETS, 2.0), minimum=0.0, maximum=1.0)
    with pytest.raises(ValueError, match="maximum 0 < minimum 1"):
        Param("x", int, "doc", defaults=dict.fromkeys(PRESETS, 1), minimum=1, maximum=0)
