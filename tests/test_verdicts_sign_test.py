"""The verdict library's paired-outcome rule (exact sign test, ties dropped) and contrast precondition, by hand."""

import pytest

from hybridlib.verdicts import (
    Outcome,
    SignTestRule,
    Tolerance,
    clopper_pearson,
    established,
    min_discordant,
    sign_test_p,
)

RULE = SignTestRule(
    "A beats B",
    "share of discordant pairs with A > B",
    "pair",
    +1,
    Tolerance.any_magnitude("sign"),
    id="test.verdicts_sign_test.rule_15",
)


def test_sign_test_p_and_the_fewest_discordant_pairs_by_hand():
    assert sign_test_p(6, 6) == sign_test_p(0, 6) == pytest.approx(2 / 64)
    assert sign_test_p(5, 5) == pytest.approx(2 / 32)  # 0.0625: 5 pairs can never reach 5%
    assert sign_test_p(7, 10) == pytest.approx(2 * (1 + 10 + 45 + 120) / 1024)
    assert sign_test_p(0, 0) == 1.0 and sign_test_p(3, 6) == 1.0
    assert min_discordant(0.95) == 6 and min_discordant(0.99) == 8  # 2 / 2^8 = 0.0078 < 0.01 <= 2 / 2^7
    with pytest.raises(ValueError, match="0 <= k <= n"):
        sign_test_p(4, 3)


def test_clopper_pearson_by_hand():
    low, high = clopper_pearson(0, 6)
    assert low == 0.0 and high == pytest.approx(1 - 0.025 ** (1 / 6))
    low, high = clopper_pearson(6, 6)
    assert low == pytest.approx(0.025 ** (1 / 6)) and high == 1.0
    low, high = clopper_pearson(2, 5)  # tables: [0.0527, 0.8534]
    assert low == pytest.approx(0.0527, abs=1e-4) and high == pytest.approx(0.8534, abs=1e-4)


@pytest.mark.parametrize(
    "differences, outcome",
    [
        ([1] * 6 + [0] * 4, Outcome.REPRODUCED),  # 6 of 6 discordant, 4 ties: p = 0.031
        ([-1, -0.5, -1, -0.25, -1, -1, -1] + [0] * 3, Outcome.CONTRADICTED),  # graded differences, 0 of 7
        ([1, 1, 1, 1, 1] + [0] * 5, Outcome.INCONCLUSIVE),  # 5 of 5: p = 0.0625, too few discordant pairs
        ([1] * 8 + [-1] * 2, Outcome.INCONCLUSIVE),  # 8 of 10: p = 0.109
        ([0] * 10, Outcome.INCONCLUSIVE),  # all tied: no evidence either way
        ([1, 1], Outcome.NOT_TESTED),  # fewer pairs than min_replicates
    ],
)
def test_sign_test_rule_reaches_every_outcome_with_ties(differences, outcome):
    assert RULE.judge(differences).outcome == outcome


def test_sign_test_rule_numbers_reasons_and_magnitude():
    v = RULE.judge([0.5, -0.42, -0.42, 0.08, -0.75, 0, 0, 0, 0, 0])  # the H200 needle cells
    assert (v.estimate, v.null, v.n_replicates) == (pytest.approx(0.4), 0.5, 10)
    assert v.low == pytest.approx(0.0527, abs=1e-4) and v.high == pytest.approx(0.8534, abs=1e-4)
    assert "2 of 5 discordant pairs go the paper's way (5 of 10 pairs tied, dropped)" in v.reason
    assert "fewer than 6 discordant pairs" in v.reason and "takes >= 12 pairs" in v.reason
    assert "no pair is discordant" in RULE.judge([0, 0, 0]).reason
    b_wins = SignTestRule(
        "B beats A",
        "share",
        "pair",
        -1,
        Tolerance.any_magnitude("sign"),
        id="test.verdicts_sign_test.rule_61",
    )
    assert (
        b_wins.judge([-1] * 6).outcome == Outcome.REPRODUCED
        and b_wins.judge([1] * 6).outcome == Outcome.CONTRADICTED
    )
    strict = SignTestRule(
        "A beats B",
        "share",
        "pair",
        +1,
        Tolerance(0.5, 0.9, "most, not all"),
        id="test.verdicts_sign_test.rule_66",
    )
    assert (
        strict.judge([1] * 9 + [-1]).outcome == Outcome.REPRODUCED
    )  # 9 of 10 = 0.9 (bound inclusive), p = 0.021
    assert strict.judge([1] * 12 + [-1]).outcome == Outcome.DIRECTION_ONLY  # 12 of 13 = 0.92 > 0.9
    assert strict.judge([1] * 14 + [-1] * 2).outcome == Outcome.REPRODUCED  # 14 of 16 = 0.875, p = 0.0042
    assert v.to_dict()["replicate_values"][0] == 0.5
    with pytest.raises(ValueError, match="paper's side"):
        SignTestRule(
            "x",
            "m",
            "pair",
            +1,
            Tolerance.any_magnitude("r"),
            paper_value=0.3,
            id="test.verdicts_sign_test.rule_74",
        )


def test_a_contrast_needs_its_other_side_established():
    shown, absent = RULE.judge([1] * 6), RULE.judge([-1] * 6)
    assert established("A's effect", {"a": shown}).holds
    failed = established("A's effect", {"a": shown, "b": absent})
    assert not failed.holds and failed.why == "a: reproduced; b: contradicted"
    assert not established("A's effect", {}).holds and "nothing to contrast with" in established("x", {}).why
