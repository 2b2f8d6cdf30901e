"""Two CPU processes (gloo) at the same global batch reach the one-process weights (DDP and FSDP2)."""

import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from test_train import config, tiny_batches, tiny_model

from hybridlib.train import train
from hybridlib.train.distributed import spawn_pool
from hybridlib.train.objectives import causal_lm_loss


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world_size: int, port: int, strategy: str, out: str, checkpoint_dir: str) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
    )
    torch.set_num_threads(1)
    model = tiny_model()
    history = train(
        model,
        tiny_batches(),
        causal_lm_loss,
        config(steps=4, strategy=strategy, out_dir=checkpoint_dir, checkpoint_every_steps=2),
    )
    state = {
        k: (v.full_tensor() if hasattr(v, "full_tensor") else v).detach().clone()
        for k, v in model.state_dict().items()
    }
    if rank == 0:
        torch.save({"state": state, "losses": [r["loss"] for r in history.train]}, out)
    dist.destroy_process_group()


@pytest.mark.parametrize("strategy", ["ddp", pytest.param("fsdp", marks=pytest.mark.slow)])
def test_two_processes_match_one(tmp_path, strategy, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    single = tiny_model()
    h_single = train(single, tiny_batches(), causal_lm_loss, config(steps=4))
    out = tmp_path / "rank0.pt"
    mp.spawn(_worker, args=(2, _free_port(), strategy, str(out), str(tmp_path / "ckpt")), nprocs=2, join=True)
    result = torch.load(out)
    assert result["losses"] == pytest.approx([r["loss"] for r in h_single.train], rel=1e-5)
    for name, value in single.state_dict().items():
        # Adam normalises tiny gradient differences (summation order) to ~1e-6; a sharding bug moves ~lr=1e-2
        torch.testing.assert_close(result["state"][name], value, rtol=0, atol=2e-5, msg=name)
    assert (tmp_path / "ckpt" / "checkpoint.pt").is_file()


class _Stop(Exception):
    """Raised by a callback to end a run early, as a killed job would (after the last checkpoint)."""


def _distill_model():
    """A tiny Llama teacher and its 2-layer hybrid student (layer 1 GDN) as one DistillationModel."""
    from hybridlib.convert import convert_to_hybrid
    from hybridlib.train.objectives import DistillationModel

    teacher = tiny_model(seed=1).eval()
    student = convert_to_hybrid(teacher, [0], "gdn").train()
    return DistillationModel(student, teacher.requires_grad_(False))


def _distill_run(out_dir: str, stop_at: int | None) -> tuple[list[float], dict[str, torch.Tensor]]:
    """Distil for 4 steps (checkpoints every 2) in this process's world; ``stop_at``: end after that step's update
    without saving it (so the run resumes from the previous checkpoint). Returns losses and the student's weights."""
    from hybridlib.train.objectives import model_loss

    def stop(step, _history):
        if step == stop_at:
            raise _Stop

    model = _distill_model()
    try:
        history = train(
            model,
            tiny_batches(),
            model_loss,
            config(steps=4, out_dir=out_dir, checkpoint_every_steps=2),
            callbacks=[stop],
        )
    except _Stop:
        return [], {}
    return [r["loss"] for r in history.train], {
        k: v.detach().clone() for k, v in model.student.state_dict().items()
    }


def _distill_worker(
    rank: int, world_size: int, port: int, out_dir: str, stop_at: int | None, out: str
) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
    )
    torch.set_num_threads(1)
    losses, state = _distill_run(out_dir, stop_at)
    if rank == 0:
        torch.save({"losses": losses, "state": state}, out)
    dist.destroy_process_group()


@pytest.mark.slow
def test_distillation_checkpoints_move_between_one_and_two_processes(tmp_path, monkeypatch):
    """DistillationModel under DDP (2 gloo processes) at the same global batch: stopped at step 3 on 2 processes
    and resumed on 1 (and the reverse), the run ends at the uninterrupted 1-process weights (Adam turns
    summation-order differences into ~1e-6; atol 2e-5 as above)."""
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    losses, reference = _distill_run(str(tmp_path / "one"), None)
    out = str(tmp_path / "rank0.pt")
    # written on 2, resumed on 1
    mp.spawn(_distill_worker, args=(2, _free_port(), str(tmp_path / "two-one"), 3, out), nprocs=2, join=True)
    with pytest.warns(UserWarning, match="written by 2 ranks"):
        resumed_losses, resumed = _distill_run(str(tmp_path / "two-one"), None)
    # the KL of near-equal distributions is a small difference of logarithms: float32 rounding of the weights
    # (~1e-7) moves it by ~2e-5 relatively, so the losses get rel=1e-4; the weights are the sharp test
    assert resumed_losses == pytest.approx(losses, rel=1e-4)  # history: 2 steps from the checkpoint, 2 after
    # written on 1, resumed on 2
    _distill_run(str(tmp_path / "one-two"), 3)
    mp.spawn(
        _distill_worker, args=(2, _free_port(), str(tmp_path / "one-two"), None, out), nprocs=2, join=True
    )
    two = torch.load(out)
    assert two["losses"] == pytest.approx(losses, rel=1e-4)
    for name, value in reference.items():
        torch.testing.assert_close(resumed[name], value, rtol=0, atol=2e-5, msg=name)
        torch.testing.assert_close(two["state"][name], value, rtol=0, atol=2e-5, msg=name)


def test_spawn_pool_divides_this_process_threads_among_its_workers():
    before = torch.get_num_threads()
    torch.set_num_threads(7)  # read when the pool is made, in this process
    try:
        with spawn_pool(3) as pool:
            assert {pool.submit(torch.get_num_threads).result() for _ in range(3)} == {2}  # 7 // 3
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ValueError, match="workers must be >= 1, got 0"):
        spawn_pool(0)
