"""The generic training loop: ``train(model, batches, loss_fn, config)`` -> ``History``.

One optimizer step = one global batch ``batches[step]`` (``[batch_size, seq_len]``), split over ranks
and micro-batches; ``loss_fn(model, micro_batch)`` returns the micro-batch's mean loss, so
cross-entropy training, distillation and LoRA differ only in ``loss_fn`` and in which parameters
require gradients. With ``config.out_dir`` set, the run resumes from ``<out_dir>/checkpoint.pt`` if
present, and keeps ``<out_dir>/history.json`` up to date.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from hybridlib.atomic import write_json
from hybridlib.progress import progress_bar
from hybridlib.train.batches import Batch, batch_rows, micro_batches
from hybridlib.train.checkpoint import load_checkpoint, save_checkpoint, seed_everything
from hybridlib.train.config import TrainConfig
from hybridlib.train.distributed import World, init_world, mean_over_ranks, wrap
from hybridlib.train.objectives import LossFn
from hybridlib.train.optim import build_optimizer, build_scheduler

Evaluate = Callable[[nn.Module], dict[str, float]]
_RESUME_FREE = {
    "progress",
    "out_dir",
    "checkpoint_every_steps",
    "checkpoint_every_s",
}  # may change between a run and its resume


@dataclass
class History:
    """``train``: one record per step (step, tokens, loss, grad_norm, lr per group, tokens_per_s);
    ``evals``: one record per evaluation (step, tokens, metrics...)."""

    config: dict[str, Any]
    train: list[dict[str, Any]] = field(default_factory=list)
    evals: list[dict[str, Any]] = field(default_factory=list)

    def save(self, path: str | Path) -> None:
        write_json(path, asdict(self))


def _to(batch: Batch, device: torch.device) -> Batch:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def _grad_sync(runner: nn.Module, model: nn.Module, sync: bool) -> contextlib.AbstractContextManager:
    """Skip the gradient all-reduce on all but the last micro-batch (DDP ``no_sync`` / FSDP2 flag)."""
    if isinstance(runner, nn.parallel.DistributedDataParallel):
        return contextlib.nullcontext() if sync else runner.no_sync()
    if hasattr(model, "set_requires_gradient_sync"):
        model.set_requires_gradient_sync(sync)
    return contextlib.nullcontext()


def _check_batch(batch: Batch, config: TrainConfig, step: int) -> None:
    shape = (batch_rows(batch), batch["input_ids"].shape[1])
    if shape != (config.batch_size, config.seq_len):
        raise ValueError(
            f"batches[{step}] has shape {shape}; config says (batch_size, seq_len) = "
            f"{(config.batch_size, config.seq_len)}"
        )


def _step(
    runner: nn.Module,
    model: nn.Module,
    batch: Batch,
    loss_fn: LossFn,
    optimizer: torch.optim.Optimizer,
    config: TrainConfig,
    world: World,
) -> tuple[float, float]:
    """One optimizer update on one global batch; returns (mean loss over ranks, gradient norm)."""
    parts = list(micro_batches(batch, world.rank, world.size, config.micro_batch_size))
    total = torch.zeros((), device=world.device)
    for i, part in enumerate(parts):
        with (
            _grad_sync(runner, model, i == len(parts) - 1),
            torch.autocast(world.device.type, dtype=torch.bfloat16, enabled=config.precision == "bf16"),
        ):
            loss = loss_fn(runner, _to(part, world.device)) / len(parts)
        loss.backward()
        total += loss.detach().float()
    max_norm = config.max_grad_norm if config.max_grad_norm is not None else math.inf
    grad_norm = torch.nn.utils.clip_grad_norm_(
        [p for p in model.parameters() if p.grad is not None], max_norm
    )
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return mean_over_ranks(total, world).item(), float(
        grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm
    )


def _evaluate(model: nn.Module, evaluate: Evaluate) -> dict[str, float]:
    model.eval()
    with torch.no_grad():
        metrics = evaluate(model)
    model.train()
    return metrics


def _resume(config: TrainConfig, model, optimizer, scheduler, world: World) -> tuple[int, History]:
    """Step and history to continue from (0 and an empty history without a checkpoint)."""
    fresh = History(config.to_dict())
    if config.out_dir is None:
        return 0, fresh
    state = load_checkpoint(config.out_dir, model, optimizer, scheduler, world)
    if state is None:
        return 0, fresh
    changed = sorted(
        k for k, v in config.to_dict().items() if k not in _RESUME_FREE and state["config"].get(k) != v
    )
    if changed:
        raise ValueError(
            f"{config.out_dir} holds a run with different settings {changed}; use another out_dir"
        )
    if world.is_main:
        print(
            f"resuming from step {state['step']} of {config.total_steps} ({config.out_dir}/checkpoint.pt)",
            flush=True,
        )
    return state["step"], History(**state["history"])


def _checkpoint_due(config: TrainConfig, step: int, since_save_s: float, world: World) -> bool:
    """Whether ``step`` ends with a checkpoint: every ``checkpoint_every_steps`` steps and the last one, or once
    ``checkpoint_every_s`` seconds passed since the last save (any rank due makes every rank save: collective)."""
    if config.checkpoint_every_steps and (
        step % config.checkpoint_every_steps == 0 or step == config.total_steps
    ):
        return True
    if config.checkpoint_every_s is None:
        return False
    due = torch.tensor(float(since_save_s >= config.checkpoint_every_s), device=world.device)
    return bool(mean_over_ranks(due, world) > 0)


def train(
    model: nn.Module,
    batches: Sequence[Batch],
    loss_fn: LossFn,
    config: TrainConfig,
    *,
    evaluate: Evaluate | None = None,
    callbacks: Sequence[Callable[[int, History], None]] = (),
) -> History:
    """Train ``model`` in place for ``config.total_steps`` steps on ``batches[0 .. total_steps-1]``.

    ``evaluate(model) -> metrics`` runs (eval mode, no grad, on every rank) each ``eval_every_tokens``
    and at the end; ``callbacks(step, history)`` run after every step. Under torchrun
    (``WORLD_SIZE > 1``) each rank takes its contiguous shard of every global batch.
    """
    world = init_world(next(model.parameters()).device)
    model.to(world.device)
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    seed_everything(config.seed + world.rank)
    model.train()
    runner = wrap(model, world, config.strategy)
    optimizer = build_optimizer(model, config)
    scheduler = build_scheduler(optimizer, config)
    step, history = _resume(config, model, optimizer, scheduler, world)
    tps = config.tokens_per_step
    history_path = Path(config.out_dir) / "history.json" if config.out_dir else None
    bar = progress_bar(
        total=config.total_steps * tps,
        initial=step * tps,
        unit="tok",
        unit_scale=True,
        disable=not (config.progress and world.is_main),
        dynamic_ncols=True,
    )
    saved_at = time.monotonic()
    while step < config.total_steps:
        start = time.perf_counter()
        batch = batches[step]
        _check_batch(batch, config, step)
        lrs = {g["name"]: g["lr"] for g in optimizer.param_groups}
        loss, grad_norm = _step(runner, model, batch, loss_fn, optimizer, config, world)
        scheduler.step()
        step += 1
        speed = tps / (time.perf_counter() - start)
        history.train.append(
            {
                "step": step,
                "tokens": step * tps,
                "loss": loss,
                "grad_norm": grad_norm,
                "lr": lrs,
                "tokens_per_s": speed,
            }
        )
        bar.update(tps)
        bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{speed:,.0f}", refresh=False)
        every = config.eval_every_tokens
        due = every and (step * tps) // every > ((step - 1) * tps) // every
        if evaluate is not None and (due or step == config.total_steps):
            history.evals.append({"step": step, "tokens": step * tps, **_evaluate(model, evaluate)})
        for callback in callbacks:
            callback(step, history)
        if config.out_dir and _checkpoint_due(config, step, time.monotonic() - saved_at, world):
            saved_at = time.monotonic()
            save_checkpoint(
                config.out_dir,
                model,
                optimizer,
                scheduler,
                world,
                {"step": step, "history": asdict(history), "config": config.to_dict()},
            )
        if history_path and world.is_main and (due or step == config.total_steps):
            history.save(history_path)
    bar.close()
    return history
