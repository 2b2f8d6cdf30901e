"""Resumable training state: model, optimizer, scheduler, RNG states of every rank, data position.

One file, ``<out_dir>/checkpoint.pt``, written atomically by rank 0 and read by every rank. Model and
optimizer go through ``torch.distributed.checkpoint.state_dict`` with full (unsharded) state dicts,
so the same file serves 1 process, DDP and FSDP, and resumes at another world size (global batches are
split by rank at run time; only the per-rank random generators are reseeded then).
"""

from __future__ import annotations

import random
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict

from hybridlib.atomic import atomic_path
from hybridlib.integrity import MISSING, read_or_discard
from hybridlib.train.distributed import World, barrier, gather_objects

CHECKPOINT_NAME = "checkpoint.pt"
_FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """This process's python, numpy, torch CPU and CUDA generator states."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    out_dir: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    world: World,
    progress: dict[str, Any],
) -> None:
    """Write the full training state; ``progress`` holds step, tokens, history and the config. Collective."""
    model_state, optim_state = get_state_dict(model, optimizer, options=_FULL)
    rngs = gather_objects(rng_state(), world)
    if world.is_main:
        state = {
            "model": model_state,
            "optimizer": optim_state,
            "scheduler": scheduler.state_dict(),
            "rng": rngs,
            **progress,
        }
        with atomic_path(Path(out_dir) / CHECKPOINT_NAME) as tmp:
            torch.save(state, tmp)
    barrier(world)


def load_checkpoint(
    out_dir: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    world: World,
) -> dict[str, Any] | None:
    """Restore the state saved in ``out_dir`` (this rank's RNG included); returns the remaining entries
    (step, tokens, history, config) or ``None`` if there is none, or it does not load (moved aside with a
    warning naming it: training starts again)."""
    path = Path(out_dir) / CHECKPOINT_NAME
    if not path.is_file():
        return None
    state = read_or_discard(path, lambda p: torch.load(p, map_location="cpu", weights_only=False))
    if state is MISSING:
        return None
    set_state_dict(
        model,
        optimizer,
        model_state_dict=state.pop("model"),
        optim_state_dict=state.pop("optimizer"),
        options=StateDictOptions(full_state_dict=True),
    )
    scheduler.load_state_dict(state.pop("scheduler"))
    rngs = state.pop("rng")
    if len(rngs) == world.size:
        set_rng_state(rngs[world.rank])
    else:  # another world size: weights, optimizer and data position carry over; random streams restart
        warnings.warn(
            f"{path} was written by {len(rngs)} ranks, this run has {world.size}: reseeding the random "
            f"generators (seed + 1000 * step + rank), so dropout-like randomness differs from an uninterrupted run"
        )
        seed_everything(state["config"]["seed"] + 1000 * state["step"] + world.rank)
    return state
