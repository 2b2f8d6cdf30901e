"""A machine's share of a GPU campaign: bad input is refused before any work, and every model of the chosen
replicates gets each chapter's measurements (detokenisation on replicate 0 only, the teacher with replicate 0)."""

from types import SimpleNamespace

import pytest

from hybridlib import campaign
from hybridlib.findings import chapter


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
    monkeypatch.setattr(campaign.alignment, "udhr_texts", lambda languages, articles: {"eng": ["a"]})
    monkeypatch.setattr(campaign.alignment, "chapter_measure", lambda m, p: calls.append(("cka", m.label)))
    monkeypatch.setattr(campaign.measures, "locality_ids", lambda m, texts, n: [[1, 2]])
    monkeypatch.setattr(
        campaign.measures,
        "locality",
        lambda m, ids, layers, window: calls.append(("loc", m.label, list(layers))),
    )
    monkeypatch.setattr(
        campaign.measures, "word_probe", lambda m, texts, **k: calls.append(("words", m.label))
    )
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
    assert words == [teacher, "reverse_periodic", "standard_periodic+swa"]  # replicate 0 only
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
