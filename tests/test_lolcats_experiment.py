"""LoLCATs experiment driver on the tiny teacher: the arms one replicate converts, a replicate run in a
spawned process giving the same numbers as in this process, and a killed replicate resuming at its first arm
not yet done."""

from pathlib import Path

import pytest

from hybridlib.findings.lolcats import experiment
from hybridlib.findings.lolcats.ablation import converted
from hybridlib.findings.lolcats.spec import SPEC
from hybridlib.findings.lolcats.throughput import generation_throughput
from hybridlib.models import load
from hybridlib.paths import cache_dir
from hybridlib.train import PackedBatches

P = SPEC.resolve(
    "seminar",
    {
        "feature_maps": ["hedgehog"],
        "transfer_steps": 2,
        "lora_steps": 1,
        "window": 8,
        "window_sweep": [4],
        "transfer_sweep": [1],
        "eval_sequences": 1,
        "cloze_items": 4,
        "passkey_per_cell": 1,
        "lora_lr_sweep": [1e-4],
    },
)
FIELDS = ("lora_lr", "window", "terraced", "stage", "transfer_steps", "lora_steps")


def _fresh_memo(monkeypatch, root: Path) -> None:
    """Point ``$HYBRIDLIB_CACHE`` at ``root``: the real cache's teacher, corpora and tokenizers (links), an
    empty memo. Spawned processes inherit the variable."""
    real = cache_dir()
    root.mkdir()
    for d in real.iterdir():
        if d.name != "memo":
            (root / d.name).symlink_to(d)
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(root))


@pytest.mark.slow
def test_one_replicate_converts_every_arm_and_a_spawned_process_computes_the_same_numbers(
    monkeypatch, tmp_path
):
    experiment.data("tiny-teacher", P)  # the teacher and its data in the real cache, before the links
    _fresh_memo(monkeypatch, tmp_path / "spawned")
    spawned, _ = experiment.replicates(P, [("tiny-teacher", 0), ("tiny-teacher", 1)], ["cpu"], parallel=2)
    _fresh_memo(monkeypatch, tmp_path / "here")
    here = experiment.replicate(P, "tiny-teacher", 0, "cpu")
    stages = [("swap", 0, 0), ("transfer", 2, 0), ("lora", 0, 3), ("transfer+lora", 2, 1)]
    expected = [
        (1e-3, w, w > 0, *st) for w in (0, 8) for st in stages
    ]  # Table 2 and Table 5 (terraced window)
    expected += [(1e-4, 0, False, *st) for st in stages]  # the LoRA learning-rate sweep
    expected += [
        (1e-3, 4, False, "transfer+lora", 2, 1),
        (1e-3, 8, False, "transfer+lora", 2, 1),  # Table 18
        (1e-3, 8, True, "transfer+lora", 1, 1),
    ]  # Table 23
    assert sorted(tuple(r[k] for k in FIELDS) for r in here["rows"]) == sorted(expected)
    assert all(r["model"] == "tiny-teacher" and r["seed"] == 0 for r in here["rows"])
    assert set(here["passkey_hits"]) == {
        "teacher (softmax)",
        "converted with corpus text",
        "converted with passkey data",
    }
    assert all(h is not None for h in here["passkey_hits"].values())
    assert len(here["per_layer"]) == 2 and len(here["per_layer"][0]["mse_transfer"]) == 8  # 8 layers
    assert (
        len(here["arms"]) == 2 + 1 + 2 + 1 + 1
    )  # ablations, LoRA lr sweep, Table 18, Table 23, passkey data
    assert [r["nll"] for r in spawned["rows"]] == [r["nll"] for r in here["rows"]]  # same seed, same numbers
    assert spawned["passkey_hits"] == here["passkey_hits"]


@pytest.mark.slow
def test_a_killed_replicate_resumes_at_its_first_arm_not_yet_done(monkeypatch, tmp_path):
    experiment.data("tiny-teacher", P)
    _fresh_memo(monkeypatch, tmp_path / "cache")
    calls = {"ablation": 0, "converted": 0}
    ablation, converted = experiment.ablation, experiment.converted

    def counted(name, fn, fail=False):
        def wrapper(*args, **kwargs):
            if fail:
                raise RuntimeError("killed")
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(experiment, "ablation", counted("ablation", ablation))
    monkeypatch.setattr(experiment, "converted", counted("converted", converted, fail=True))
    with pytest.raises(RuntimeError, match="killed"):  # killed after the ablations, at the first conversion
        experiment.replicate(P, "tiny-teacher", 0, "cpu")
    assert calls == {"ablation": 3, "converted": 0}
    monkeypatch.setattr(experiment, "converted", counted("converted", converted))
    first = experiment.replicate(P, "tiny-teacher", 0, "cpu")
    assert calls == {"ablation": 3, "converted": 4}  # the ablations came from the memo
    again = experiment.replicate(P, "tiny-teacher", 0, "cpu")
    assert calls == {"ablation": 3, "converted": 4} and again["rows"] == first["rows"]
    assert [a["arm"] for a in again["arms"]] == [a["arm"] for a in first["arms"]]
    assert "7 arms converted on" in experiment.arms_summary([again])


@pytest.mark.slow
def test_the_decoding_student_is_the_converted_students_architecture():
    """Fig. 8 benchmarks the untrained window + linear student: a converted, LoRA-merged student has the same
    parameters (names, shapes) and decodes with a cache of the same size."""
    teacher, _ = load("tiny-teacher")
    d = experiment.data("tiny-teacher", P)
    _, model = converted(
        teacher,
        PackedBatches(d.train_rows, P["batch_size"], seed=0),
        d.evaluation,
        experiment.budget(P, 0, "cpu"),
        feature_map=P["feature_maps"][0],
        window=P["window"],
        terraced=P["terraced"],
    )
    merged, untrained = model.merge_and_unload(), experiment.decoding_student(teacher, P)
    shapes = [{n: p.shape for n, p in m.named_parameters()} for m in (merged, untrained)]
    assert shapes[0] == shapes[1]
    rows = [generation_throughput(m, [2], prompt_len=24, new_tokens=4)[0] for m in (merged, untrained)]
    assert rows[0]["cache_gib"] == rows[1]["cache_gib"] > 0
