"""Two CPU processes (gloo) at the same global batch reach the one-process weights (DDP and FSDP2)."""

import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from test_train import config, tiny_batches, tiny_model

from hybridlib.train import train
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
