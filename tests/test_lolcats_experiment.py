"""LoLCATs experiment driver on the tiny teacher: the arms one replicate converts, and a replicate run in a
spawned process giving the same numbers as in this process."""

import pytest

from hybridlib.findings.lolcats import experiment
from hybridlib.findings.lolcats.spec import SPEC

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


@pytest.mark.slow
def test_one_replicate_converts_every_arm_and_a_spawned_process_computes_the_same_numbers():
    here, spawned = experiment.replicates(P, [("tiny-teacher", 0), ("tiny-teacher", 0)], ["cpu"], parallel=2)
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
    assert (
        here["model"] is not None and spawned["model"] is None
    )  # only the in-process replicate keeps its model
    assert set(here["passkey_hits"]) == {
        "teacher (softmax)",
        "converted with corpus text",
        "converted with passkey data",
    }
    assert len(here["per_layer"]) == 2 and len(here["per_layer"][0]["mse_transfer"]) == 8  # 8 layers
    assert [r["nll"] for r in spawned["rows"]] == [r["nll"] for r in here["rows"]]  # same seed, same numbers
    assert spawned["passkey_hits"] == here["passkey_hits"]
