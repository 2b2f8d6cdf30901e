"""The SoftCKA chapter's rules driven into each of their outcomes by synthetic alignments (hand-computed)."""

from __future__ import annotations

import numpy as np
import pytest

from hybridlib.alignment import Alignment
from hybridlib.data.languages import UDHR_LANGUAGES
from hybridlib.findings.layout.spec import SPEC as LAYOUT
from hybridlib.findings.softcka import report
from hybridlib.findings.softcka.spec import SPEC as SOFTCKA
from hybridlib.verdicts import Outcome

R, I, C, N = Outcome.REPRODUCED, Outcome.INCONCLUSIVE, Outcome.CONTRADICTED, Outcome.NOT_TESTED
N_ARTICLES = 6


def _terms(curve: list[float]) -> np.ndarray:
    """Terms ``[L, N_ARTICLES, 3]`` whose SoftCKA per layer is exactly ``curve`` (h11 = h22 = 1, h12 = value)."""
    h12 = np.repeat(np.array(curve, dtype=float)[:, None], N_ARTICLES, 1)
    return np.stack([np.ones_like(h12), np.ones_like(h12), h12], -1)


def _model(
    label: str,
    kind: str,
    parallel: list[float],
    shuffled: list[float],
    langs=report.SEEN,
    tokens: tuple[int, int] = (600, 900),
) -> Alignment:
    """The same parallel / shuffled curves in every language of ``langs``; ``tokens`` compared per side."""
    terms = {}
    for lang in langs:
        terms[("attn_in", lang, "parallel")] = _terms(parallel)
        terms[("attn_in", lang, "shuffled")] = _terms(shuffled)
    return Alignment(label, kind, (3,), len(parallel), terms, tokens={lang: tokens for lang in langs})


def _teacher(gap: float = 0.1, langs=report.SEEN) -> Alignment:
    return _model("teacher", "full attention", [0.2 + gap] * 4, [0.2] * 4, langs)


def _students(
    gaps: list[float], label: str = "reverse_periodic", kind: str = "hybrid GDN", zigzag: float = 0.0
):
    """One student per seed whose gap curve is ``gap +- zigzag`` alternating over 4 layers."""
    wave = np.array([1, -1, 1, -1]) * zigzag
    return [_model(label, kind, list(0.3 + g + wave), [0.3] * 4) for g in gaps]


def test_seen_and_unseen_languages_come_from_the_corpus_definition():
    assert report.SEEN == ("arb", "cmn_hans", "rus", "hin")
    assert set(report.UNSEEN) == {"tel", "mal", "tam", "mya", "khm", "tha", "yor", "sot"}  # issue 18's eight
    assert sorted(report.SEEN + report.UNSEEN) == sorted(c for c in UDHR_LANGUAGES if c != "eng")
    assert report.PAPER_LOWER == {
        "Qwen3.5 vs Qwen3": (10, 13),
        "Ring-mini-linear-2.0 vs Ring-mini-2.0": (11, 13),
    }


def test_gap_and_jaggedness_by_hand():
    m = _model("m", "hybrid GDN", [0.2, 0.4, 0.6, 0.4], [0.1] * 4, ["arb"])
    assert report.gap_curve(m, "arb") == pytest.approx([0.1, 0.3, 0.5, 0.3])
    assert report.gap(m, "arb") == pytest.approx(0.3)
    assert report.jaggedness(m, "arb") == pytest.approx(0.2)  # second differences 0.0, -0.4


def test_lower_rule_outcomes_on_the_gap():
    teacher = _teacher(0.1)
    # differences -0.05, -0.06, -0.04: t interval -0.05 +- 4.303 * 0.01 / sqrt 3 = [-0.075, -0.025]
    v = report.lower_verdict(teacher, _students([0.05, 0.04, 0.06]), report.SEEN)
    assert (
        v.outcome == R and v.estimate == pytest.approx(-0.05) and v.high == pytest.approx(-0.0252, abs=1e-3)
    )
    assert report.lower_verdict(teacher, _students([0.15, 0.16, 0.14]), report.SEEN).outcome == C
    assert report.lower_verdict(teacher, _students([0.05, 0.15, 0.1]), report.SEEN).outcome == I
    one = report.lower_verdict(teacher, _students([0.05]), report.SEEN)
    assert (
        one.outcome == N
        and "replicates failed: 1 replicates" in one.reason
        and one.estimate == pytest.approx(-0.05)
    )
    assert report.lower_counts(teacher, _students([0.05, 0.04, 0.06]), report.SEEN) == "4/4"


def test_a_level_shift_is_not_less_alignment():
    teacher = _model("teacher", "full attention", [0.75] * 4, [0.5] * 4)  # binary-exact: gap 0.25
    shifted = [
        _model("s", "hybrid GDN", [0.5] * 4, [0.25] * 4) for _ in range(3)
    ]  # both fall by 0.25: gap 0.25
    assert all(s.scores("attn_in", "arb").mean() < teacher.scores("attn_in", "arb").mean() for s in shifted)
    v = report.lower_verdict(teacher, shifted, report.SEEN)
    assert v.outcome == I and v.estimate == pytest.approx(0.0)


def test_gaps_are_compared_only_where_the_teacher_resolves_alignment():
    blind = _teacher(0.0, report.UNSEEN)  # parallel = shuffled: the probe sees no alignment at all
    v = report.lower_verdict(blind, _students([0.05] * 3), report.UNSEEN)
    assert v.outcome == N and "teacher's gap above 0 failed" in v.reason
    assert (
        report.lower_verdict(_teacher(0.1), _students([0.05] * 3), report.UNSEEN).outcome == N
    )  # not measured


def test_jagged_rule_outcomes():
    teacher = _teacher(0.1)  # flat: jaggedness 0
    # zigzag z has second differences +-4z: jaggedness 4z, i.e. 0.04, 0.05, 0.06 for z = 0.01, 0.0125, 0.015
    v = report.jagged_verdict(
        teacher, [_students([0.1], zigzag=z)[0] for z in (0.01, 0.0125, 0.015)], report.SEEN
    )
    assert v.outcome == R and v.estimate == pytest.approx(0.05)
    flat = report.jagged_verdict(teacher, _students([0.1] * 3), report.SEEN)
    assert flat.outcome == I and flat.estimate == pytest.approx(0.0)
    smooth_teacher = _model("teacher", "full attention", [0.3, 0.4, 0.3, 0.4], [0.2] * 4)  # jaggedness 0.2
    assert report.jagged_verdict(smooth_teacher, _students([0.1] * 3, zigzag=0.01), report.SEEN).outcome == C
    assert report.jagged_verdict(teacher, _students([0.1], zigzag=0.01), report.SEEN).outcome == N


def test_swa_control_binds_only_when_the_window_cuts_most_compared_states():
    langs = ["arb"]
    long = _model(
        "swa", "hybrid SWA", [0.3] * 4, [0.2] * 4, langs, tokens=(240, 300)
    )  # 40 and 50 per article
    p = report.swa_binds(long, langs, window=16, probe_tokens=96)
    assert p.holds and "at least 64% of the 540 compared states" in p.why  # 1 - 12 sides x 16 / 540 = 0.644
    short = _model(
        "swa", "hybrid SWA", [0.3] * 4, [0.2] * 4, langs, tokens=(120, 150)
    )  # 20 and 25 per article
    p = report.swa_binds(short, langs, window=16, probe_tokens=96)
    assert not p.holds and "at least 29% of the 270 compared states" in p.why  # 1 - 192 / 270 = 0.289
    assert not report.swa_binds(long, langs, window=128, probe_tokens=128).holds  # the old gpu setting


def test_jagged_vs_swa_rule_outcomes_and_its_control():
    teacher = _teacher(0.1)
    gdn = [_students([0.1], zigzag=z)[0] for z in (0.01, 0.0125, 0.015)]
    swa = _students([0.1] * 3, label="standard_periodic+swa", kind="hybrid SWA")
    v = report.jagged_vs_swa_verdict(teacher, gdn, swa, report.SEEN, window=16, probe_tokens=96)
    assert v.outcome == R and v.estimate == pytest.approx(0.05)  # mean per side 100 and 150 >= 32
    assert (
        report.jagged_vs_swa_verdict(teacher, swa, gdn, report.SEEN, window=16, probe_tokens=96).outcome == C
    )
    unbound = report.jagged_vs_swa_verdict(teacher, gdn, swa, report.SEEN, window=128, probe_tokens=128)
    assert unbound.outcome == N and "SWA window cuts most probed contexts failed" in unbound.reason
    assert (
        report.jagged_vs_swa_verdict(teacher, gdn, [], report.SEEN, window=16, probe_tokens=96).outcome == N
    )


def test_verdicts_group_replicates_by_label_and_cover_every_rule():
    teacher = _teacher(0.1, report.SEEN + report.UNSEEN)
    results = [
        teacher,
        *_students([0.05, 0.04, 0.06]),
        *_students([0.1] * 3, "standard_periodic+swa", "hybrid SWA"),
    ]
    assert [len(v) for v in report.replicates(results[1:]).values()] == [3, 3]
    rows = report.verdicts(results, window=16, probe_tokens=96)
    assert [(m, g, v.claim) for m, g, v in rows][:3] == [
        ("reverse_periodic", "seen in distillation", report.LOWER.claim),
        ("reverse_periodic", "seen in distillation", report.JAGGED.claim),
        ("reverse_periodic", "seen in distillation", report.JAGGED_VS_SWA.claim),
    ]
    assert len(rows) == 2 * 5 and rows[0][2].outcome == R
    assert rows[5][2].outcome == N  # the unseen languages were not measured by these students
    with pytest.raises(ValueError, match="teacher"):
        report.verdicts(results[1:], window=16, probe_tokens=96)
    table = report.paper_rows(results, window=16, probe_tokens=96)
    assert [r["verdict"] for r in table] == [v for _, _, v in rows]
    assert table[0]["paper"] == (
        "Qwen3.5 vs Qwen3 10/13; Ring-mini-linear-2.0 vs Ring-mini-2.0 11/13 languages lower (FLORES)"
    )
    assert "gap lower in 4/4 languages (seed mean)" in table[0]["note"] and "GGUF" in table[0]["note"]


def test_every_preset_probes_at_least_two_swa_windows():
    for preset in ("seminar", "gpu", "paper"):
        window = LAYOUT.resolve(preset)["swa_window"]
        assert SOFTCKA.resolve(preset)["max_tokens"] >= 2 * window, preset  # else at most half lie beyond


def test_gap_table_sets_the_gap_beside_the_raw_parallel_difference():
    teacher = _model("teacher", "full attention", [0.75] * 4, [0.5] * 4)
    results = [teacher, *[_model("s", "hybrid GDN", [0.5] * 4, [0.25] * 4) for _ in range(2)]]
    table = report.gap_table(results)
    assert list(table.index.get_level_values("lang")) == list(report.SEEN)  # unseen: not measured, no rows
    row = table.loc[("s", "arb")]
    assert (row["group"], row["seeds"], row["teacher_gap"], row["hybrid_gap"]) == (
        "seen in distillation",
        2,
        0.25,
        0.25,
    )
    assert (row["gap_difference"], row["parallel_difference"]) == (
        0.0,
        -0.25,
    )  # a level shift, no less alignment
