"""A fresh seminar run's numbers stay within the measured cross-CPU spread of the committed ones.

``make test`` executes the notebooks under nbval, whose canonical runs write ``seminar.json`` into the session's
temporary results folder (``$HYBRIDLIB_RESULTS_DIR``, tests/conftest.py); these tests run after the notebooks and
compare that file with the committed ``data/results/<chapter>/seminar.json`` at the tolerances of
``data/results/cpu_spread/seminar.json`` (tests/results_spread.py says how they were measured and what is
compared), and hold both files to what holds on any CPU: the ranges and identities of
``results_spread.violations``.

Numbers no test holds to their committed value: a trained number whose tolerance is at least its own size is not
compared (the check could not fail on a flipped sign or a zero). In these fields no committed number is held; the
fields marked * keep only a range or an identity (``results_spread.violations``), the others nothing:

- layout_distillation: curves/ben*, curves/delta, curves/eng*, curves/hin*, curves/kl*, curves/pes*, curves/rus*,
  curves/ukr*, perplexity/Arab*, perplexity/Beng*, perplexity/Cyrl*, perplexity/Deva*, perplexity/Hans*,
  perplexity/Jpan*, perplexity/Kore*, perplexity/Latn*, perplexity/median_pct*, replicates/delta,
  replicates/delta_vs_base, replicates/grad_norm_max*, runs/grad_norm_max*, speedup/final_kl*, spread/delta mean,
  spread/delta_vs_base mean, test/delta, test/delta_vs_base
- softcka: curves/softcka*, gaps/gap_difference*, gaps/hybrid_gap, gaps/parallel_difference, gaps/teacher_gap,
  summary/gap*, summary/jaggedness*, summary/parallel*, summary/shuffled*
- first_fa: detokenisation/acc_out*, detokenisation/layer_gain*, jumps/high*, jumps/jump, jumps/low*, jumps/teacher
  jump, locality/distance*, locality/local share*, locality/teacher distance*, locality/teacher local share*,
  replicates/jump, replicates/largest |jump| at layer, replicates/margin, swa_comparison/GDN jump,
  swa_comparison/SWA jump
- lolcats: per_layer/mse_swap*, per_layer/mse_transfer*, per_layer/transfer_loss*, per_layer/window_share_transfer*,
  rows/cloze*, rows/ppl*, teacher/cloze*

In other fields the small numbers are left out the same way (a curve's per-language KL beside its held CE, say).
"""

import json

import pytest
import results_spread as rs

from hybridlib.paths import REPO_ROOT
from hybridlib.results import canonical_root


def _committed(chapter):
    return REPO_ROOT / "data" / "results" / chapter / "seminar.json"


COMMITTED = {c: json.loads(_committed(c).read_text()) for c in rs.CHAPTERS}
SPREAD = json.loads(rs.SPREAD_FILE.read_text())


@pytest.mark.after_notebooks
@pytest.mark.parametrize("chapter", rs.CHAPTERS)
def test_fresh_results_are_within_the_measured_cpu_spread(chapter):
    path = canonical_root() / chapter / "seminar.json"
    assert path != _committed(chapter), "the session's results folder must not be the tracked data/results"
    if not path.is_file():
        pytest.skip(f"{chapter}'s notebook did not run in this session (nbval over notebooks/ runs it)")
    fresh = json.loads(path.read_text())
    measured = SPREAD["spread"][chapter]
    problems = rs.differences(COMMITTED[chapter], fresh, measured["numbers"], measured["unstable"])
    assert not problems, f"{len(problems)} beyond the measured CPU spread:\n" + "\n".join(problems[:40])
    broken = rs.violations(chapter, fresh)
    assert not broken, f"{len(broken)} ranges or identities broken:\n" + "\n".join(broken[:40])


@pytest.mark.parametrize("chapter", rs.CHAPTERS)
def test_committed_results_keep_the_ranges_and_identities(chapter):
    assert rs.violations(chapter, COMMITTED[chapter]) == []


def _documented_unheld():
    """The module doc's list of fields no committed number of which is held: chapter -> field names."""
    text = __doc__.split("others nothing:")[1].split("\n\nIn other fields")[0]
    entries = " ".join(line.strip() for line in text.strip().splitlines()).split("- ")[1:]
    return {
        chapter: sorted(name.strip().rstrip("*") for name in names.split(","))
        for chapter, names in (entry.split(": ", 1) for entry in entries)
    }


def test_the_fields_no_test_holds_are_the_documented_ones():
    measured = {c: rs.unheld(COMMITTED[c], SPREAD["spread"][c]["numbers"]) for c in rs.CHAPTERS}
    assert measured == _documented_unheld()


def test_spread_file_states_its_method_and_covers_every_trained_chapter():
    assert set(SPREAD["spread"]) == set(rs.CHAPTERS)
    assert SPREAD["factor"] == rs.FACTOR and SPREAD["floor"] == rs.FLOOR
    assert len(SPREAD["runs"]) >= 2 and "ATEN_CPU_CAPABILITY" in SPREAD["method"]
    for chapter in rs.CHAPTERS:  # every float field of the committed result was measured
        leaves = rs.leaves(COMMITTED[chapter])
        floats = {rs.field(p) for p, v in leaves if isinstance(v, float) and rs.compared(p, v)}
        assert floats <= set(SPREAD["spread"][chapter]["numbers"]), chapter


def test_spread_and_differences_on_hand_made_results():
    a = {
        "provenance": {"date_utc": "x"},
        "table": [{"ppl": 100.0, "n": 4, "lang": "eng", "lower": True}],
        "verdicts": {"chapter": "reproduced"},
        "wall_s": 3.0,
    }
    b = {
        "provenance": {"date_utc": "y"},
        "table": [{"ppl": 101.5, "n": 4, "lang": "eng", "lower": False}],
        "verdicts": {"chapter": "contradicted"},
        "wall_s": 9.0,
    }
    measured = rs.spread([a, b])
    assert measured == {"table/ppl": 1.5, "table/n": 0}  # timings, verdicts, booleans and strings left out
    assert rs.tolerance(measured, "table/ppl") == rs.FACTOR * 1.5 + rs.FLOOR
    assert rs.differences(a, b, measured) == []
    c = json.loads(json.dumps(b))
    c["table"][0].update(ppl=100.0 + rs.FACTOR * 1.5 + 0.01, n=5, lang="fra")
    c["extra"] = 1.0
    problems = rs.differences(a, c, measured)
    assert len(problems) == 4
    assert problems[0] == "extra: not in the committed result"
    moved_ppl = 100.0 + rs.FACTOR * 1.5 + 0.01
    assert any(p.startswith(f"table/0/ppl: {moved_ppl!r} vs committed 100.0") for p in problems)
    assert "table/0/n: 5 vs committed 4" in problems and "table/0/lang: 'fra' vs committed 'eng'" in problems
    assert rs.tolerance({"x/y": 0.5}, "x/unmeasured") == rs.FACTOR * 0.5 + rs.FLOOR  # the chapter's largest
    assert not rs.compared(("rows", 0, "verdict"), "reproduced") and not rs.compared(("x", "status"), "ok")
    assert rs.moved([a, b, c]) == ["table/lang"]  # text that differed between runs is not held exactly
    assert len(rs.differences(a, c, measured, unstable=rs.moved([a, c]))) == 3
    # a trained number within its own tolerance of zero is not compared: no difference could fail it
    small = {"table": [{"ppl": 0.5 * rs.tolerance(measured, "table/ppl")}]}
    assert rs.differences(small, {"table": [{"ppl": -small["table"][0]["ppl"]}]}, measured) == []
    assert rs.unheld(small, measured) == ["table/ppl"] and rs.unheld(a, measured) == []


def test_ranges_and_identities_fail_on_a_broken_result():
    summary = {"parallel": 0.3, "shuffled": 0.1, "gap": 0.2, "jaggedness": 0.01}
    ok = {"summary": [summary], "gaps": [], "curves": [{"softcka": 0.9}]}
    assert rs.violations("softcka", ok) == []
    bad = {**ok, "summary": [{**summary, "gap": 0.25}], "curves": [{"softcka": 1.2}]}
    assert rs.violations("softcka", bad) == [
        "curves/0/softcka: 1.2 outside [0.0, 1.0]",
        "summary/0/gap: 0.25 is not parallel - shuffled = 0.19999999999999998",
    ]
    layout = {
        "test": {"standard_periodic": {"R": 1.0, "delta_vs_base": 0.0}},
        "curves": {"a": [{"kl": -0.1}]},
    }
    assert rs.violations("layout_distillation", layout) == ["curves/a/0/kl: -0.1 outside [0.0, inf]"]
    assert rs.violations("lolcats", {"rows": [{"cloze": 0.5, "hits": [True, False, False]}]}) == [
        "rows/0/cloze: 0.5 is not the share of its hits"
    ]
    assert rs.violations("first_fa", {"detokenisation": [], "jumps": [{"low": 0.2, "high": 0.1}]}) == [
        "jumps/0: low 0.2 > high 0.1"
    ]


def test_merge_keeps_the_larger_spread_of_two_measurements():
    one = {"layout": {"numbers": {"a/x": 0.1, "a/y": 0.5}, "unstable": ["a/t"]}}
    two = {"layout": {"numbers": {"a/x": 0.3, "a/z": 0.2}, "unstable": ["a/u"]}}
    first = {"method": "AMD.", "runs": {"amd": {}}, "spread": {c: one["layout"] for c in rs.CHAPTERS}}
    second = {"method": "Intel.", "runs": {"intel": {}}, "spread": {c: two["layout"] for c in rs.CHAPTERS}}
    merged = rs.merge(first, second)
    for chapter in rs.CHAPTERS:
        assert merged["spread"][chapter] == {
            "numbers": {"a/x": 0.3, "a/y": 0.5, "a/z": 0.2},
            "unstable": ["a/t", "a/u"],
        }
    assert set(merged["runs"]) == {"amd", "intel"} and merged["method"].startswith("AMD. Then: Intel.")
