"""Chapter-level alignment analysis: pair cutting, paired comparisons, first-FA jumps, caching."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen3Config

from hybridlib import alignment as al
from hybridlib.findings import students
from hybridlib.models import ModelCard

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "away", "big", "red", "sun"]


def _terms(curve: list[float], n: int = 6, noise: float = 0.0, seed: int = 0) -> np.ndarray:
    """Terms ``[L, n, 3]`` whose SoftCKA per layer is ``curve`` (h11 = h22 = 1, h12 = value, optional noise)."""
    rng = np.random.default_rng(seed)
    h12 = np.array(curve)[:, None] + noise * rng.standard_normal((len(curve), n))
    return np.stack([np.ones_like(h12), np.ones_like(h12), h12], -1)


def _alignment(label: str, curves: dict[str, list[float]], fa=(0, 1, 2, 3), noise=0.0) -> al.Alignment:
    terms = {}
    for i, (lang, curve) in enumerate(curves.items()):
        terms[("attn_in", lang, "parallel")] = _terms(curve, noise=noise, seed=i)
        terms[("attn_delta", lang, "parallel")] = _terms(curve, noise=noise, seed=i)
        terms[("attn_in", lang, "shuffled")] = _terms([c / 2 for c in curve], seed=i)
    return al.Alignment(label, "hybrid GDN", tuple(fa), len(next(iter(curves.values()))), terms)


def test_pair_lengths_cut_both_sides_to_the_same_fraction():
    assert al.pair_lengths(50, 80, 100) == (50, 80)  # both fit
    assert al.pair_lengths(40, 400, 100) == (10, 100)  # a quarter of each
    assert al.pair_lengths(3, 1000, 100) == (2, 100)  # at least 2
    assert al.pair_lengths(1, 1000, 100) == (1, 100)  # never more than the side has
    with pytest.raises(ValueError, match="max_tokens"):
        al.pair_lengths(10, 10, 1)


def test_jump_statistic_against_neighbours():
    s = np.array([[0.2, 0.3, 0.9, 0.4, 0.5]])
    assert al.jump_statistic(2, 5)(s)[0] == pytest.approx(0.9 - 0.35)
    assert al.jump_statistic(0, 5)(s)[0] == pytest.approx(0.2 - 0.3)
    assert al.jump_statistic(4, 5)(s)[0] == pytest.approx(0.5 - 0.4)
    with pytest.raises(ValueError, match="layer"):
        al.jump_statistic(5, 5)


def test_jump_finds_a_planted_spike_with_an_interval():
    spike = _alignment("h", {"x": [0.2, 0.2, 0.8, 0.2], "y": [0.3, 0.3, 0.5, 0.3]}, fa=(2,), noise=0.02)
    table = al.jump(spike, 2, n_boot=200)
    assert list(table.index) == ["x", "y", "mean"]
    assert table.loc["x", "jump"] == pytest.approx(0.6, abs=0.05)
    assert table.loc["mean", "jump"] == pytest.approx(0.4, abs=0.05)
    assert (table["low"] <= table["jump"]).all() and (table["jump"] <= table["high"]).all()
    assert table.loc["mean", "low"] > 0
    profile = al.jump_profile(spike)
    assert profile.idxmax() == 2
    flat = al.jump(_alignment("t", {"x": [0.5] * 4, "y": [0.4] * 4}), 2, n_boot=50)
    assert flat["jump"].abs().max() < 1e-12


def test_summary_curves_and_first_fa_layer():
    teacher = _alignment("teacher", {"a": [0.2, 0.4, 0.6, 0.4]})
    hybrid = _alignment("hybrid", {"a": [0.2, 0.7, 0.3, 0.6]}, fa=(1, 3))
    summ = al.summary([teacher, hybrid])
    assert summ.loc["teacher", "parallel"] == pytest.approx(0.4)
    assert summ.loc["teacher", "gap"] == pytest.approx(0.2)
    assert summ.loc["hybrid", "jaggedness"] > summ.loc["teacher", "jaggedness"]
    frame = al.curves([teacher, hybrid])
    assert set(frame["pairing"]) == {"parallel", "shuffled"}
    assert frame[(frame["model"] == "hybrid")]["is_fa"].sum() == 2 * 3  # 2 FA layers x 3 (signal, pairing)
    assert al.first_fa_layer(hybrid) == 1
    assert al.first_fa_layer(teacher, reference_layer=3) == 3
    with pytest.raises(ValueError, match="reference_layer"):
        al.first_fa_layer(teacher)
    with pytest.raises(ValueError, match="no terms"):
        teacher.get("attn_in", "zz")


def _tiny_probed(label: str = "toy", seed: int = 0) -> al.Probed:
    vocab = {"<s>": 0, "<unk>": 1, **{w: i + 2 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", unk_token="<unk>")
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(vocab),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=3,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=64,
    )
    model = AutoModelForCausalLM.from_config(config).eval()
    card = ModelCard(
        "toy",
        "test",
        "-",
        "Qwen3ForCausalLM",
        3,
        16,
        2,
        1,
        8,
        len(vocab),
        0,
        ["full_attention"] * 3,
        "prepend",
        0,
        False,
    )
    return al.Probed(label, "full attention", lambda: model, tokenizer, card, (0, 1, 2), f"toy-{seed}")


def _texts() -> dict[str, list[str]]:
    rng = np.random.default_rng(0)
    eng = [" ".join(rng.choice(WORDS, size=6 + i)) for i in range(4)]
    return {"eng": eng, "copy": list(eng), "other": [" ".join(rng.choice(WORDS, size=9)) for _ in range(4)]}


def test_measure_identical_texts_align_perfectly_and_results_are_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path))
    probed = _tiny_probed()
    result = al.measure(probed, _texts(), max_tokens=32, progress=False)
    assert result.languages == ["copy", "other"]
    np.testing.assert_allclose(result.scores("attn_in", "copy"), 1.0, atol=1e-12)
    assert (result.scores("attn_in", "copy", "shuffled") < 1 - 1e-3).all()
    assert (result.scores("attn_in", "other") < 1 - 1e-3).all()
    assert result.get("attn_delta", "other").shape == (3, 4, 3)
    np.testing.assert_allclose(result.linear[("attn_in", "copy", "mean")], 1.0, atol=1e-9)
    assert result.tokens["copy"][0] == result.tokens["copy"][1]
    assert len(list((tmp_path / "alignment").glob("*.npz"))) == 1
    again = al.measure(probed, _texts(), max_tokens=32, progress=False)
    for key, terms in result.terms.items():
        np.testing.assert_array_equal(terms, again.terms[key])
    assert again.tokens == result.tokens
    cut = al.measure(probed, _texts(), max_tokens=4, progress=False)  # another setting -> another entry
    assert len(list((tmp_path / "alignment").glob("*.npz"))) == 2
    assert cut.tokens["other"][1] == 4 * 4
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path / "threads"))
    threaded = al.measure(probed, _texts(), max_tokens=32, workers=3, progress=False)
    for key, terms in result.terms.items():
        np.testing.assert_array_equal(terms, threaded.terms[key])
    with pytest.raises(ValueError, match="eng"):
        al.measure(probed, {"copy": ["a b"]}, max_tokens=8)
    with pytest.raises(ValueError, match="workers"):
        al.measure(probed, _texts(), max_tokens=8, workers=-1)
    with pytest.raises(ValueError, match="same number"):
        al.measure(probed, {"eng": ["the cat", "a dog"], "x": ["the cat"]}, max_tokens=8)


def test_udhr_texts_and_argument_errors():
    texts = al.udhr_texts(["yor", "eng", "sot"], 3)
    assert list(texts) == ["eng", "yor", "sot"] and all(len(v) == 3 for v in texts.values())
    with pytest.raises(ValueError, match="articles"):
        al.udhr_texts(["yor"], 31)
    with pytest.raises(ValueError, match="at least one language"):
        al.udhr_texts(["eng"], 3)
    with pytest.raises(ValueError, match="layouts"):
        students.load_models("tiny-teacher", ["diagonal"], preset="seminar")


def test_student_args_follow_the_layout_chapter():
    from hybridlib.findings import chapter

    for preset in ("seminar", "gpu"):
        args = students.student_args(preset)
        values = chapter("layout_distillation").resolve(preset)
        assert args == {k: values[k] for k in students.STUDENT_ARGS}


def test_random_init_differs_from_the_model():
    probed = _tiny_probed()
    fresh = al.random_init_like(probed.model, seed=1)
    a, b = probed.model.get_input_embeddings().weight, fresh.get_input_embeddings().weight
    assert a.shape == b.shape and not torch.equal(a, b)


def test_jump_against_a_reference_is_paired():
    hybrid = _alignment("h", {"x": [0.2, 0.2, 0.8, 0.2], "y": [0.3, 0.3, 0.5, 0.3]}, fa=(2,), noise=0.02)
    teacher = _alignment("t", {"x": [0.2, 0.2, 0.3, 0.2], "y": [0.3, 0.3, 0.3, 0.3]}, noise=0.02)
    diff = al.jump(hybrid, 2, reference=teacher, n_boot=200)
    own = al.jump(hybrid, 2, n_boot=200)["jump"] - al.jump(teacher, 2, n_boot=200)["jump"]
    np.testing.assert_allclose(diff["jump"], own, atol=1e-12)
    assert diff.loc["x", "jump"] == pytest.approx(0.5, abs=0.05) and diff.loc["mean", "low"] > 0
    same = al.jump(hybrid, 2, reference=hybrid, n_boot=50)
    assert same[["jump", "low", "high"]].abs().max().max() < 1e-12  # paired: identical models never differ


def test_chapter_measure_is_the_notebooks_measurement(tmp_path, monkeypatch):
    """chapter_measure with a chapter's parameters fills the cache entry the explicit call reads (one file)."""
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path))
    monkeypatch.setattr(al, "udhr_texts", lambda languages, articles: _texts())  # words the toy model knows
    probed = _tiny_probed()
    params = {"languages": ["copy", "other"], "articles": 4, "max_tokens": 16, "seed": 0, "cpu_workers": 1}
    first = al.chapter_measure(probed, params)
    again = al.measure(probed, _texts(), max_tokens=16, bandwidth="median", seed=0)
    assert len(list((tmp_path / "alignment").glob("*.npz"))) == 1
    for key, terms in first.terms.items():
        np.testing.assert_array_equal(terms, again.terms[key])


def test_prealign_measures_what_it_is_asked_with_the_chapters_parameters(monkeypatch, capsys):
    from hybridlib.findings import chapter
    from hybridlib.findings.softcka import prealign

    def probed(label, kind):
        return al.Probed(label, kind, lambda: torch.nn.Linear(1, 1), None, None, (0,), f"id-{label}")

    loaded, measured = {}, []

    def load_models(teacher, layouts, *, preset, swa_control, device):
        loaded.update(teacher=teacher, layouts=list(layouts), preset=preset, swa=swa_control)
        out = [probed(teacher, "full attention")] + [probed(name, "hybrid GDN") for name in layouts]
        return out + ([probed("standard_periodic+swa", "hybrid SWA")] if swa_control else [])

    def load_replicates(teacher, models, *, preset, device):
        return {m.label: [probed(m.label, m.kind)] * 2 for m in models if m.kind != "full attention"}

    monkeypatch.setattr(prealign.students, "load_models", load_models)
    monkeypatch.setattr(prealign.students, "load_replicates", load_replicates)
    monkeypatch.setattr(
        prealign.alignment, "chapter_measure", lambda m, params: measured.append((m.label, params))
    )
    threads = []
    monkeypatch.setattr(prealign.torch, "set_num_threads", threads.append)
    labels = prealign.main(["--preset", "seminar", "--layouts", "reverse_periodic", "--replicates"])
    assert threads == [chapter("first_fa").resolve("seminar")["torch_threads"]] == [1]
    assert labels == ["reverse_periodic"] * 3
    params = chapter("first_fa").resolve("seminar")
    assert loaded == {
        "teacher": params["teacher"],
        "layouts": ["reverse_periodic"],
        "preset": "seminar",
        "swa": False,
    }
    assert all(p == params for _, p in measured)
    labels = prealign.main(["--preset", "gpu", "--chapter", "softcka", "--teacher", "--swa", "--layouts"])
    assert labels == [chapter("softcka").resolve("gpu")["teacher"], "standard_periodic+swa"]
    for bad, named in (
        (["--preset", "gpu"], "nothing to measure"),
        (["--preset", "gpu", "--layouts", "x"], "--layouts"),
    ):
        with pytest.raises(SystemExit):
            prealign.main(bad)
        assert named in capsys.readouterr().err


def test_a_cached_measurement_never_loads_the_model(tmp_path, monkeypatch):
    """A student carried without its weights (hybridlib.carry) is probed from the cache: ``load`` is not called."""
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path))
    measured = al.measure(_tiny_probed(), _texts(), max_tokens=16, progress=False)

    def absent():
        raise FileNotFoundError("weights stayed on the machine that trained it")

    carried = dataclasses.replace(_tiny_probed(), load=absent)
    again = al.measure(carried, _texts(), max_tokens=16, progress=False)
    for key, terms in measured.terms.items():
        np.testing.assert_array_equal(terms, again.terms[key])
    with pytest.raises(FileNotFoundError, match="stayed"):  # a new measurement needs the weights
        al.measure(carried, _texts(), max_tokens=8, progress=False)
