"""The first-FA chapter's pre-registered rules (``hybridlib.findings.first_fa.report``) on hand-made SoftCKA terms
whose curves are known in closed form."""

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from hybridlib.alignment import Alignment
from hybridlib.findings import chapter
from hybridlib.findings.first_fa import report
from hybridlib.models import ModelCard
from hybridlib.verdicts import Outcome

N_LAYERS, N_ARTICLES, LANGS = 6, 8, ("rus", "hin")
FLAT = [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]


def alignment(curve, fa_layers, *, label="standard_periodic", kind="hybrid GDN", noise=0.0, seed=0):
    """Terms with h11 = h22 = 1 per article, so SoftCKA at a layer = the mean of its h12 = ``curve`` (+ noise)."""
    rng = np.random.default_rng(seed)
    terms = {}
    for lang in LANGS:
        t = np.ones((N_LAYERS, N_ARTICLES, 3))
        t[..., 2] = np.asarray(curve)[:, None] + noise * rng.standard_normal((N_LAYERS, N_ARTICLES))
        terms[("attn_delta", lang, "parallel")] = t
    return Alignment(label, kind, tuple(fa_layers), N_LAYERS, terms)


def spike(layer, size, base=FLAT):
    curve = list(base)
    curve[layer] += size
    return curve


def test_jump_profile_and_event_margin_by_hand():
    al = alignment(spike(3, 0.2), [3, 5])
    profile = report.jump_profiles(report._stack([al]))[0]
    # layer 3: 0.7 - 0.5; its neighbours 2 and 4: 0.5 - (0.5 + 0.7) / 2 = -0.1; the ends use their one neighbour
    assert profile == pytest.approx([0.0, 0.0, -0.1, 0.2, -0.1, 0.0])
    assert report.event_margin(profile, 3) == pytest.approx(0.1)
    assert report.event_margin(profile, 2) == pytest.approx(-0.1)


def _rows(gdn, swa=None, *, share=0.75):
    students = {"standard_periodic": gdn} | ({"standard_periodic+swa": swa} if swa else {})
    rows = report.judge_events(
        students, swa="standard_periodic+swa" if swa else None, swa_window=16, swa_share=share, n_boot=300
    )
    return {row["metric"]: row["verdict"] for row in rows}


EVENT = "largest attn_delta event at the first FA layer, standard_periodic"
VS_SWA = "|event| at the first FA layer: standard_periodic minus standard_periodic+swa"
SWA_EVENT = "largest attn_delta event at the first FA layer, standard_periodic+swa"


def test_event_rule_reproduced_contradicted_inconclusive_not_tested():
    three = [alignment(spike(3, s), [3, 5], noise=0.002, seed=i) for i, s in enumerate((0.2, 0.22, 0.24))]
    assert _rows(three)[EVENT].outcome == Outcome.REPRODUCED
    elsewhere = [
        alignment(spike(3, 0.1, spike(0, 0.5)), [3, 5], seed=i) for i in range(3)
    ]  # layer 0 dominates
    verdict = _rows(elsewhere)[EVENT]
    assert verdict.outcome == Outcome.CONTRADICTED
    # layer 0: jump 1.0 - 0.5 = 0.5 (the largest); layer 3: 0.6 - 0.5 = 0.1; layer 1: 0.5 - 0.75 = -0.25
    assert verdict.estimate == pytest.approx(0.1 - 0.5)
    mixed = [
        alignment(spike(3, 0.2), [3, 5]),
        alignment(spike(3, 0.1, spike(0, 0.5)), [3, 5]),
        alignment(spike(3, 0.2), [3, 5]),
    ]
    assert _rows(mixed)[EVENT].outcome == Outcome.INCONCLUSIVE
    assert _rows(three[:1])[EVENT].outcome == Outcome.NOT_TESTED  # one replicate


def test_a_first_fa_layer_at_0_cannot_test_the_event():
    reps = [alignment(spike(0, 0.3), [0, 3], label="reverse_periodic") for _ in range(3)]
    rows = report.judge_events({"reverse_periodic": reps}, swa=None, swa_window=16, swa_share=1.0, n_boot=100)
    verdict = rows[0]["verdict"]
    assert verdict.outcome == Outcome.NOT_TESTED and "teacher's layer 0 is full attention" in verdict.reason
    assert verdict.estimate == pytest.approx(0.3 - 0.15)  # still measured: |0.3| vs layer 1's |-0.15|


def test_swa_comparison_and_its_binding_control():
    gdn = [alignment(spike(3, 0.2), [3, 5], noise=0.002, seed=i) for i in range(3)]
    swa = [
        alignment(
            spike(3, 0.05), [3, 5], label="standard_periodic+swa", kind="hybrid SWA", noise=0.002, seed=10 + i
        )
        for i in range(3)
    ]
    verdicts = _rows(gdn, swa)
    assert verdicts[VS_SWA].outcome == Outcome.REPRODUCED
    assert verdicts[VS_SWA].estimate == pytest.approx(0.15, abs=0.01)
    assert verdicts[SWA_EVENT].outcome == Outcome.CONTRADICTED  # the SWA student's spike is its largest event
    unbound = _rows(gdn, swa, share=0.0)  # the H200 run before issue 18: window 128 = probe length 128
    assert (
        unbound[VS_SWA].outcome == Outcome.NOT_TESTED
        and "0% of the compared states" in unbound[VS_SWA].reason
    )
    assert unbound[SWA_EVENT].outcome == Outcome.NOT_TESTED
    quiet = [
        alignment(spike(1, 0.3), [3, 5], label="standard_periodic+swa", kind="hybrid SWA", seed=i)
        for i in range(3)
    ]
    assert _rows(gdn, quiet)[SWA_EVENT].outcome == Outcome.REPRODUCED  # no event at its first FA layer
    assert _rows(gdn, swa[:2])[VS_SWA].reason.startswith("paired replicates failed")


def test_share_of_states_beyond_the_window_by_hand():
    # sides of 10 and 40 tokens, window 16: 0 + 24 of 50 states lie beyond it
    assert report.beyond_window([(10, 40)], 16) == pytest.approx(24 / 50)
    assert report.beyond_window([(10, 40), (30, 30)], 16) == pytest.approx((24 + 14 + 14) / 110)
    assert report.beyond_window([(128, 128)], 128) == 0.0
    assert report.swa_binds(16, 0.5).holds and not report.swa_binds(16, 0.49).holds


def test_compared_lengths_cut_both_sides_to_one_fraction():
    vocab = {"<s>": 0, "<unk>": 1, "a": 2, "b": 3}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", unk_token="<unk>")
    card = ModelCard(
        "toy",
        "test",
        "-",
        "Qwen3ForCausalLM",
        2,
        16,
        2,
        1,
        8,
        4,
        0,
        ["full_attention"] * 2,
        "prepend",
        0,
        False,
    )
    texts = {"eng": ["a " * 10, "a " * 4], "xx": ["b " * 40, "b " * 4]}  # the start token is not counted
    assert report.compared_lengths(tokenizer, card, texts, max_tokens=20) == [(5, 20), (4, 4)]


def test_every_preset_probes_at_least_twice_the_swa_window():
    for preset in ("seminar", "gpu", "paper"):
        window = chapter("layout_distillation").resolve(preset)["swa_window"]
        assert 2 * window <= chapter("first_fa").resolve(preset)["max_tokens"]
    assert chapter("first_fa").resolve("gpu")["max_tokens"] >= 256


def test_locality_and_detokenisation_rules():
    rows = report.judge_locality(
        {"standard_periodic": [-2.0, -1.5, -1.0], "sandwich": [1.0, 2.0, 1.5]}, n_boot=200
    )
    assert [r["verdict"].outcome for r in rows] == [Outcome.REPRODUCED, Outcome.CONTRADICTED]
    assert rows[0]["verdict"].estimate == pytest.approx(-1.5)
    assert report.judge_locality({"x": [-1.0]})[0]["verdict"].outcome == Outcome.NOT_TESTED
    detok = report.judge_detokenisation(
        [0.05, 0.04, 0.06], "reverse_periodic vs standard_periodic", n_boot=200
    )
    assert detok["verdict"].outcome == Outcome.REPRODUCED and not detok["paper_claim"]
    none = report.judge_detokenisation(None, "no GDN-at-0 student")
    assert none["verdict"].outcome == Outcome.NOT_TESTED and none["verdict"].estimate is None


def test_swa_no_event_is_a_contrast_with_the_gdn_event():
    """Fails before issue 47: the H200 pattern (the GDN student's largest event lies elsewhere, the SWA student
    has none at its first FA layer either) read as the SWA claim reproduced."""
    swa = [
        alignment(spike(1, 0.3), [3, 5], label="standard_periodic+swa", kind="hybrid SWA", seed=i)
        for i in range(3)
    ]
    no_event = [
        alignment(spike(3, 0.1, spike(0, 0.5)), [3, 5], seed=i) for i in range(3)
    ]  # layer 0 dominates
    verdict = _rows(no_event, swa)[SWA_EVENT]
    assert _rows(no_event, swa)[EVENT].outcome == Outcome.CONTRADICTED
    assert verdict.outcome == Outcome.NOT_TESTED
    assert verdict.reason == "GDN event at layer 3 established failed: standard_periodic: contradicted"
    assert verdict.estimate == pytest.approx(-0.3)  # still measured: |0| at layer 3 vs layer 1's |0.3|
    event = [alignment(spike(3, s), [3, 5], noise=0.002, seed=i) for i, s in enumerate((0.2, 0.22, 0.24))]
    assert _rows(event, swa)[SWA_EVENT].outcome == Outcome.REPRODUCED  # both sides shown
    swa_event = [
        alignment(spike(3, 0.2), [3, 5], label="standard_periodic+swa", kind="hybrid SWA", seed=i)
        for i in range(3)
    ]
    assert _rows(event, swa_event)[SWA_EVENT].outcome == Outcome.CONTRADICTED
    mixed = [swa[0], swa_event[1], swa[2]]
    assert _rows(event, mixed)[SWA_EVENT].outcome == Outcome.INCONCLUSIVE
    one = [alignment(spike(3, 0.2), [3, 5])]  # the GDN event itself not tested (one replicate)
    assert _rows(one, swa)[SWA_EVENT].outcome == Outcome.NOT_TESTED
    elsewhere = [
        alignment(spike(2, 0.2), [2, 5], seed=i) for i in range(3)
    ]  # no GDN student with FA first at 3
    reason = _rows(elsewhere, swa)[SWA_EVENT].reason
    assert "GDN event at layer 3 established failed: nothing to contrast with" in reason


@pytest.mark.parametrize(
    ("distances", "outcome"),
    [
        ([-9.2, -6.3, -13.9, -6.4], Outcome.REPRODUCED),  # the 16M standard-periodic pattern: all more local
        ([-22.3, -2.4, -6.0, 5.4], Outcome.INCONCLUSIVE),  # one replicate less local
        ([-9.2, -6.3, 0.0, -6.4], Outcome.INCONCLUSIVE),  # a tie with the teacher in one replicate
        ([4.0, 6.5, 3.1, 5.2], Outcome.CONTRADICTED),  # the FA layers attend further than the teacher's
    ],
)
def test_locality_rule_at_four_replicates_each_outcome_ties_included(distances, outcome):
    row = report.judge_locality({"standard_periodic": distances}, n_boot=300)[0]
    assert row["verdict"].outcome == outcome, row["verdict"].reason
    assert row["verdict"].replicate_values == pytest.approx(distances)


@pytest.mark.parametrize(
    ("margins", "outcome"),
    [
        ([0.014, 0.013, 0.014, 0.025], Outcome.REPRODUCED),
        ([-0.014, -0.013, -0.014, -0.025], Outcome.CONTRADICTED),  # the 16M pattern: FA at 0 gains less
        ([-0.014, 0.013, -0.004, 0.010], Outcome.INCONCLUSIVE),
        ([-0.014, -0.013, 0.0, -0.025], Outcome.INCONCLUSIVE),  # a tie in one replicate
    ],
)
def test_detokenisation_rule_at_four_replicates_each_outcome_ties_included(margins, outcome):
    row = report.judge_detokenisation(margins, "reverse_periodic vs standard_periodic", n_boot=300)
    assert row["verdict"].outcome == outcome, row["verdict"].reason
