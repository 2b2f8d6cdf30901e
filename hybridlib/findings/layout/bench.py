"""Where a distillation step spends its time: teacher forward, student forward, KL, backward, optimizer.

``profile_step(teacher_name)`` converts the teacher into the standard periodic hybrid exactly as
:func:`hybridlib.findings.layout.distill.distill_layout` does, then times ``steps`` optimizer steps on random token ids
(``[batch_size, seq_len]``; speed does not depend on the text) phase by phase with CUDA events (wall clock on
CPU). It reports milliseconds per phase, tokens/s and MFU against :data:`hybridlib.findings.layout.distill.PEAK_BF16_FLOPS`
(``6 N_student + 2 N_teacher`` FLOPs a token, as the distillation runs count them), for the eager student and,
with ``compile_student``, a ``torch.compile``-d one.

CLI (writes ``data/results/layout_distillation/step_profile_<device>.json``)::

    python -m hybridlib.findings.layout.bench --teacher smollm2-135m [--batch-size 32 --seq-len 512 --steps 10]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from hybridlib.atomic import write_json
from hybridlib.convert import convert_to_hybrid
from hybridlib.findings.layout import distill
from hybridlib.layouts import BASELINE
from hybridlib.losses import forward_kl
from hybridlib.models import load
from hybridlib.paths import results_dir
from hybridlib.provenance import collect

PHASES = ("teacher_forward", "student_forward", "kl", "backward", "optimizer")


class _Timer:
    """Accumulates milliseconds per phase; CUDA events on GPU (no sync inside a step), perf_counter on CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.marks: dict[str, list[tuple[Any, Any]]] = {p: [] for p in PHASES}

    @contextmanager
    def phase(self, name: str):
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
        else:
            start = time.perf_counter()
            yield
            end = time.perf_counter()
        self.marks[name].append((start, end))

    def ms(self) -> dict[str, float]:
        if self.cuda:
            torch.cuda.synchronize()
        elapsed = (lambda s, e: s.elapsed_time(e)) if self.cuda else (lambda s, e: 1e3 * (e - s))
        return {p: sum(elapsed(s, e) for s, e in m) / max(1, len(m)) for p, m in self.marks.items()}


def _steps(student: torch.nn.Module, teacher: Callable, batches: Sequence[torch.Tensor], optimizer: torch.optim.Optimizer,
           timer: _Timer, autocast: Callable) -> None:
    phase = timer.phase
    for ids in batches:
        with autocast():
            with phase("teacher_forward"), torch.no_grad():
                target = teacher(input_ids=ids).logits
            with phase("student_forward"):
                logits = student(input_ids=ids).logits
            with phase("kl"):
                loss = forward_kl(logits, target)
        with phase("backward"):
            loss.backward()
        with phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)


def profile_step(teacher_name: str, *, batch_size: int = 32, seq_len: int = 512, steps: int = 10, warmup: int = 3,
                 compile_student: bool = False, device: str | torch.device | None = None,
                 precision: str | None = None, seed: int = 0) -> dict[str, Any]:
    """Mean milliseconds per phase (:data:`PHASES`) over ``steps`` steps after ``warmup``, ``step_ms`` (their sum),
    ``tokens_per_s``, ``mfu`` (CUDA only) and the settings."""
    if steps < 1 or warmup < 0:
        raise ValueError(f"steps must be >= 1 and warmup >= 0, got steps={steps}, warmup={warmup}")
    device, precision = distill._resolve_device(device, precision)
    teacher, _ = load(teacher_name)
    layout = distill._layout(teacher, BASELINE, distill.recipe(teacher_name).fa_fraction)
    student = convert_to_hybrid(teacher, layout, "gdn", seed=distill.MODEL_SEED).to(device).train()
    teacher = teacher.to(device, torch.bfloat16 if precision == "bf16" else torch.float32).eval().requires_grad_(False)
    generator = torch.Generator().manual_seed(seed)
    batches = [torch.randint(0, teacher.config.vocab_size, (batch_size, seq_len), generator=generator).to(device)
               for _ in range(warmup + steps)]
    teacher_fn, teacher_compiled = distill._compiled_teacher(teacher, batches[0], device, precision)
    runner = torch.compile(student) if compile_student else student
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-5)

    def autocast():
        return distill._autocast(device, precision)

    start = time.perf_counter()
    _steps(runner, teacher_fn, batches[:warmup], optimizer, _Timer(device), autocast)
    warmup_s = time.perf_counter() - start
    timer = _Timer(device)
    _steps(runner, teacher_fn, batches[warmup:], optimizer, timer, autocast)
    ms = timer.ms()
    step_ms = sum(ms.values())
    tokens_per_s = batch_size * seq_len / (step_ms / 1e3)
    flops = 6 * distill.matmul_params(student) + 2 * distill.matmul_params(teacher)
    return {"teacher": teacher_name, "batch_size": batch_size, "seq_len": seq_len, "steps": steps,
            "precision": precision, "compile_student": compile_student, "teacher_compiled": teacher_compiled,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "phase_ms": {k: round(v, 3) for k, v in ms.items()}, "step_ms": round(step_ms, 3),
            "warmup_s": round(warmup_s, 1), "tokens_per_s": round(tokens_per_s, 1),
            "flops_per_token": float(flops),
            "mfu": tokens_per_s * flops / distill.PEAK_BF16_FLOPS if device.type == "cuda" else None}


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m hybridlib.findings.layout.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", required=True, choices=sorted(distill.RECIPES))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--variants", nargs="+", choices=("eager", "compiled"), default=["eager", "compiled"])
    args = parser.parse_args(argv)
    rows = []
    for variant in args.variants:
        try:
            row = profile_step(args.teacher, batch_size=args.batch_size, seq_len=args.seq_len, steps=args.steps,
                               compile_student=variant == "compiled")
        except Exception as err:  # noqa: BLE001 - a failed variant is a result to report, not a crash
            row = {"teacher": args.teacher, "compile_student": variant == "compiled", "error": f"{type(err).__name__}: {err}"}
        print(row, flush=True)
        rows.append(row)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    write_json(results_dir("layout_distillation") / f"step_profile_{device}.json",
               {"rows": rows, "provenance": collect("bench", vars(args))})


if __name__ == "__main__":
    main()
