"""A machine's share of a GPU campaign: bad input is refused before any work, and every model of the chosen
replicates gets each chapter's measurements (the teacher with replicate 0; the detokenisation probe on replicate 0
and on every replicate of the two students the first-FA chapter's detokenisation rule compares)."""

import os
import tarfile
from types import SimpleNamespace

import pytest

from hybridlib import campaign
from hybridlib.findings import chapter, students
from hybridlib.findings.first_fa import report


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--arms", "nope", "--replicates", "0"], "--arms ['nope'] are not arms"),
        (
            ["--arms", "sandwich", "--replicates", "0", "10"],
            "--replicates [10]: the gpu preset has seeds 0..9",
        ),
    ],
)
def test_bad_arms_or_replicates_are_refused_before_any_work(argv, named, capsys, monkeypatch):
    monkeypatch.setattr(campaign, "train", lambda *a: pytest.fail("trained before checking"))
    with pytest.raises(SystemExit):
        campaign.main(["--preset", "gpu", *argv])
    assert named in capsys.readouterr().err


def stub_measures(monkeypatch, calls: list) -> None:
    """Each chapter's measurement functions recording their calls: ("cka", label, identity), ("ids", label),
    ("loc", label, layers), ("words", label)."""
    monkeypatch.setattr(campaign.alignment, "udhr_texts", lambda languages, articles: {"eng": ["a"]})
    monkeypatch.setattr(
        campaign.alignment,
        "chapter_measure",
        lambda m, p: calls.append(("cka", m.label, getattr(m, "identity", None))),
    )
    monkeypatch.setattr(campaign.measures, "locality_ids", lambda m, texts, n: calls.append(("ids", m.label)))
    monkeypatch.setattr(
        campaign.measures,
        "locality",
        lambda m, ids, layers, window: calls.append(("loc", m.label, list(layers))),
    )
    monkeypatch.setattr(
        campaign.measures, "word_probe", lambda m, texts, **k: calls.append(("words", m.label))
    )


def test_every_chosen_model_gets_each_chapters_measurements(monkeypatch):
    def model(label, kind, n_layers=30):
        fa = tuple(range(n_layers)) if kind == "full attention" else (2, 6)
        return SimpleNamespace(
            label=label, kind=kind, fa_layers=fa, n_layers=n_layers, tokenizer=None, card=None
        )

    def load_models(teacher, layouts, *, preset, swa_control, device):
        out = [model(teacher, "full attention")] + [model(n, "hybrid GDN") for n in layouts]
        return out + ([model("standard_periodic+swa", "hybrid SWA")] if swa_control else [])

    asked, calls = [], []
    monkeypatch.setattr(campaign.students, "load_models", load_models)

    def load_replicates(teacher, probed, *, preset, device, replicates):
        asked.append(list(replicates))
        return {m.label: [model(m.label, m.kind) for r in replicates if r > 0] for m in probed[1:]}

    monkeypatch.setattr(campaign.students, "load_replicates", load_replicates)
    stub_measures(monkeypatch, calls)
    done = campaign.measure("gpu", ["reverse_periodic", "standard_periodic+swa"], [0, 3], "cpu")
    teacher = chapter("first_fa").resolve("gpu")["teacher"]
    assert asked == [[0, 3], [0, 3]]
    assert done[:3] == [
        f"softcka:{teacher}/0",
        "softcka:reverse_periodic/0",
        "softcka:standard_periodic+swa/0",
    ]
    assert "first_fa:reverse_periodic/3" in done and len(done) == 2 * 5
    assert ("loc", teacher, list(range(30))) in calls and ("loc", "reverse_periodic", [2, 6]) in calls
    words = [c[1] for c in calls if c[0] == "words"]
    # every model at replicate 0; later replicates of the detokenisation rule's students (reverse periodic: FA at 0)
    assert words == [teacher, "reverse_periodic", "standard_periodic+swa", "reverse_periodic"]
    assert campaign.measure("gpu", ["reverse_periodic"], [4], "cpu") == [
        "softcka:reverse_periodic/4",
        "first_fa:reverse_periodic/4",
    ]


def test_arms_are_finished_one_at_a_time_and_packed_after_each(monkeypatch, tmp_path):
    """Each arm is trained, scored and measured before the next starts, and with --pack the archive is rewritten
    after each arm, so it never holds a student without its measurements; --pack needs --newer."""
    events = []
    monkeypatch.setattr(campaign, "train", lambda preset, arms, reps: events.append(("train", *arms)) or 1)
    monkeypatch.setattr(
        campaign, "measure", lambda preset, arms, reps, device: events.append(("measure", *arms)) or ["m"]
    )
    monkeypatch.setattr(campaign.carry, "pack", lambda archive, newer: events.append(("pack", archive.name)))
    monkeypatch.setattr(campaign.carry, "records", lambda root, newer: ["students/k/run.json"])  # new records
    mark = tmp_path / "mark"
    mark.touch()
    argv = ["--preset", "gpu", "--arms", "sandwich", "reverse_periodic", "--replicates", "2"]
    campaign.main([*argv, "--pack", str(tmp_path / "r2.tgz"), "--newer", str(mark)])
    assert events == [
        ("train", "sandwich"),
        ("measure", "sandwich"),
        ("pack", "r2.tgz"),
        ("train", "reverse_periodic"),
        ("measure", "reverse_periodic"),
        ("pack", "r2.tgz"),
    ]
    events.clear()
    campaign.main(argv)
    assert [e[0] for e in events] == ["train", "measure", "train", "measure"]  # no --pack: nothing packed


def test_a_share_of_later_replicates_trains_and_scores_replicate_0_too(monkeypatch):
    """Measuring replicate 2 loads replicate 0 beside it (the chapters do): the share trains and scores replicate 0
    with it (found in the records: nothing done), so a replicate 0 it had to train is never packed without its test
    scores; only the replicates asked are measured."""
    asked, train = {}, campaign.train
    monkeypatch.setattr(
        campaign, "train", lambda preset, arms, reps: asked.setdefault("train", list(reps)) and 2
    )
    monkeypatch.setattr(
        campaign, "measure", lambda preset, arms, reps, device: asked.setdefault("measure", reps)
    )
    campaign.main(["--preset", "gpu", "--arms", "sandwich", "--replicates", "2"])
    assert asked == {"train": [0, 2], "measure": [2]}
    scored = []
    runs = {"sandwich": [SimpleNamespace(r=0), SimpleNamespace(r=2)]}
    monkeypatch.setattr(campaign.layout_replicates, "train", lambda params, reps, labels: runs)
    monkeypatch.setattr(campaign.distill, "heldout_scores", lambda run, n: scored.append(run.r))
    assert train("gpu", ["sandwich"], [0, 2]) == 2 and scored == [0, 2]


def test_arms_found_in_carried_records_pack_nothing_and_the_share_goes_on(monkeypatch, tmp_path):
    """The records of an arm found in carried ones are older than the share's mark: nothing is packed for it (no
    archive, no error), and the next arm's new records are packed alone."""
    cache = tmp_path / "cache"
    carried = cache / "students" / "old" / "run.json"
    carried.parent.mkdir(parents=True)
    carried.write_text("{}")
    mark = tmp_path / "mark"
    mark.touch()
    os.utime(carried, (mark.stat().st_mtime - 60,) * 2)  # installed before the share started
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(cache))

    def train(preset, arms, reps):
        if arms == ["reverse_periodic"]:  # trained here: a record newer than the mark
            new = cache / "students" / "new" / "run.json"
            new.parent.mkdir(parents=True)
            new.write_text("{}")
            os.utime(new, (mark.stat().st_mtime + 60,) * 2)
        return 1

    monkeypatch.setattr(campaign, "train", train)
    monkeypatch.setattr(campaign, "measure", lambda preset, arms, reps, device: [])
    archive = tmp_path / "r0.tgz"
    argv = ["--preset", "gpu", "--arms", "sandwich", "--replicates", "0", "--pack", str(archive)]
    campaign.main([*argv, "--newer", str(mark)])
    assert not archive.exists()
    campaign.main([*argv[:3], "sandwich", "reverse_periodic", *argv[4:], "--newer", str(mark)])
    with tarfile.open(archive) as tar:
        assert tar.getnames() == ["students/new/run.json"]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--pack", "r.tgz"], "--pack and --newer go together"),
        (["--pack", "r.tgz", "--newer", "/no/mark"], "no such file"),
    ],
)
def test_pack_without_its_mark_is_refused_before_any_work(extra, named, capsys, monkeypatch):
    monkeypatch.setattr(campaign, "train", lambda *a: pytest.fail("trained before checking"))
    with pytest.raises(SystemExit):
        campaign.main(["--preset", "gpu", "--arms", "sandwich", "--replicates", "0", *extra])
    assert named in capsys.readouterr().err


BUDGETS = chapter("layout_distillation").resolve("gpu")["budgets"]  # 1M, 4M, 16M tokens


def test_budget_mode_trains_and_scores_each_arm_of_each_budget_in_order_and_packs_after_each(
    monkeypatch, tmp_path, capsys
):
    """With --budgets, each budget (smallest first) trains and scores its arms one at a time, the largest budget's
    arms measured right after (:func:`campaign.measure_runs` picks what the chapters probe), and the archive is
    rewritten after each arm."""
    events = []

    def distill_layout(teacher, name, *, mixer, train_tokens, text_cap=None, data_seed, init_seed, **k):
        events.append(("train", train_tokens, name, mixer, text_cap, data_seed))
        return f"{name}/{mixer}@{train_tokens}"

    monkeypatch.setattr(campaign.layout_replicates, "distill_layout", distill_layout)
    monkeypatch.setattr(campaign.distill, "heldout_scores", lambda run, docs: events.append(("score", run)))
    monkeypatch.setattr(campaign.carry, "pack", lambda archive, newer: events.append(("pack", archive.name)))
    monkeypatch.setattr(campaign.carry, "records", lambda root, newer: ["students/k/run.json"])  # new records
    monkeypatch.setattr(
        campaign, "measure", lambda *a: pytest.fail("budget students are measured by measure_runs")
    )
    monkeypatch.setattr(
        campaign,
        "measure_runs",
        lambda preset, runs, reps, device: events.append(("measure", *runs, *runs.values(), reps)) or ["m"],
    )
    mark = tmp_path / "mark"
    mark.touch()
    small, large = BUDGETS[1], BUDGETS[2]
    argv = ["--preset", "gpu", "--budgets", str(large), str(small), "--replicates", "1"]
    campaign.main([*argv, "--pack", str(tmp_path / "b.tgz"), "--newer", str(mark)])

    def arm(budget, name, mixer="gdn", cap=None, label=None):
        run = f"{name}/{mixer}@{budget}"
        measured = [("measure", label, [run], [1])] if label else []
        return [("train", budget, name, mixer, cap, 1), ("score", run), *measured, ("pack", "b.tgz")]

    assert events == [
        *arm(small, "standard_periodic"),
        *arm(small, "reverse_periodic"),
        *arm(small, "sandwich"),
        *arm(large, "standard_periodic", label="standard_periodic"),  # the largest budget: measured
        *arm(large, "reverse_periodic", label="reverse_periodic"),
        *arm(large, "sandwich", label="sandwich"),
        *arm(
            large, "standard_periodic", "swa", label="standard_periodic+swa"
        ),  # the SWA control, largest only
        # the repetition control, on the smallest budget's text (measure_runs leaves it out)
        *arm(large, "standard_periodic", cap=BUDGETS[0], label="standard_periodic+capped"),
        # the learning-rate check (lr_check_factor x the peak learning rates)
        *arm(large, "standard_periodic", label="standard_periodic+low_lr"),
        *arm(large, "reverse_periodic", label="reverse_periodic+low_lr"),
    ]
    done = [line.split(": ")[1] for line in capsys.readouterr().out.splitlines()]
    assert done == [
        f"standard_periodic@{small}",
        f"reverse_periodic@{small}",
        f"sandwich@{small}",
        f"standard_periodic@{large}",
        f"reverse_periodic@{large}",
        f"sandwich@{large}",
        f"standard_periodic+swa@{large}",
        f"standard_periodic+capped@{large}",
        f"standard_periodic+low_lr@{large}",
        f"reverse_periodic+low_lr@{large}",
    ]
    events.clear()
    campaign.main(
        ["--preset", "gpu", "--budgets", str(BUDGETS[0]), str(large), "--replicates", "0", "2"]
        + ["--arms", "standard_periodic+swa", "sandwich"]
    )
    # --arms picks arms (each at the budgets that have it) in each budget's order; no --pack: nothing packed
    trained = [(e[1], e[2], e[3], e[5]) for e in events if e[0] == "train"]
    assert trained == [
        (BUDGETS[0], "sandwich", "gdn", 0),
        (BUDGETS[0], "sandwich", "gdn", 2),
        (large, "sandwich", "gdn", 0),
        (large, "sandwich", "gdn", 2),
        (large, "standard_periodic", "swa", 0),
        (large, "standard_periodic", "swa", 2),
    ]
    assert not [e for e in events if e[0] == "pack"]


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (
            ["--budgets", "1000", "--replicates", "0"],
            f"--budgets [1000] are not budgets of the gpu preset; allowed: {', '.join(map(str, BUDGETS))}",
        ),
        (
            ["--budgets", str(BUDGETS[0]), "--arms", "standard_periodic+swa", "--replicates", "0"],
            "--arms ['standard_periodic+swa'] are not arms of the gpu preset's budget curve at [1048576]; "
            "allowed: reverse_periodic, sandwich, standard_periodic",
        ),
        (
            ["--budgets", str(BUDGETS[-1]), "--replicates", "0", "4"],
            "--replicates [4]: the gpu preset has budget_seeds 0..3",
        ),
        (["--replicates", "0"], "the following arguments are required: --arms (or --budgets)"),
    ],
)
def test_bad_budgets_arms_or_replicates_are_refused_before_any_work(argv, named, capsys, monkeypatch):
    monkeypatch.setattr(campaign, "train", lambda *a: pytest.fail("trained before checking"))
    monkeypatch.setattr(campaign, "train_budget", lambda *a: pytest.fail("trained before checking"))
    with pytest.raises(SystemExit):
        campaign.main(["--preset", "gpu", *argv])
    assert named in capsys.readouterr().err


def test_measure_runs_measures_what_the_chapters_probe_of_the_largest_budget(monkeypatch):
    """Of the largest budget's arms, the chapters' layouts and the SWA control get each chapter's measurements
    (SoftCKA; locality; the detokenisation probe on replicate 0 and on the rule's pair), the capped and
    lower-learning-rate arms none; each student is probed under its own run's key."""

    def run(layout, mixer="gdn", replicate=0, **settings):
        return SimpleNamespace(
            layout_name=layout,
            label=layout if mixer == "gdn" else f"{layout}+{mixer}",
            key=f"{layout}-{mixer}-{replicate}-{sorted(settings)}",
            settings={"mixer": mixer, "fa_layers": [2, 6], **settings},
            load_model=lambda device: pytest.fail("a measurement in the records needs no weights"),
        )

    teacher = SimpleNamespace(
        label="teacher", kind="full attention", tokenizer="tok", card="card", n_layers=30
    )
    monkeypatch.setattr(campaign.students, "teacher_probed", lambda name, device: teacher)
    calls = []
    stub_measures(monkeypatch, calls)
    runs = {
        "reverse_periodic": [run("reverse_periodic", replicate=r) for r in (0, 2)],
        "standard_periodic+swa": [run("standard_periodic", "swa", r) for r in (0, 2)],
        "standard_periodic+capped": [run("standard_periodic", replicate=r, text_cap=1) for r in (0, 2)],
        "reverse_periodic+low_lr": [run("reverse_periodic", replicate=r, lr=0.3) for r in (0, 2)],
    }
    done = campaign.measure_runs("gpu", runs, [0, 2], "cpu")
    expected = [f"{m}/{r}" for m in ("reverse_periodic", "standard_periodic+swa") for r in (0, 2)]
    assert done == [f"softcka:{e}" for e in expected] + [f"first_fa:{e}" for e in expected]
    assert [c[2] for c in calls if c[0] == "cka"][:4] == [
        r.key for reps in list(runs.values())[:2] for r in reps
    ]
    assert ("ids", "teacher") in calls and ("loc", "standard_periodic+swa", [2, 6]) in calls
    assert [c[1] for c in calls if c[0] == "words"] == [
        "reverse_periodic",
        "reverse_periodic",
        "standard_periodic+swa",
    ]  # replicate 0 of each, and replicate 2 of the detokenisation rule's FA-at-0 student
    assert (
        campaign.measure_runs(
            "gpu", {"standard_periodic+capped": runs["standard_periodic+capped"]}, [0], "cpu"
        )
        == []
    )


def test_every_detokenisation_probe_the_chapter_reads_is_measured(monkeypatch):
    """The first-FA chapter's detokenisation rule reads the probe of every replicate of its FA-at-0 and GDN-at-0
    students (reverse and standard periodic of the gpu preset's layouts): the campaign measures exactly those at
    replicates after 0, so a chapter run from the records never needs a student's weights."""

    def model(label, kind):
        fa = students.fa_layers(p["teacher"], [label.removesuffix("+swa")], "gpu")[label.removesuffix("+swa")]
        return SimpleNamespace(label=label, kind=kind, fa_layers=fa, n_layers=30, tokenizer=None, card=None)

    p = chapter("first_fa").resolve("gpu")
    arms = [*p["layouts"], "standard_periodic+swa"]
    kinds = {a: "hybrid SWA" if a.endswith("+swa") else "hybrid GDN" for a in arms}
    calls = []
    stub_measures(monkeypatch, calls)
    models = [(model(a, kinds[a]), r) for r in (0, 1, 2) for a in arms]
    teacher = SimpleNamespace(label="teacher", kind="full attention", fa_layers=tuple(range(30)), n_layers=30)
    campaign._measure("first_fa", p, teacher, models, "gpu")
    words = [c[1] for c in calls if c[0] == "words"]
    fa0, gdn0 = report.detokenisation_pair(
        {a: students.fa_layers(p["teacher"], [a], "gpu")[a] for a in p["layouts"]}
    )
    assert (fa0, gdn0) == ("reverse_periodic", "standard_periodic")
    assert sorted(words) == sorted([*arms, fa0, gdn0, fa0, gdn0])  # replicate 0 of all, 1 and 2 of the pair
