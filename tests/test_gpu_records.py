"""The H200 records committed under ``data/gpu_memo/<frozen commit>/`` (a GPU campaign's students, SoftCKA curves and
first-FA measurements) are found by this checkout: their keys hash the sources of the frozen commit
(``codes.json``, written by ``tools/offline_gpu/freeze.sh``), so an edit of those sources here would orphan them and
the chapters would train the students again; and the gpu preset's layout chapter asks for exactly these students."""

import json
import math
import tarfile
from pathlib import Path

import pytest

from hybridlib import carry
from hybridlib.campaign import record_codes
from hybridlib.findings import chapter
from hybridlib.findings.layout import replicates, report
from hybridlib.models import load
from hybridlib.models.identity import teacher_identity
from hybridlib.params import RECORDS_ONLY_ENV
from hybridlib.paths import REPO_ROOT, cache_dir
from hybridlib.recipes import replicate_seeds
from hybridlib.train.distill import DistillSettings, heldout_scores
from hybridlib.verdicts import Outcome

COMMITS = sorted(p for p in (REPO_ROOT / "data" / "gpu_memo").iterdir() if p.is_dir())
#: the layout chapter's parameters a student's settings hold as they are, and its learning rates (times the
#: learning-rate check's factor in that check's students)
SAME = ("teacher", "seq_len", "batch_size", "precision")
LRS = ("lr_recurrent", "lr_rest")


def run_members(tar: tarfile.TarFile) -> dict[str, tarfile.TarInfo]:
    """Student key (its folder's name) -> the member holding its ``run.json``, of one records archive."""
    return {
        Path(m.name).parts[1]: m
        for m in tar.getmembers()
        if len(Path(m.name).parts) == 3
        and Path(m.name).parts[0] == "students"
        and m.name.endswith("/run.json")
    }


def student_records(folder: Path) -> dict[str, dict]:
    """Student key (its folder's name) -> its ``run.json``, of every records archive in ``folder``."""
    out = {}
    for archive in sorted(folder.glob("records-*.tgz")):
        with tarfile.open(archive) as tar:
            out |= {key: json.load(tar.extractfile(m)) for key, m in run_members(tar).items()}
    return out


def test_records_are_committed_with_their_codes():
    assert COMMITS, "no data/gpu_memo/<commit>/"
    for folder in COMMITS:
        assert (folder / "codes.json").is_file() and list(folder.glob("records-*.tgz")), folder.name


@pytest.mark.parametrize("folder", COMMITS, ids=[p.name[:8] for p in COMMITS])
def test_the_records_sources_are_this_checkout_s(folder):
    frozen = json.loads((folder / "codes.json").read_text())
    changed = {k: (v, record_codes()[k]) for k, v in frozen.items() if record_codes()[k] != v}
    assert not changed, (
        f"sources keying the records of {folder.name[:8]} changed here (frozen, now): {changed}; "
        "hybridlib.campaign.record_codes names the modules"
    )


def test_every_student_is_committed_once():
    """A student trained again on a later machine (its earlier archive not installed there) is packed with that
    machine's replicate: ``carry.unpack`` keeps the first copy it meets, so a second copy would decide by archive
    order which run's record the pages read."""
    where: dict[str, list[str]] = {}
    for archive in sorted(REPO_ROOT.glob("data/gpu_memo/*/records-*.tgz")):
        with tarfile.open(archive) as tar:
            for key in run_members(tar):
                where.setdefault(key, []).append(f"{archive.parent.name[:8]}/{archive.name}")
    assert len(where) >= 109
    assert {k: v for k, v in where.items() if len(v) > 1} == {}


@pytest.mark.parametrize("folder", COMMITS, ids=[p.name[:8] for p in COMMITS])
def test_every_student_is_keyed_as_the_gpu_preset_asks_for_it(folder):
    records = student_records(folder)
    assert records
    params = chapter("layout_distillation").resolve("gpu")
    seeds = replicate_seeds(params["data_seed"], max(params["seeds"], params["budget_seeds"]))
    for key, record in records.items():
        settings = record["settings"]
        assert record["key"] == key == DistillSettings(**settings).key()
        asked = {"teacher": settings["teacher_name"]} | settings
        factor = settings["lr_rest"] / params["lr_rest"]  # 1, or the learning-rate check's on both rates
        assert factor == pytest.approx(1.0, rel=1e-12) or factor == pytest.approx(
            params["lr_check_factor"]
        ), key
        assert {k: asked[k] for k in SAME} == {k: params[k] for k in SAME}, key
        assert [settings[lr] / factor for lr in LRS] == pytest.approx(
            [params[lr] for lr in LRS], rel=1e-12
        ), key
        assert settings["train_tokens"] in {params["train_tokens"], *params["budgets"]}, key
        assert {"data_seed": settings["data_seed"], "init_seed": settings["init_seed"]} in seeds, key


@pytest.mark.slow
@pytest.mark.parametrize("folder", COMMITS, ids=[p.name[:8] for p in COMMITS])
def test_the_teacher_converted_here_is_the_records_teacher(folder):
    """The GGUF teacher converted on this machine has the identity the GPU machine's conversion gave its students
    (a student's key holds it): conversion changes would orphan the records as source changes would."""
    teacher = chapter("layout_distillation").resolve("gpu")["teacher"]
    identities = {r["settings"]["teacher_identity"] for r in student_records(folder).values()}
    assert identities == {teacher_identity(load(teacher)[0])}


def independent_r(scores: list[dict], base: list[dict]) -> float:
    """R from two students' raw test-document scores: exp of the mean over languages of log(token-weighted KL of
    the arm / of the baseline), documents matched by language and id."""

    def sums(rows: list[dict]) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for row in rows:
            out.setdefault(row["lang"], {})[row["doc_id"]] = row["kl"] * row["tokens"]
        return out

    arm, ref = sums(scores), sums(base)
    logs = [math.log(sum(arm[lang].values()) / sum(ref[lang][d] for d in arm[lang])) for lang in ref]
    return math.exp(sum(logs) / len(logs))


@pytest.mark.slow
def test_the_gpu_layout_rules_judge_the_committed_records_on_a_cpu(tmp_path, monkeypatch):
    """Records only (no GPU, nothing trained): the gpu preset's layout students of replicate 0 and the budget
    students (1M and 4M: 4 replicates; 16M: replicates 0-3 of standard and reverse periodic, sandwich and the SWA
    control, of the learning-rate check replicates 0-3 of its baseline and of reverse periodic at its factor x both
    learning rates, replicates 0-3 of the repetition control at the smallest budget's text) and the layout chapter's
    replicates 0-9 of standard and reverse periodic, sandwich and the SWA control, 0-4 of interleaved sandwich and
    endpoint spread and 0-3 of periodic_first_at_0 are found in a cache holding only the committed records, with the
    devices and training minutes they recorded; the chapter's R of reverse periodic equals R computed from the raw
    scores, one replicate leaves it not tested; a replicate not carried stops with its name."""
    models = cache_dir("models")  # the teacher as converted here (test above), not converted again
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path))
    monkeypatch.setenv(RECORDS_ONLY_ENV, "1")
    (tmp_path / "models").symlink_to(models)
    for folder in COMMITS:  # every campaign's records, as a cache that installs them all holds them
        for archive in sorted(folder.glob("records-*.tgz")):
            carry.unpack(archive)
    records = {k: v for folder in COMMITS for k, v in student_records(folder).items()}
    params = chapter("layout_distillation").resolve(
        "gpu", {"seeds": 1, "swa_control": False, "lr_check_factor": 0.0, "other_teachers": []}
    )
    runs = replicates.train({**params, "layouts": ["standard_periodic", "reverse_periodic"]})
    scores = {
        label: [heldout_scores(r, params["test_docs_per_language"]) for r in reps]
        for label, reps in runs.items()
    }
    row = next(
        r for r in report.judge(runs, scores, n_boot=50) if r["verdict"].id == "layout.r.reverse_periodic"
    )
    raw = {
        label: json.loads((Path(reps[0].path) / "test-16.json").read_text()) for label, reps in runs.items()
    }
    assert row["verdict"].estimate == pytest.approx(
        independent_r(raw["reverse_periodic"], raw["standard_periodic"]), rel=1e-12
    )
    assert row["verdict"].outcome == Outcome.NOT_TESTED and row["verdict"].n_replicates == 1
    budget = replicates.train_budgets(params | {"budget_seeds": 4}, [2**20], progress=False)[2**20]
    assert {label: len(reps) for label, reps in budget.items()} == dict.fromkeys(
        ["standard_periodic", "reverse_periodic", "sandwich"], 4
    )
    at_4m = replicates.train_budgets(params | {"budget_seeds": 4}, [2**22], progress=False)[2**22]
    assert {label: [r.tokens_trained for r in reps] for label, reps in at_4m.items()} == dict.fromkeys(
        ["standard_periodic", "reverse_periodic", "sandwich"], [2**22] * 4
    )
    at_16m = replicates.train_budgets(  # the arms with all 4 replicates
        params | {"budget_seeds": 4, "swa_control": True},
        [2**24],
        labels=["standard_periodic", "reverse_periodic", "sandwich", "standard_periodic+swa"],
        progress=False,
    )[2**24]
    assert {label: [r.tokens_trained for r in reps] for label, reps in at_16m.items()} == {
        "standard_periodic": [2**24] * 4,
        "reverse_periodic": [2**24] * 4,
        "sandwich": [2**24] * 4,
        "standard_periodic+swa": [2**24] * 4,
    }
    factor = chapter("layout_distillation").resolve("gpu")["lr_check_factor"]
    low_lr = {  # the learning-rate check: replicates 0-3 of the baseline's and of the reverse layout's
        label: replicates.train_budgets(
            params | {"budget_seeds": 4, "lr_check_factor": factor},
            [2**24],
            list(range(n)),
            labels=[label],
            progress=False,
        )[2**24][label]
        for label, n in (("standard_periodic+low_lr", 4), ("reverse_periodic+low_lr", 4))
    }
    capped = replicates.train_budgets(  # the repetition control: all 4 replicates
        params | {"budget_seeds": 4},
        [2**24],
        [0, 1, 2, 3],
        labels=["standard_periodic+capped"],
        progress=False,
    )[2**24]
    assert sorted(low_lr) == ["reverse_periodic+low_lr", "standard_periodic+low_lr"]
    cap = replicates.budget_text_cap(params)
    checks = [(label, i, run, factor, None) for label, reps in low_lr.items() for i, run in enumerate(reps)]
    checks += [
        ("standard_periodic+capped", i, run, 1.0, cap)
        for i, run in enumerate(capped["standard_periodic+capped"])
    ]
    for label, i, run, scale, text_cap in checks:
        settings = records[Path(run.path).name]["settings"]
        base = records[Path(at_16m[label.split("+")[0]][i].path).name]["settings"]
        assert run.tokens_trained == 2**24 and settings["data_seed"] == base["data_seed"], (label, i)
        assert settings["text_cap"] == text_cap and base["text_cap"] is None, (label, i)
        for lr in LRS:
            assert settings[lr] == pytest.approx(scale * base[lr], rel=1e-12), (label, i, lr)
    assert [len(low_lr[k]) for k in sorted(low_lr)] == [4, 4] and len(capped["standard_periodic+capped"]) == 4
    at_16m |= capped | low_lr
    cost = report.budget_cost({2**20: budget, 2**22: at_4m, 2**24: at_16m})
    for tokens, runs_at, n, devices in (
        (2**20, budget, 12, "NVIDIA H200"),
        (2**22, at_4m, 12, "NVIDIA H100 80GB HBM3, NVIDIA H200"),  # replicates 1's sandwich, 2 and 3: an H100
        (2**24, at_16m, 28, "NVIDIA H100 80GB HBM3, NVIDIA H200"),  # replicate 2: an H200
    ):
        keys = [Path(r.path).name for reps in runs_at.values() for r in reps]
        assert cost.loc[tokens, "students"] == n and cost.loc[tokens, "devices"] == devices
        assert cost.loc[tokens, "training_minutes"] == pytest.approx(
            sum(records[k]["wall_s"] for k in keys) / 60, rel=1e-12
        )
    three = ["standard_periodic", "reverse_periodic", "sandwich"]
    ten = replicates.train(params | {"seeds": 10, "layouts": three, "swa_control": True})
    assert {
        label: [(r.tokens_trained, records[Path(r.path).name]["settings"]["data_seed"]) for r in reps]
        for label, reps in ten.items()
    } == dict.fromkeys([*three, "standard_periodic+swa"], [(2**20, seed) for seed in range(10)])
    others = {"interleaved_sandwich": 5, "endpoint_spread": 5, "periodic_first_at_0": 4}  # replicates found
    for label, n in others.items():
        found = replicates.train(params | {"seeds": 10, "layouts": [label]}, list(range(n)))[label]
        assert [records[Path(r.path).name]["settings"]["data_seed"] for r in found] == list(range(n)), label
    with pytest.raises(
        FileNotFoundError, match=r"student periodic_first_at_0 \(gdn, 1,048,576 tokens, data_seed=4"
    ):
        replicates.train(params | {"seeds": 10, "layouts": ["periodic_first_at_0"]}, [4])
