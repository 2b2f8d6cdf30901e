"""Where a distillation step spends its time: teacher forward, student forward, KL, backward, optimizer.

``profile_step(teacher_name)`` converts the teacher into the standard periodic hybrid exactly as
:func:`hybridlib.train.distill.distill_layout` does, then times ``steps`` optimizer steps on random token ids
(``[batch_size, seq_len]``; speed does not depend on the text) phase by phase with CUDA events (wall clock on
CPU). It reports milliseconds per phase, tokens/s and MFU against
:data:`hybridlib.models.flops.PEAK_BF16_FLOPS` (``6 N_student + 2 N_teacher`` FLOPs a token, as the
distillation runs count them) and, on CUDA, a ``torch.profiler`` summary of ``profile_steps`` more steps
(:func:`kernel_summary`). Variants (:data:`benchmarks.distill_setup.VARIANTS`):

- ``eager``: the step as the chapters ran it before the fast path: eager student in float32 weights under
  autocast, ``[B, T, V]`` logits of both models and the chunked float32 :func:`~hybridlib.losses.forward_kl`,
  compiled teacher, for-each AdamW;
- ``fused``: :class:`~hybridlib.train.objectives.DistillationModel` (fused linear-KL from hidden states, its
  gradients formed in the ``kl`` phase) and fused AdamW, eager backbones;
- ``compiled``: ``fused`` with both backbones compiled (fla's kernels as opaque custom ops, no graph breaks);
- ``fast``: ``compiled`` with the backbones replayed as CUDA graphs (``torch.compile``'s "reduce-overhead") -
  the chapters' default on one GPU;
- ``regional``: ``fast`` with each decoder layer compiled instead of each backbone (layers of one class share
  a graph: the compile no longer grows with depth or changes with the layout; its ``warmup_s`` is the point). On
  the H200 it ran as fast as ``fast`` but its loss curve left the eager one (up to 50% at step 5; README of
  ``tools/offline_gpu``): not the chapters' path.

``random_weights`` builds the teacher from its ``config.json`` alone (``teacher_path`` = a folder holding it),
so shapes, not checkpoints, travel to a GPU machine. ``kl_chunk_timings(...)`` times the fused KL alone per
chunk length; the CLI also runs the probes of :mod:`benchmarks.distill_probes` (loss curves, first step,
gradients) and judges them (``--judge``: :func:`hybridlib.train.equivalence.judge_fast_path`).
``sdpa_layout`` arranges the attention layers' SDPA inputs (:data:`kernels.ops.SDPA_LAYOUTS`), ``sdpa_backend``
restricts SDPA to one kernel family (:data:`kernels.ops.SDPA_BACKENDS`) and ``gdn_projections`` runs the GDN
layers' q, k, v and gate projections as one matmul, four, or one forward and four backward
(:data:`kernels.layers.gated_deltanet.PROJECTIONS`) in the timed steps.
``conv_impl`` picks the GDN layers' short convolution (:data:`kernels.ops.short_conv.IMPLS`: the compiled ``torch``
shifts, or fla's Triton kernel) for every variant but ``eager``, which stays the reference.

CLI (writes ``step_profile_<device>[_<tag>].json`` to ``--results-dir``, default :data:`OUT_DIR`;
``python -m benchmarks.promote`` copies one the book shows into ``data/results/benchmarks/``)::

    python -m benchmarks.distill_step --teacher smollm2-135m [--batch-size 32 --seq-len 512 --steps 10]
        [--variants eager fast] [--random-weights --teacher-path DIR] [--curve-steps 200] [--tag NAME]
        [--conv-impl fla] [--sdpa-layout contiguous] [--sdpa-backend flash] [--gdn-projections split_backward]
        [--first-step]
        [--grad-probe fused compiled]
    torchrun --nproc-per-node 2 -m benchmarks.distill_step --teacher smollm2-135m --train-steps 60
        [--strategy fsdp] [--out-dir DIR --stop-at K] ...   # the trainer on N GPUs (train_speed)
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from benchmarks.distill_probes import GRADIENT_VARIANTS, first_step_probe, gradient_probe, loss_curves
from benchmarks.distill_setup import VARIANTS, Step, Timer, build_models
from hybridlib.atomic import write_json
from hybridlib.layouts import BASELINE, LAYOUT_NAMES
from hybridlib.losses import linear_forward_kl
from hybridlib.models.flops import PEAK_BF16_FLOPS, matmul_params
from hybridlib.paths import REPO_ROOT
from hybridlib.provenance import collect
from hybridlib.train import PackedBatches, TrainConfig, compile_cache, distill, train
from hybridlib.train.equivalence import judge_fast_path
from hybridlib.train.objectives import DistillationModel, model_loss
from kernels.layers.gated_deltanet import DEFAULT_PROJECTIONS, PROJECTIONS
from kernels.ops.attention import SDPA_BACKENDS, SDPA_LAYOUTS
from kernels.ops.short_conv import IMPLS as CONV_IMPLS

# kernel families, first match wins (names lower-cased); inductor's kernels start with "triton_"
#: where the CLI writes unless ``--results-dir`` says otherwise (a result the book shows: ``python -m
#: benchmarks.promote``)
OUT_DIR = REPO_ROOT / "_build" / "bench"
FAMILIES = (
    ("inductor_fused", r"^triton_"),
    ("attention", r"flash|fmha|attention|sdpa"),
    ("gemm", r"gemm|cutlass|nvjet|xmma|cublas|matmul|splitk"),
    ("fla_conv", r"causal_conv1d"),
    ("fla_gdn", r"chunk|delta|wy_|l2norm|solve_tril|kkt|recompute|cumsum|main_kernel|tilelang"),
    ("optimizer", r"adam|multi_tensor"),
    ("dtype_copy", r"copy|cast|convert"),
    ("softmax", r"softmax"),
    ("reduce", r"reduce"),
    ("conv", r"conv|cudnn"),
    ("elementwise", r"elementwise|vectorized|unrolled"),
    ("memcpy_memset", r"memcpy|memset"),
    ("nccl", r"nccl"),
)


#: the compile caches' counters a warm-up records (``torch._dynamo.utils.counters``: group, key): inductor's FX
#: graphs and AOT autograd's graphs, each hit or missed (compiled afresh)
CACHE_COUNTERS = (
    ("inductor", "fxgraph_cache_hit"),
    ("inductor", "fxgraph_cache_miss"),
    ("aot_autograd", "autograd_cache_hit"),
    ("aot_autograd", "autograd_cache_miss"),
)


def _cache_counts() -> dict[str, int]:
    """The :data:`CACHE_COUNTERS` of this process so far, by key."""
    from torch._dynamo.utils import counters

    return {key: int(counters[group][key]) for group, key in CACHE_COUNTERS}


def profile_step(
    teacher_name: str,
    *,
    batch_size: int = 32,
    seq_len: int = 512,
    steps: int = 10,
    warmup: int = 3,
    variant: str = "eager",
    device: str | torch.device | None = None,
    precision: str | None = None,
    seed: int = 0,
    random_weights: bool = False,
    teacher_path: str | Path | None = None,
    profile_steps: int = 2,
    layout: str = BASELINE,
    cuda_graphs: bool = True,
    conv_impl: str = "torch",
    sdpa_layout: str = "hf",
    gdn_projections: str = DEFAULT_PROJECTIONS,
    sdpa_backend: str = "auto",
) -> dict[str, Any]:
    """Mean milliseconds per phase (:data:`PHASES`) over ``steps`` steps after ``warmup``, ``step_ms`` (their sum),
    ``tokens_per_s``, ``mfu`` (CUDA only), the settings and (CUDA, ``profile_steps > 0``) ``profile``, for the
    student of ``layout``. ``warmup_s`` includes compiling: a later layout in the same process shows what a new
    layout costs to compile once the teacher and the kernels are; ``cache_counts``: the compile caches' hits and
    misses in it (:data:`CACHE_COUNTERS`). ``cuda_graphs=False``: ``fast`` and ``regional``
    without CUDA graphs (compiled only). ``sdpa_layout``, ``sdpa_backend`` and ``gdn_projections``: the attention
    inputs' layout, SDPA's kernels and the GDN layers' input projections in every variant but ``eager``
    (:func:`build_models`)."""
    if steps < 1 or warmup < 0:
        raise ValueError(f"steps must be >= 1 and warmup >= 0, got steps={steps}, warmup={warmup}")
    device, precision = distill._resolve_device(device, precision)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    conv, sdpa, projs, backend = (
        ("torch", "hf", "fused", "auto")
        if variant == "eager"
        else (conv_impl, sdpa_layout, gdn_projections, sdpa_backend)
    )
    student, teacher = build_models(
        teacher_name,
        device,
        precision,
        random_weights,
        teacher_path,
        seed,
        layout,
        conv,
        sdpa,
        projs,
        backend,
    )
    generator = torch.Generator().manual_seed(seed)
    batches = [
        torch.randint(0, teacher.config.vocab_size, (batch_size, seq_len), generator=generator).to(device)
        for _ in range(warmup + steps)
    ]
    step = Step(variant, student, teacher, device, precision, batches[0], lr=1e-5, cuda_graphs=cuda_graphs)
    before = _cache_counts()
    start = time.perf_counter()
    warm = Timer(device)
    for ids in batches[:warmup]:
        step(ids, warm.phase)
    warm.ms()
    warmup_s = time.perf_counter() - start
    cache_delta = {key: n - before[key] for key, n in _cache_counts().items()}
    timer = Timer(device)
    for ids in batches[warmup:]:
        step(ids, timer.phase)
    ms = timer.ms()
    step_ms = sum(ms.values())
    tokens_per_s = batch_size * seq_len / (step_ms / 1e3)
    flops = 6 * matmul_params(student) + 2 * matmul_params(teacher)
    cuda = device.type == "cuda"
    profile = (
        kernel_summary(lambda i: step(batches[i % len(batches)], Timer(device).phase), profile_steps)
        if (cuda and profile_steps)
        else None
    )
    return {
        "teacher": teacher_name,
        "variant": variant,
        "layout": layout,
        "conv_impl": conv,
        "sdpa_layout": sdpa,
        "sdpa_backend": backend,
        "gdn_projections": projs,
        "fla_env": {k: v for k, v in os.environ.items() if k.startswith("FLA_")},  # e.g. FLA_CONV_GLUON=1
        # e.g. TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 (inductor tunes each fused kernel's block sizes)
        "inductor_env": {k: v for k, v in os.environ.items() if k.startswith("TORCHINDUCTOR_")},
        "batch_size": batch_size,
        "seq_len": seq_len,
        "steps": steps,
        "precision": precision,
        "random_weights": random_weights,
        "teacher_compiled": step.teacher_compiled,
        "cuda_graphs": bool(getattr(step, "model", None) and step.model.cuda_graphs),
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "phase_ms": {k: round(v, 3) for k, v in ms.items()},
        "step_ms": round(step_ms, 3),
        "warmup_s": round(warmup_s, 1),
        "compile_cache": compile_cache.status(),  # whether this process began from saved compile artefacts
        "cache_counts": cache_delta,  # the compile caches' hits and misses during the warm-up (CACHE_COUNTERS)
        "tokens_per_s": round(tokens_per_s, 1),
        "flops_per_token": float(flops),
        "mfu": tokens_per_s * flops / PEAK_BF16_FLOPS if cuda else None,
        "peak_memory_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if cuda else None,
        "profile": profile,
    }


def kernel_summary(run_step: Callable[[int], Any], steps: int, top: int = 30) -> dict[str, Any]:
    """``torch.profiler`` over ``steps`` calls of ``run_step(i)`` (CUDA): per step, the kernels launched, the
    host milliseconds to issue the step (its CPU span) and the GPU milliseconds (sum of kernel times), GPU ms
    per kernel family (:data:`FAMILIES`) and the ``top`` kernels by GPU time."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(steps):
            with record_function("distill_step"):
                run_step(i)
        torch.cuda.synchronize()
    events = prof.events()
    host_us = sum(
        e.time_range.elapsed_us()
        for e in events
        if e.name == "distill_step" and e.device_type == DeviceType.CPU
    )
    kernels = [
        e
        for e in events
        if e.device_type == DeviceType.CUDA
        and e.name != "distill_step"
        and not getattr(e, "is_user_annotation", False)
    ]
    families: dict[str, float] = {}
    by_name: dict[str, float] = {}
    for e in kernels:
        us = e.time_range.elapsed_us()
        family = kernel_family(e.name)
        families[family] = families.get(family, 0.0) + us
        by_name[e.name] = by_name.get(e.name, 0.0) + us
    gpu_us = sum(families.values())
    per_step = lambda us: round(us / steps / 1e3, 3)  # µs over all steps -> ms per step
    return {
        "steps": steps,
        "kernels_per_step": round(len(kernels) / steps),
        "host_ms_per_step": per_step(host_us),
        "gpu_ms_per_step": per_step(gpu_us),
        "gpu_ms_by_family": {f: per_step(us) for f, us in sorted(families.items(), key=lambda kv: -kv[1])},
        "top_kernels_ms": {
            n[:120]: per_step(us) for n, us in sorted(by_name.items(), key=lambda kv: -kv[1])[:top]
        },
    }


def kernel_family(name: str) -> str:
    """The :data:`FAMILIES` entry a CUDA kernel's name falls in (first match), else "other"."""
    return next((f for f, pattern in FAMILIES if re.search(pattern, name.lower())), "other")


def train_speed(
    teacher_name: str,
    *,
    steps: int = 60,
    batch_size: int = 32,
    seq_len: int = 512,
    strategy: str = "ddp",
    cuda_graphs: bool = True,
    out_dir: str | None = None,
    stop_at: int | None = None,
    seed: int = 0,
    random_weights: bool = False,
    teacher_path: str | Path | None = None,
    conv_impl: str = "torch",
) -> dict[str, Any] | None:
    """The distillation trainer itself (:func:`hybridlib.train.train` on a
    :class:`~hybridlib.train.objectives.DistillationModel`, the chapters' learning rates) for ``steps`` steps of
    ``batch_size`` random sequences - in one process, or under ``torchrun`` (global batch split over the ranks,
    ``strategy`` "ddp" or "fsdp"). CUDA graphs only with one process. ``out_dir``: checkpoints every
    ``steps // 4`` steps there (a run resumes from them, at any world size); ``stop_at``: end after that step as a
    killed job would. Returns (rank 0; other ranks None) the world size, median tokens/s over steps after the
    first 5, MFU and the loss per step."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    device = (
        torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        if torch.cuda.is_available()
        else (torch.device("cpu"))
    )
    device, precision = distill._resolve_device(device, None)
    student, teacher = build_models(
        teacher_name, device, precision, random_weights, teacher_path, seed, conv_impl=conv_impl
    )
    cuda = device.type == "cuda"
    model = DistillationModel(student, teacher, compile=cuda, cuda_graphs=cuda and cuda_graphs and world == 1)
    rows = torch.randint(
        0,
        teacher.config.vocab_size,
        (steps * batch_size, seq_len),
        generator=torch.Generator().manual_seed(seed),
    )
    r = distill.recipe(teacher_name)
    config = TrainConfig(
        batch_size=batch_size,
        seq_len=seq_len,
        steps=steps,
        precision=precision,
        lrs={"recurrent": r.lr_recurrent, "rest": r.lr_rest},
        group_patterns={"recurrent": distill.RECURRENT_PATTERN},
        warmup_frac=distill.WARMUP_FRAC,
        strategy=strategy,
        seed=seed,
        out_dir=out_dir,
        checkpoint_every_steps=max(1, steps // 4) if out_dir else None,
        progress=False,
    )

    def stop(step: int, _history: Any) -> None:
        if step == stop_at:
            raise _Stopped

    try:
        history = train(model, PackedBatches(rows, batch_size), model_loss, config, callbacks=[stop])
    except _Stopped:
        return None
    if int(os.environ.get("RANK", "0")):
        return None
    speeds = [h["tokens_per_s"] for h in history.train[5:] or history.train]
    tokens_per_s = float(torch.tensor(speeds).median())
    flops = 6 * matmul_params(student) + 2 * matmul_params(teacher)
    return {
        "teacher": teacher_name,
        "world_size": world,
        "strategy": strategy if world > 1 else None,
        "cuda_graphs": model.cuda_graphs,
        "conv_impl": conv_impl,
        "batch_size": batch_size,
        "seq_len": seq_len,
        "steps": steps,
        "first_step": history.train[0]["step"],
        "tokens_per_s": round(tokens_per_s, 1),
        "mfu": tokens_per_s * flops / (world * PEAK_BF16_FLOPS) if cuda else None,
        "losses": [h["loss"] for h in history.train],
    }


class _Stopped(Exception):
    """Ends a :func:`train_speed` run at ``stop_at``, as a killed job would."""


def kl_chunk_timings(
    vocab: int, hidden: int, chunk_rows: Sequence[int], tokens: int = 16384
) -> list[dict[str, Any]]:
    """Median milliseconds (``triton.testing.do_bench``) of :func:`~hybridlib.losses.linear_forward_kl` forward and
    backward under bf16 autocast per ``chunk_rows`` (CUDA; float32 student hidden states and head, bf16 teacher's,
    random), with the peak memory: how the chunk length trades speed against memory."""
    import triton.testing

    h_s = torch.randn(tokens, hidden, device="cuda", requires_grad=True)
    w_s = (torch.randn(vocab, hidden, device="cuda") * 0.02).requires_grad_()
    h_t = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16)
    w_t = (torch.randn(vocab, hidden, device="cuda") * 0.02).bfloat16()
    rows = []
    for n in chunk_rows:

        def run(n: int = n) -> None:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = linear_forward_kl(h_s, w_s, h_t, w_t, chunk_rows=n)
            loss.backward()
            h_s.grad = w_s.grad = None

        torch.cuda.reset_peak_memory_stats()
        run()
        ms = triton.testing.do_bench(run, warmup=30, rep=200, return_mode="median")
        rows.append(
            {
                "vocab": vocab,
                "hidden": hidden,
                "tokens": tokens,
                "chunk_rows": n,
                "ms_forward_and_grads": round(ms, 2),
                "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1),
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.distill_step", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--teacher", required=True, choices=sorted(distill.RECIPES))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument(
        "--steps", type=int, default=10, help="timed steps per variant; 0: no timing, only --curve-steps"
    )
    parser.add_argument("--profile-steps", type=int, default=2)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument(
        "--layouts",
        nargs="+",
        choices=LAYOUT_NAMES,
        default=[BASELINE],
        help="students timed per variant, in one process (a later layout's warmup_s: its compile alone)",
    )
    parser.add_argument("--random-weights", action="store_true")
    parser.add_argument("--teacher-path")
    parser.add_argument("--fallback", choices=VARIANTS, help="variant to run in place of one that fails")
    parser.add_argument(
        "--curve-steps",
        type=int,
        default=0,
        help="also compare the loss curves of 'eager' and every variant that ran",
    )
    parser.add_argument(
        "--first-step",
        action="store_true",
        help="also score one step of 'eager' and every variant that ran with one evaluator (first_step_probe)",
    )
    parser.add_argument(
        "--grad-probe",
        nargs="+",
        choices=GRADIENT_VARIANTS,
        help="also compare these variants' gradients of one step with eager backbones' in float32",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="the random batches (and a random teacher's weights)"
    )
    parser.add_argument("--tag", default="", help="suffix of the JSON file name")
    parser.add_argument(
        "--results-dir",
        default="",
        help="folder for the JSON (default _build/bench); on a lent GPU machine one outside "
        "the checkout, whose untracked files the next call's working-tree copy deletes",
    )
    parser.add_argument(
        "--train-steps",
        type=int,
        default=0,
        help="instead: time the trainer itself (train_speed; works under torchrun)",
    )
    parser.add_argument("--strategy", choices=("ddp", "fsdp"), default="ddp")
    parser.add_argument(
        "--no-cuda-graphs",
        action="store_true",
        help="fast / regional / the trainer compiled, without CUDA graphs",
    )
    parser.add_argument(
        "--conv-impl",
        choices=CONV_IMPLS,
        default="torch",
        help="the GDN layers' short convolution in every variant but eager",
    )
    parser.add_argument(
        "--sdpa-layout",
        choices=SDPA_LAYOUTS,
        default="hf",
        help="the attention inputs' layout in the timed steps of every variant but eager",
    )
    parser.add_argument(
        "--sdpa-backend",
        choices=tuple(SDPA_BACKENDS),
        default="auto",
        help="SDPA's kernels (both models' attention) in the timed steps of every variant but eager",
    )
    parser.add_argument(
        "--gdn-projections",
        choices=PROJECTIONS,
        default=DEFAULT_PROJECTIONS,
        help="the GDN layers' q, k, v and gate projections in the timed steps of every variant but eager",
    )
    parser.add_argument(
        "--precision",
        choices=distill.PRECISIONS,
        help="timed steps and loss curves (default: bf16 on CUDA, fp32 on CPU)",
    )
    parser.add_argument(
        "--perturb-weights",
        type=float,
        default=0.0,
        help="loss curves from student weights perturbed by this relative amount (BF16_ROUNDING = 2^-9: the "
        "control for rounding-level differences)",
    )
    parser.add_argument(
        "--judge",
        nargs="+",
        metavar="JSON",
        help="instead: judge the fast path's equivalence (judge_fast_path) from these bench JSONs into "
        "step_profile_<device>_<tag>.json",
    )
    parser.add_argument(
        "--perturb-seed",
        type=int,
        help="the perturbation's random seed (default: --seed + 1); several at one --seed: the rounding null",
    )
    parser.add_argument("--out-dir", help="train_speed's checkpoint folder")
    parser.add_argument("--stop-at", type=int, help="train_speed ends after this step")
    args = parser.parse_args(argv)
    if args.judge:
        folder = Path(args.results_dir or OUT_DIR)
        verdict = judge_fast_path(args.judge)
        print(
            {"curves": verdict["curves"] and verdict["curves"]["outcome"], **verdict["first_step"]},
            flush=True,
        )
        path = folder / f"step_profile_cuda{'_' + args.tag if args.tag else ''}.json"
        write_json(path, verdict | {"provenance": collect("bench", vars(args))})
        return
    if args.steps < 0 or (
        args.steps == 0
        and not args.curve_steps
        and not args.train_steps
        and not args.first_step
        and not args.grad_probe
    ):
        parser.error(
            f"--steps must be >= 1, or 0 with --curve-steps >= 1, --first-step or --grad-probe; got {args.steps}"
        )
    if not 0.0 <= args.perturb_weights < 1.0 or (args.perturb_weights and not args.curve_steps):
        parser.error(
            f"--perturb-weights must be in [0, 1) and needs --curve-steps; got {args.perturb_weights}"
        )
    common = {
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "random_weights": args.random_weights,
        "teacher_path": args.teacher_path,
        "cuda_graphs": not args.no_cuda_graphs,
        "conv_impl": args.conv_impl,
        "seed": args.seed,
    }
    device = "cuda" if torch.cuda.is_available() else "cpu"
    precise = {"precision": args.precision} if args.precision else {}
    folder = Path(args.results_dir or OUT_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"step_profile_{device}{'_' + args.tag if args.tag else ''}.json"
    if args.train_steps:
        row = train_speed(
            args.teacher,
            steps=args.train_steps,
            strategy=args.strategy,
            out_dir=args.out_dir,
            stop_at=args.stop_at,
            **common,
        )
        if row is not None:
            print({k: v for k, v in row.items() if k != "losses"}, flush=True)
            write_json(path, {"rows": [row], "provenance": collect("bench", vars(args))})
        return

    probes: dict[str, Any] = {}  # first_step, grad_probe

    def save(rows: list[dict[str, Any]], curves: dict[str, Any] | None) -> None:
        out = {"rows": rows, "loss_curves": curves, "provenance": collect("bench", vars(args))}
        write_json(path, out | probes)

    if args.grad_probe:
        keep = ("batch_size", "seq_len", "random_weights", "teacher_path", "conv_impl", "seed")
        probe = gradient_probe(args.teacher, args.grad_probe, **{k: common[k] for k in keep}, **precise)
        probes["grad_probe"] = probe
        print({k: probe[k] for k in ("reference_loss", "loss", "by_kind")}, flush=True)
        save([], None)

    rows: list[dict[str, Any]] = []
    queue = [(v, layout) for v in args.variants for layout in args.layouts] if args.steps else []
    while queue:
        variant, layout = queue.pop(0)
        try:
            row = profile_step(
                args.teacher,
                steps=args.steps,
                variant=variant,
                profile_steps=args.profile_steps,
                layout=layout,
                sdpa_layout=args.sdpa_layout,
                sdpa_backend=args.sdpa_backend,
                gdn_projections=args.gdn_projections,
                **common,
                **precise,
            )
        except Exception as err:  # noqa: BLE001 - a failed variant is a result to report, not a crash
            row = {"teacher": args.teacher, "variant": variant, "error": f"{type(err).__name__}: {err}"}
            fallback = (args.fallback, layout)
            if args.fallback and args.fallback != variant and fallback not in queue:
                queue.insert(0, fallback)
        print({k: v for k, v in row.items() if k != "profile"}, flush=True)
        if row.get("profile"):
            print(f"  profile: {row['profile']}", flush=True)
        rows.append(row)
        save(rows, None)  # after every variant: a run cut short keeps what it measured
    ran = [r["variant"] for r in rows if "error" not in r] if args.steps else args.variants
    if args.first_step and ran:
        first = probes["first_step"] = first_step_probe(args.teacher, ran, **common, **precise)
        print({k: first[k] for k in ("own", "common")}, flush=True)
        save(rows, None)
    if args.curve_steps and ran:
        curves = loss_curves(
            args.teacher,
            list(dict.fromkeys(["eager", *ran])),
            steps=args.curve_steps,
            perturb=args.perturb_weights,
            perturb_seed=args.perturb_seed,
            **common,
            **precise,
        )
        print({k: v for k, v in curves.items() if k != "losses"}, flush=True)
        save(rows, curves)


if __name__ == "__main__":
    main()
