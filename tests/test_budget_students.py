"""The SoftCKA and first-FA chapters on the layout chapter's largest-budget students (issue 49): which students are
found (never trained), how their rows are named, and the first-FA rules' inputs computed once for any set of
students (the chapter's own and the budget's)."""

from types import SimpleNamespace

import pandas as pd
import pytest
from test_softcka_report import _students, _teacher

from hybridlib.findings import chapter, students
from hybridlib.findings.first_fa import claims
from hybridlib.findings.softcka import report as softcka
from hybridlib.verdicts import Outcome, Rule, Tolerance, unqualified

LARGEST = 2**24  # the gpu preset's largest budget


def test_one_budget_has_no_largest_budget_students(monkeypatch):
    monkeypatch.setattr(
        students.layout_replicates, "train_budgets", lambda *a, **k: pytest.fail("looked for students")
    )
    found = students.budget_students(None, "seminar", ["standard_periodic"], True)
    tokens = chapter("layout_distillation").resolve("seminar")["budgets"][0]
    assert (found.tokens, found.models) == (None, {})
    assert (
        found.why
        == f"the layout chapter's seminar preset has one budget ({tokens:,} tokens): no budget curve"
    )


def fake_run(label: str, replicate: int) -> SimpleNamespace:
    layout, _, mixer = label.partition("+")
    return SimpleNamespace(
        label=label,
        key=f"{label}-{replicate}",
        settings={"mixer": mixer or "gdn", "fa_layers": [2, 6]},
        load_model=lambda device: pytest.fail("a found student is not loaded to be listed"),
    )


def test_largest_budget_students_are_found_never_trained(monkeypatch):
    """The chapter's layouts among the budget curve's arms and the SWA control (not sandwich, the capped or the
    lower-learning-rate arms), at the largest budget, looked up with train=False, replicate 0 first."""
    asked = []

    def train_budgets(params, budgets, *, labels, progress, train):
        asked.append((budgets, labels, train))
        return {budgets[0]: {label: [fake_run(label, r) for r in range(4)] for label in labels}}

    monkeypatch.setattr(students.layout_replicates, "train_budgets", train_budgets)
    teacher = SimpleNamespace(tokenizer="tok", card="card")
    layouts = chapter("first_fa").resolve("gpu")["layouts"]  # standard, reverse periodic, periodic_first_at_0
    found = students.budget_students(teacher, "gpu", layouts, True)
    labels = ["standard_periodic", "reverse_periodic", "standard_periodic+swa"]
    assert asked == [([LARGEST], labels, False)]
    assert found.tokens == LARGEST and list(found.models) == labels
    assert [m.identity for m in found.models["reverse_periodic"]] == [
        f"reverse_periodic-{r}" for r in range(4)
    ]
    assert found.models["standard_periodic+swa"][0].kind == "hybrid SWA"
    assert found.why == "3 students x 4 replicates at 16,777,216 tokens"
    assert students.budget_students(teacher, "gpu", layouts, False).models.keys() == set(labels[:2])


def test_missing_largest_budget_students_say_how_to_make_them(monkeypatch):
    def train_budgets(*a, **k):
        raise FileNotFoundError("student reverse_periodic (gdn, 16,777,216 tokens, ...) is not in the cache")

    monkeypatch.setattr(students.layout_replicates, "train_budgets", train_budgets)
    found = students.budget_students(SimpleNamespace(), "gpu", ["reverse_periodic"], True)
    assert (found.tokens, found.models) == (LARGEST, {})
    assert found.why.startswith("not here: student reverse_periodic (gdn, 16,777,216 tokens")
    assert f"python -m hybridlib.campaign --preset gpu --budgets {LARGEST}" in found.why


def test_rows_at_a_budget_carry_it_in_their_id_and_metric():
    rule = Rule("a claim", "a metric", "run", 1, Tolerance(0.5, 2.0, "why"), id="chapter.claim")
    verdict = rule.at("standard_periodic").judge_repeats([0.2, 0.25, 0.3])
    rows = students.at_budget(
        [{"metric": "the claim, standard_periodic", "verdict": verdict, "note": "n"}], LARGEST
    )
    assert rows[0]["verdict"].id == "chapter.claim.standard_periodic.16777216_tokens"
    assert rows[0]["metric"] == "the claim, standard_periodic at 16,777,216 tokens" and rows[0]["note"] == "n"
    assert rows[0]["verdict"].outcome == verdict.outcome == Outcome.DIRECTION_ONLY  # all above 0, below 0.5
    assert unqualified(rows[0]["verdict"].id) == "chapter.claim.standard_periodic"  # the chapter's own id
    assert unqualified("layout.r.reverse_periodic") == "layout.r.reverse_periodic"
    assert unqualified("a.16777216_tokens.b") == "a.16777216_tokens.b"  # a budget only at the end


def test_softcka_rows_mark_each_claims_primary_rule():
    """The largest budget is judged by each claim's primary rule only: the rows say which those are."""
    results = [
        _teacher(0.1, softcka.SEEN + softcka.UNSEEN),
        *_students([0.05, 0.04, 0.06], "standard_periodic"),
        *_students([0.05, 0.04, 0.06], "reverse_periodic"),
        *_students([0.1] * 3, "standard_periodic+swa", "hybrid SWA"),
    ]
    rows = softcka.paper_rows(results, window=16, probe_tokens=96)
    primary = [r["verdict"].id for r in rows if r["primary"]]
    assert primary == [
        "softcka.lower.standard_periodic.seen_in_distillation",
        "softcka.jumps.standard_periodic.seen_in_distillation",
        "softcka.jumps_vs_swa.standard_periodic.seen_in_distillation",
    ]
    assert len(rows) == 2 * 2 * 5  # 2 GDN students x 2 language groups x 5 rules


def probed(label: str, kind: str, fa_layers: tuple[int, ...]) -> SimpleNamespace:
    return SimpleNamespace(label=label, kind=kind, fa_layers=fa_layers)


def test_detokenisation_margins_pair_replicates_of_the_fa0_and_gdn0_students(monkeypatch):
    """Margin r = (within - across at layer 0) of the FA-at-0 student's replicate r minus the GDN-at-0 one's."""
    gains = {  # (label, replicate) -> (within, across) mixer gain at layer 0
        ("reverse_periodic", 0): (0.30, 0.10),
        ("reverse_periodic", 1): (0.25, 0.05),
        ("standard_periodic", 0): (0.10, 0.05),
        ("standard_periodic", 1): (0.20, 0.20),
    }

    def word_probe(m, params):
        within, across = gains[m.label, m.replicate]
        return pd.DataFrame(
            {"layer": [0, 0, 1], "task": ["within", "across", "within"], "mixer_gain": [within, across, 9.0]}
        )

    monkeypatch.setattr(claims, "word_probe", word_probe)

    def reps(label, kind, fa):
        return [SimpleNamespace(**vars(probed(label, kind, fa)), replicate=r) for r in (0, 1)]

    models = {
        "standard_periodic": reps("standard_periodic", "hybrid GDN", (2, 6)),
        "reverse_periodic": reps("reverse_periodic", "hybrid GDN", (0, 3)),
        "periodic_first_at_0": reps("periodic_first_at_0", "hybrid GDN", (0, 6)),
        "standard_periodic+swa": reps("standard_periodic+swa", "hybrid SWA", (2, 6)),
    }
    margins, why = claims.detok_margins(models, {})
    assert margins == pytest.approx([0.20 - 0.05, 0.20 - 0.0])
    assert why == "reverse_periodic (FA at layer 0) minus standard_periodic (GDN at layer 0)"
    assert claims.detok_margins({"standard_periodic": models["standard_periodic"]}, {})[0] is None


def test_locality_distances_average_each_replicates_fa_layers():
    table = pd.DataFrame(
        {
            "model": ["a", "a", "a", "a", "swa", "b"],
            "replicate": [0, 0, 1, 1, 0, 0],
            "distance": [10.0, 20.0, 5.0, 5.0, 1.0, 30.0],
            "teacher distance": [12.0, 30.0, 6.0, 8.0, 9.0, 20.0],
        }
    )
    assert claims.locality_distances(table, ["b", "a"]) == {
        "a": [-6.0, -2.0],
        "b": [10.0],
    }  # the table's order


def test_event_rules_read_later_replicates_only_where_the_first_fa_layer_follows_recurrent_ones(monkeypatch):
    monkeypatch.setattr(claims.alignment, "chapter_measure", lambda m, params: m)
    models = {
        "standard_periodic": [probed("standard_periodic", "hybrid GDN", (2, 6)) for _ in range(3)],
        "reverse_periodic": [probed("reverse_periodic", "hybrid GDN", (0, 3)) for _ in range(3)],
    }
    got = claims.event_students(models, {})
    assert [len(v) for v in got.values()] == [3, 1]


def test_softcka_budget_rows_judge_the_primary_rules_on_the_budget_students(monkeypatch):
    """Each budget student measured as the chapter measures its own, the teacher's measurement first; the primary
    rows of the same students judged by paper_rows, their ids and metrics carrying the budget; none without
    students."""
    teacher = _teacher(0.1, softcka.SEEN + softcka.UNSEEN)
    measured = {
        "standard_periodic": _students([0.05, 0.04, 0.06, 0.05], "standard_periodic"),
        "reverse_periodic": _students([0.03, 0.02, 0.04, 0.03], "reverse_periodic"),
        "standard_periodic+swa": _students([0.1] * 4, "standard_periodic+swa", "hybrid SWA"),
    }
    models = {label: [SimpleNamespace(label=label, r=r) for r in range(4)] for label in measured}
    asked = []

    def chapter_measure(m, params):
        asked.append((m.label, m.r))
        return measured[m.label][m.r]

    monkeypatch.setattr(softcka.alignment, "chapter_measure", chapter_measure)
    params = {"max_tokens": 96}
    budget = students.BudgetStudents(LARGEST, "3 students x 4 replicates", models)
    rows = softcka.budget_rows(teacher, budget, params, 16)
    assert asked == [(label, r) for label in measured for r in range(4)]
    direct = [
        r
        for r in softcka.paper_rows(
            [teacher, *(al for als in measured.values() for al in als)], window=16, probe_tokens=96
        )
        if r["primary"]
    ]
    assert [r["verdict"].id for r in rows] == [f"{r['verdict'].id}.16777216_tokens" for r in direct]
    assert [r["verdict"].estimate for r in rows] == [r["verdict"].estimate for r in direct]
    assert all(r["metric"].endswith(" at 16,777,216 tokens") for r in rows) and len(rows) == 3
    assert rows[0]["verdict"].n_replicates == 4
    assert softcka.budget_rows(teacher, students.BudgetStudents(LARGEST, "not here"), params, 16) == []


def test_first_fa_budget_rows_are_the_chapter_rules_at_the_budget(monkeypatch):
    rule = Rule("a claim", "a metric", "run", 1, Tolerance(0.5, 2.0, "why"), id="first_fa.event")
    verdict = rule.at("standard_periodic").judge_repeats([0.6, 0.7, 0.65, 0.8])
    seen = []

    def judge(teacher, models, params, *, swa_window, swa_share):
        seen.append((list(models), swa_window, swa_share))
        return [{"metric": "the event, standard_periodic", "verdict": verdict}]

    monkeypatch.setattr(claims, "judge", judge)
    budget = students.BudgetStudents(LARGEST, "found", {"standard_periodic": [None] * 4})
    rows = claims.budget_rows(None, budget, {}, swa_window=64, swa_share=0.9)
    assert seen == [(["standard_periodic"], 64, 0.9)]
    assert rows[0]["verdict"].id == "first_fa.event.standard_periodic.16777216_tokens"
    assert rows[0]["verdict"].outcome == Outcome.REPRODUCED  # all four inside [0.5, 2.0]
    assert (
        claims.budget_rows(None, students.BudgetStudents(None, "no curve"), {}, swa_window=64, swa_share=0.9)
        == []
    )
    assert len(seen) == 1  # nothing judged without students
