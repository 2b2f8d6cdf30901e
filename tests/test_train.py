"""Trainer: schedule vs hand values, parameter groups, batches, bit-exact resume, history file."""

import itertools
import json
import math
import re

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from hybridlib.progress import LOG_ENV
from hybridlib.train import PackedBatches, TrainConfig, causal_lm_loss, lr_at, train
from hybridlib.train.batches import micro_batches
from hybridlib.train.optim import build_optimizer, param_groups

SEQ, BATCH, VOCAB = 8, 4, 32


def tiny_model(dropout: float = 0.0, seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        attention_dropout=dropout,
    )
    return LlamaForCausalLM(config)


def tiny_batches(seed: int = 0) -> PackedBatches:
    rows = torch.randint(0, VOCAB, (12, SEQ), generator=torch.Generator().manual_seed(123))
    return PackedBatches(rows, BATCH, seed=seed)


def config(**kw) -> TrainConfig:
    base = {
        "batch_size": BATCH,
        "seq_len": SEQ,
        "steps": 6,
        "lrs": {"rest": 1e-2},
        "warmup_frac": 0.2,
        "progress": False,
    }
    return TrainConfig(**(base | kw))


def test_lr_schedule_hand_values():
    # 10 steps, 2 warm-up: 0.5, 1.0, then cosine over steps 2..9 (span 7) down to min 0.1
    kw = {"peak": 1.0, "total_steps": 10, "warmup_steps": 2, "min_lr": 0.1}
    got = [lr_at(s, **kw) for s in range(10)]
    assert got[:3] == pytest.approx([0.5, 1.0, 1.0])
    assert got[9] == pytest.approx(0.1)
    # step 5 is 3/7 of the way: 0.1 + 0.9 * (1 + cos(3 pi / 7)) / 2
    assert got[5] == pytest.approx(0.1 + 0.45 * (1 + math.cos(3 * math.pi / 7)))
    assert all(a >= b for a, b in itertools.pairwise(got[1:]))


def test_trainer_applies_per_group_schedule():
    cfg = config(
        lrs={"embed": 0.02, "rest": 0.01},
        group_patterns={"embed": r"embed_tokens"},
        min_lr=0.001,
        steps=5,
        warmup_frac=0.2,
    )
    history = train(tiny_model(), tiny_batches(), causal_lm_loss, cfg)
    for record in history.train:
        s = record["step"] - 1
        for group, peak in (("embed", 0.02), ("rest", 0.01)):
            expected = lr_at(s, peak=peak, total_steps=5, warmup_steps=1, min_lr=0.001)
            assert record["lr"][group] == pytest.approx(expected)


def test_param_groups_split_by_pattern_and_decay():
    cfg = config(lrs={"attn": 0.1, "rest": 0.2}, group_patterns={"attn": r"self_attn"}, weight_decay=0.5)
    model = tiny_model()
    model.model.norm.weight.requires_grad_(False)
    groups = {g["name"]: g for g in param_groups(model, cfg)}
    assert set(groups) == {"attn", "rest", "rest/no_decay"}  # attention has no vectors (no bias)
    assert groups["attn"]["lr"] == 0.1 and groups["rest/no_decay"]["weight_decay"] == 0.0
    n_attn = sum(p.numel() for n, p in model.named_parameters() if "self_attn" in n)
    assert sum(p.numel() for p in groups["attn"]["params"]) == n_attn
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert sum(p.numel() for g in groups.values() for p in g["params"]) == trainable
    with pytest.raises(ValueError, match="no 'rest'"):
        param_groups(model, config(lrs={"attn": 0.1}, group_patterns={"attn": "self_attn"}))


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="exactly one"):
        TrainConfig(batch_size=1, seq_len=1)
    with pytest.raises(ValueError, match="precision"):
        config(precision="fp16")
    with pytest.raises(ValueError, match="min_lr"):
        config(min_lr=1.0)
    with pytest.raises(ValueError, match="no lr"):
        config(group_patterns={"x": "y"})
    assert TrainConfig(batch_size=2, seq_len=8, total_tokens=33).total_steps == 3


def test_packed_batches_cover_each_epoch_and_shard():
    batches = tiny_batches()
    epoch = torch.cat([batches[i]["input_ids"] for i in range(len(batches))])
    assert sorted(map(tuple, epoch.tolist())) == sorted(map(tuple, batches.rows.tolist()))
    assert not torch.equal(batches[0]["input_ids"], batches[len(batches)]["input_ids"])  # reshuffled
    parts = list(micro_batches(batches[0], rank=1, world_size=2, micro=1))
    assert [p["input_ids"].tolist() for p in parts] == [[r] for r in batches[0]["input_ids"][2:4].tolist()]
    with pytest.raises(ValueError, match="micro_batch_size"):
        list(micro_batches(batches[0], rank=0, world_size=1, micro=3))


def test_loss_decreases_and_accumulation_matches_full_batch():
    """Four micro-batches of 1 must give the full batch's update. Computed in float64, because in float32 the
    two summation orders differ by ~1e-7 relative per gradient and AdamW divides by sqrt(v), which amplifies
    that for near-zero gradients: measured up to 3.7e-6 absolute / 5e-4 relative after 6 steps, depending on
    the CPU kernels (ATEN_CPU_CAPABILITY, MKL's code path) - the same size as the error of a real bug (a
    micro-batch loss summed instead of averaged moves the float64 weights by 2e-5, AdamW being almost scale
    invariant). In float64 the measured gap is <= 4e-15 absolute / 1.5e-12 relative under
    default, avx2 and avx512 kernels, so rtol 1e-9 / atol 1e-12 leave 1000x headroom and still catch that bug.
    The cross-entropy itself runs in float32 (row by row, the same in both runs), so the recorded losses are
    float32 sums in two orders: equal to 2 float32 ulps at ~3.5 (measured: 1 ulp)."""
    full = tiny_model().double()
    h_full = train(full, tiny_batches(), causal_lm_loss, config())
    assert h_full.train[-1]["loss"] < h_full.train[0]["loss"] < math.log(VOCAB) + 0.2
    accum = tiny_model().double()
    h_accum = train(accum, tiny_batches(), causal_lm_loss, config(micro_batch_size=1))
    for a, b in zip(full.parameters(), accum.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
    losses = [r["loss"] for r in h_full.train]
    assert [r["loss"] for r in h_accum.train] == pytest.approx(losses, abs=2 * 2**-21)


class Killed(RuntimeError):
    pass


def _kill_at(k):
    def callback(step, history):
        if step == k:
            raise Killed

    return callback


def test_resume_after_kill_is_bit_identical(tmp_path):
    """Dropout (torch RNG), shuffled data and AdamW state must all be restored exactly."""
    cfg = config(steps=7, checkpoint_every_steps=2, eval_every_tokens=2 * BATCH * SEQ)
    evaluate = lambda m: {"w0": m.lm_head.weight[0, 0].item()}
    straight = tiny_model(dropout=0.3)
    h_straight = train(
        straight,
        tiny_batches(),
        causal_lm_loss,
        config(**(cfg.to_dict() | {"out_dir": None})),
        evaluate=evaluate,
    )

    out = tmp_path / "run"
    killed = tiny_model(dropout=0.3)
    with pytest.raises(Killed):
        train(
            killed,
            tiny_batches(),
            causal_lm_loss,
            config(**(cfg.to_dict() | {"out_dir": str(out)})),
            evaluate=evaluate,
            callbacks=[_kill_at(5)],
        )
    resumed = tiny_model(dropout=0.3, seed=99)  # different init: everything must come from the checkpoint
    h_resumed = train(
        resumed,
        tiny_batches(),
        causal_lm_loss,
        config(**(cfg.to_dict() | {"out_dir": str(out)})),
        evaluate=evaluate,
    )
    for a, b in zip(straight.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)
    assert [r["loss"] for r in h_resumed.train] == [r["loss"] for r in h_straight.train]
    assert h_resumed.evals == h_straight.evals
    saved = json.loads((out / "history.json").read_text())
    assert [r["step"] for r in saved["train"]] == list(range(1, 8)) and saved["config"]["steps"] == 7
    with pytest.raises(ValueError, match="different settings"):
        train(tiny_model(), tiny_batches(), causal_lm_loss, config(steps=7, seed=1, out_dir=str(out)))


@pytest.mark.parametrize("every_s, expected_step", [(0.0, 4), (3600.0, None)])
def test_time_based_checkpoints(tmp_path, every_s, expected_step):
    """``checkpoint_every_s``: 0 s saves after every step (a kill after step 5's callback leaves step 4's);
    an hour saves nothing in a short run."""
    out = tmp_path / "run"
    with pytest.raises(Killed):
        train(
            tiny_model(),
            tiny_batches(),
            causal_lm_loss,
            config(steps=7, checkpoint_every_s=every_s, out_dir=str(out)),
            callbacks=[_kill_at(5)],
        )
    path = out / "checkpoint.pt"
    if expected_step is None:
        assert not path.exists()
    else:
        assert torch.load(path, weights_only=False)["step"] == expected_step


def test_optimizer_choice_and_missing_bitsandbytes():
    assert isinstance(build_optimizer(tiny_model(), config()), torch.optim.AdamW)
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="bitsandbytes"):
            build_optimizer(tiny_model(), config(optimizer="adamw8bit"))


def test_logged_training_redraws_its_bar_at_most_every_interval(monkeypatch, capsys):
    """In a log (``$HYBRIDLIB_PROGRESS_LOG``) the loss postfix must not force a redraw every step."""
    monkeypatch.setenv(LOG_ENV, "1")
    train(tiny_model(), tiny_batches(), causal_lm_loss, config(steps=30, progress=True))
    redraws = [s for s in re.split(r"[\r\n]", capsys.readouterr().err) if "%|" in s]
    assert len(redraws) <= 3 and redraws[-1].lstrip().startswith("100%")  # first draw, (close), final state
