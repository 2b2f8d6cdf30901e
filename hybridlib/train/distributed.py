"""``torch.distributed`` glue: process-group set-up from torchrun's environment, DDP/FSDP wrapping,
and small collectives. With ``WORLD_SIZE`` unset or 1 everything is a no-op."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class World:
    rank: int
    size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_world(model_device: torch.device) -> World:
    """Join the process group torchrun (or a spawner) described in ``RANK``/``WORLD_SIZE``/``MASTER_ADDR``.

    NCCL with one GPU per ``LOCAL_RANK`` on CUDA, gloo on CPU.
    """
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size == 1:
        return World(0, 1, model_device)
    cuda = model_device.type == "cuda"
    device = rank_device(model_device)
    if cuda:
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    return World(dist.get_rank(), dist.get_world_size(), device)


def rank_device(device: torch.device) -> torch.device:
    """This process's device for ``device``: under torchrun (``WORLD_SIZE`` > 1) on CUDA the GPU of ``LOCAL_RANK``,
    otherwise ``device`` (a CPU world runs every rank on the CPU)."""
    if device.type == "cuda" and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return device


def wrap(model: nn.Module, world: World, strategy: str) -> nn.Module:
    """The module to run forward/backward through: the model itself (1 process), DDP, or FSDP2
    (``fully_shard`` on every decoder layer named in ``model._no_split_modules``, then on the root;
    the model object is sharded in place)."""
    if world.size == 1:
        return model
    if strategy == "ddp":
        return nn.parallel.DistributedDataParallel(
            model, device_ids=[world.device] if world.device.type == "cuda" else None
        )
    from torch.distributed.fsdp import fully_shard

    layer_classes = set(getattr(model, "_no_split_modules", None) or ())
    for module in model.modules():
        if type(module).__name__ in layer_classes:
            fully_shard(module)
    fully_shard(model)
    return model


def mean_over_ranks(value: torch.Tensor, world: World) -> torch.Tensor:
    """Average of a scalar tensor over ranks."""
    if world.size == 1:
        return value
    value = value.detach().clone()
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return value / world.size


def gather_objects(obj: Any, world: World) -> list[Any]:
    """One picklable object from every rank, in rank order."""
    if world.size == 1:
        return [obj]
    out: list[Any] = [None] * world.size
    dist.all_gather_object(out, obj)
    return out


def barrier(world: World) -> None:
    if world.size > 1:
        dist.barrier()


def spawn_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes (fresh interpreters, safe beside CUDA) for independent runs on
    one host, each given this process's CPU threads divided among them so that the pool never oversubscribes
    the host."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    return ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=torch.set_num_threads,
        initargs=(max(1, torch.get_num_threads() // workers),),
    )
