"""Where a distillation step spends its time: teacher forward, student forward, KL, backward, optimizer.

``profile_step(teacher_name)`` converts the teacher into the standard periodic hybrid exactly as
:func:`hybridlib.findings.layout.distill.distill_layout` does, then times ``steps`` optimizer steps on random token ids
(``[batch_size, seq_len]``; speed does not depend on the text) phase by phase with CUDA events (wall clock on
CPU). It reports milliseconds per phase, tokens/s and MFU against
:data:`hybridlib.findings.layout.distill.PEAK_BF16_FLOPS` (``6 N_student + 2 N_teacher`` FLOPs a token, as the
distillation runs count them) and, on CUDA, a ``torch.profiler`` summary of ``profile_steps`` more steps
(:func:`kernel_summary`). Variants (:data:`VARIANTS`):

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
so shapes, not checkpoints, travel to a GPU machine. ``loss_curves(...)`` trains each variant on the same
batches and reports their losses step by step (the fast path must match the eager one within bf16 noise);
``kl_chunk_timings(...)`` times the fused KL alone per chunk length; ``first_step_probe(...)`` scores each
variant's first update with one evaluator and ``gradient_probe(...)`` sets each variant's one-step gradient against
eager backbones' in float32 (by parameter kind and by layer). ``sdpa_layout`` arranges the attention layers' SDPA
inputs (:data:`kernels.ops.SDPA_LAYOUTS`), ``sdpa_backend`` restricts SDPA to one kernel family
(:data:`kernels.ops.SDPA_BACKENDS`) and ``gdn_projections`` runs the GDN layers' q, k, v and gate
projections as one matmul, four, or one forward and four backward (:data:`kernels.layers.gated_deltanet.PROJECTIONS`)
in the timed steps.
``conv_impl`` picks the GDN layers' short convolution (:data:`kernels.ops.short_conv.IMPLS`: the compiled ``torch``
shifts, or fla's Triton kernel) for every variant but ``eager``, which stays the reference.

CLI (writes ``step_profile_<device>[_<tag>].json`` to ``--results-dir``, default ``data/results/layout_distillation``)::

    python -m hybridlib.findings.layout.bench --teacher smollm2-135m [--batch-size 32 --seq-len 512 --steps 10]
        [--variants eager fast] [--random-weights --teacher-path DIR] [--curve-steps 200] [--tag NAME]
        [--conv-impl fla] [--sdpa-layout contiguous] [--sdpa-backend flash] [--gdn-projections split_backward]
        [--first-step]
        [--grad-probe fused compiled]
    torchrun --nproc-per-node 2 -m hybridlib.findings.layout.bench --teacher smollm2-135m --train-steps 60
        [--strategy fsdp] [--out-dir DIR --stop-at K] ...   # the trainer on N GPUs (train_speed)
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel

from hybridlib.atomic import write_json
from hybridlib.convert import convert_to_hybrid
from hybridlib.findings.layout import distill
from hybridlib.findings.layout.spec import LAYOUTS
from hybridlib.layouts import BASELINE
from hybridlib.losses import forward_kl, linear_forward_kl
from hybridlib.models import load
from hybridlib.models.attention import use_sdpa_layout
from hybridlib.paths import results_dir
from hybridlib.provenance import collect
from hybridlib.train import PackedBatches, TrainConfig, compile_cache, train
from hybridlib.train.equivalence import judge_curves, rounding_check
from hybridlib.train.objectives import DistillationModel, model_loss
from kernels.layers import GatedDeltaNet
from kernels.layers.gated_deltanet import DEFAULT_PROJECTIONS, PROJECTIONS
from kernels.ops.attention import SDPA_BACKENDS, SDPA_LAYOUTS
from kernels.ops.short_conv import IMPLS as CONV_IMPLS

PHASES = ("teacher_forward", "student_forward", "kl", "backward", "optimizer")
VARIANTS = ("eager", "fused", "compiled", "fast", "regional")
# kernel families, first match wins (names lower-cased); inductor's kernels start with "triton_"
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


def random_teacher(teacher_path: str | Path, seed: int = 0) -> PreTrainedModel:
    """A float32 model with the architecture in ``teacher_path``/config.json and random weights (HF's init)."""
    config = AutoConfig.from_pretrained(teacher_path)
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()


class _Step:
    """One optimizer step of a variant, phase by phase: ``step(ids [B, T], phase) -> loss``."""

    def __init__(
        self,
        variant: str,
        student: PreTrainedModel,
        teacher: PreTrainedModel,
        device: torch.device,
        precision: str,
        example: torch.Tensor,
        lr: float,
        cuda_graphs: bool = True,
    ):
        if variant not in VARIANTS:
            raise ValueError(f"variant={variant!r} is not allowed; choose one of {VARIANTS}")
        self.variant, self.student, self.device, self.precision = variant, student, device, precision
        cuda = device.type == "cuda"
        self.teacher_compiled = cuda and variant in ("compiled", "fast", "regional")
        if variant == "eager":
            self.teacher, self.teacher_compiled = distill._compiled_teacher(
                teacher, example, device, precision
            )
        else:
            self.model = DistillationModel(
                student,
                teacher,
                compile=self.teacher_compiled,
                cuda_graphs=cuda and cuda_graphs and variant in ("fast", "regional"),
                regional=variant == "regional",
            )
        fused = device.type == "cuda" and variant != "eager"
        self.optimizer = torch.optim.AdamW(student.parameters(), lr=lr, fused=fused or None)

    def __call__(self, ids: torch.Tensor, phase: Callable) -> torch.Tensor:
        with distill._autocast(self.device, self.precision):
            if self.variant == "eager":
                with phase("teacher_forward"), torch.no_grad():
                    target = self.teacher(input_ids=ids, use_cache=False).logits
                with phase("student_forward"):
                    logits = self.student(input_ids=ids, use_cache=False).logits
                with phase("kl"):
                    loss = forward_kl(logits, target)
            else:
                loss = self.model.loss(ids, phase)
        with phase("backward"):
            loss.backward()
        with phase("optimizer"):
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()


def _models(
    teacher_name: str,
    device: torch.device,
    precision: str,
    random_weights: bool,
    teacher_path: str | Path | None,
    seed: int,
    layout_name: str = BASELINE,
    conv_impl: str = "torch",
    sdpa_layout: str = "hf",
    gdn_projections: str = DEFAULT_PROJECTIONS,
    sdpa_backend: str = "auto",
) -> tuple[PreTrainedModel, PreTrainedModel]:
    """(student of ``layout_name`` on ``device``, train mode, its GDN layers' short convolutions on
    ``conv_impl`` and their input projections ``gdn_projections`` (:data:`kernels.layers.gated_deltanet.PROJECTIONS`);
    teacher on ``device`` in the run's weight dtype, frozen); both models' attention layers on
    SDPA with inputs in ``sdpa_layout`` (:data:`kernels.ops.SDPA_LAYOUTS`; ``"hf"``: the models' own) on
    ``sdpa_backend`` (:data:`kernels.ops.SDPA_BACKENDS`; ``"auto"``: SDPA's choice)."""
    if conv_impl not in CONV_IMPLS:
        raise ValueError(f"conv_impl={conv_impl!r} is not allowed; choose one of {CONV_IMPLS}")
    if conv_impl != "torch" and device.type != "cuda":
        raise ValueError(f"conv_impl={conv_impl!r} needs CUDA (Triton kernels), got device {device.type}")
    if sdpa_layout not in SDPA_LAYOUTS:
        raise ValueError(f"sdpa_layout={sdpa_layout!r} is not allowed; choose one of {SDPA_LAYOUTS}")
    if sdpa_backend not in SDPA_BACKENDS:
        raise ValueError(
            f"sdpa_backend={sdpa_backend!r} is not allowed; choose one of {tuple(SDPA_BACKENDS)}"
        )
    if gdn_projections not in PROJECTIONS:
        raise ValueError(f"gdn_projections={gdn_projections!r} is not allowed; choose one of {PROJECTIONS}")
    if random_weights:
        if teacher_path is None:
            raise ValueError(
                "random_weights=True needs teacher_path, a folder holding the teacher's config.json"
            )
        teacher = random_teacher(teacher_path, seed)
    else:
        teacher, _ = load(teacher_name, path=teacher_path)
    layout = distill._layout(teacher, layout_name, distill.recipe(teacher_name).fa_fraction)
    student = convert_to_hybrid(teacher, layout, "gdn", seed=distill.MODEL_SEED).to(device).train()
    for module in student.modules():
        if isinstance(module, GatedDeltaNet):
            module.conv_impl, module.projections = conv_impl, gdn_projections
    teacher = teacher.to(device, torch.bfloat16 if precision == "bf16" else torch.float32).eval()
    if (sdpa_layout, sdpa_backend) != ("hf", "auto"):
        for model in (student, teacher):
            use_sdpa_layout(model, sdpa_layout, sdpa_backend)
    return student, teacher.requires_grad_(False)


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
    layout costs to compile once the teacher and the kernels are. ``cuda_graphs=False``: ``fast`` and ``regional``
    without CUDA graphs (compiled only). ``sdpa_layout``, ``sdpa_backend`` and ``gdn_projections``: the attention
    inputs' layout, SDPA's kernels and the GDN layers' input projections in every variant but ``eager``
    (:func:`_models`)."""
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
    student, teacher = _models(
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
    step = _Step(variant, student, teacher, device, precision, batches[0], lr=1e-5, cuda_graphs=cuda_graphs)
    start = time.perf_counter()
    warm = _Timer(device)
    for ids in batches[:warmup]:
        step(ids, warm.phase)
    warm.ms()
    warmup_s = time.perf_counter() - start
    timer = _Timer(device)
    for ids in batches[warmup:]:
        step(ids, timer.phase)
    ms = timer.ms()
    step_ms = sum(ms.values())
    tokens_per_s = batch_size * seq_len / (step_ms / 1e3)
    flops = 6 * distill.matmul_params(student) + 2 * distill.matmul_params(teacher)
    cuda = device.type == "cuda"
    profile = (
        kernel_summary(lambda i: step(batches[i % len(batches)], _Timer(device).phase), profile_steps)
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
        "tokens_per_s": round(tokens_per_s, 1),
        "flops_per_token": float(flops),
        "mfu": tokens_per_s * flops / distill.PEAK_BF16_FLOPS if cuda else None,
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


def curve_batches(vocab_size: int, n: int, batch_size: int, seq_len: int, seed: int) -> list[torch.Tensor]:
    """The ``n`` random token-id batches ``[batch_size, seq_len]`` (CPU) that every variant of a run trains on."""
    generator = torch.Generator().manual_seed(seed + 1)
    return [torch.randint(0, vocab_size, (batch_size, seq_len), generator=generator) for _ in range(n)]


def loss_curves(
    teacher_name: str,
    variants: Sequence[str],
    *,
    steps: int = 200,
    batch_size: int = 32,
    seq_len: int = 512,
    lr: float = 2e-4,
    seed: int = 0,
    random_weights: bool = False,
    teacher_path: str | Path | None = None,
    device: str | torch.device | None = None,
    precision: str | None = None,
    cuda_graphs: bool = True,
    conv_impl: str = "torch",
    perturb: float = 0.0,
    perturb_seed: int | None = None,
    on_step: Callable[[str, PreTrainedModel, PreTrainedModel, int], None] | None = None,
) -> dict[str, Any]:
    """Train a fresh student with each of ``variants`` for ``steps`` AdamW steps (constant ``lr``) on the same
    random batches (:func:`curve_batches`); returns the loss per step per variant and the largest relative gap to
    the first. ``perturb`` > 0 multiplies every student weight by ``1 + u``, ``u`` uniform in ``[-perturb,
    perturb]`` (drawn with ``perturb_seed``; None: ``seed + 1``) before the first step: at 2^-9
    (:data:`BF16_ROUNDING`), a difference of bf16 rounding, whose spread by step 200 says how far this training
    carries rounding-level differences (a control for the fast path's curve; several ``perturb_seed`` at one batch
    seed: the rounding null of :func:`judge_fast_path`). ``on_step(variant, student, teacher, updates)`` runs
    before the first step and after each."""
    if not 0.0 <= perturb < 1.0:
        raise ValueError(f"perturb must be in [0, 1), got {perturb}")
    device, precision = distill._resolve_device(device, precision)
    curves: dict[str, list[float]] = {}
    for variant in variants:
        conv = "torch" if variant == "eager" else conv_impl
        student, teacher = _models(
            teacher_name, device, precision, random_weights, teacher_path, seed, conv_impl=conv
        )
        batches = curve_batches(teacher.config.vocab_size, steps, batch_size, seq_len, seed)
        if perturb:
            gen = torch.Generator(device=device).manual_seed(
                seed + 1 if perturb_seed is None else perturb_seed
            )
            with torch.no_grad():
                for param in student.parameters():
                    noise = torch.rand(param.shape, generator=gen, device=device, dtype=param.dtype)
                    param.mul_(1 + perturb * (2 * noise - 1))
        step = _Step(
            variant,
            student,
            teacher,
            device,
            precision,
            batches[0].to(device),
            lr=lr,
            cuda_graphs=cuda_graphs,
        )
        losses = []
        for done, ids in enumerate(batches):
            if on_step is not None:
                on_step(variant, student, teacher, done)
            losses.append(step(ids.to(device), _Timer(device).phase))
        if on_step is not None:
            on_step(variant, student, teacher, len(batches))
        curves[variant] = [float(x) for x in torch.stack(losses).cpu()]
        del student, teacher, step
    first = torch.tensor(curves[variants[0]])
    gaps = {v: float(((torch.tensor(c) - first).abs() / first.abs()).max()) for v, c in curves.items()}
    return {
        "teacher": teacher_name,
        "steps": steps,
        "batch_size": batch_size,
        "seq_len": seq_len,
        "lr": lr,
        "seed": seed,
        "precision": precision,
        "cuda_graphs": cuda_graphs,
        "conv_impl": conv_impl,
        "perturb": perturb,
        "perturb_seed": perturb_seed,
        "losses": curves,
        "max_rel_gap_to_first": gaps,
    }


#: the relative rounding error of bf16 (8 significant bits): ``loss_curves``' perturbation of the control
BF16_ROUNDING = 2.0**-9

#: a student's parameters by kind, the first pattern (``re.search`` on the parameter's name) that matches
PARAM_KINDS = (
    ("embedding", r"embed_tokens\."),
    ("lm_head", r"^lm_head\."),
    ("GDN gates (A_log, dt_bias, a, b)", r"\.gdn\.(A_log|dt_bias|a_proj\.|b_proj\.)"),
    ("GDN convolutions", r"\.gdn\.\w+_conv\."),
    ("GDN projections (q, k, v, g, o)", r"\.gdn\.[qkvgo]_proj\."),
    ("GDN output norm", r"\.gdn\.o_norm\."),
    ("attention", r"\.self_attn\."),
    ("MLP", r"\.mlp\."),
    ("norms", r"norm\.weight$"),
)


def param_kind(name: str) -> str:
    """The kind (:data:`PARAM_KINDS`) of the student parameter ``name``."""
    for kind, pattern in PARAM_KINDS:
        if re.search(pattern, name):
            return kind
    raise ValueError(f"parameter {name!r} matches no kind of PARAM_KINDS {[k for k, _ in PARAM_KINDS]}")


def first_step_probe(teacher_name: str, variants: Sequence[str], **setup: Any) -> dict[str, Any]:
    """Two steps of :func:`loss_curves` (``setup``: its keyword arguments) for each variant, ``eager`` first
    (added if missing), every variant's weights after its first update scored by one evaluator: eager's forward
    and :func:`~hybridlib.losses.forward_kl` on the second batch, in the run's precision. ``own``: the loss the
    variant's own step reports there (its curve's step 1); ``common``: the evaluator's - equal ``own`` and
    ``common`` gaps put a difference in the update, not in how a variant scores. ``swap[v][kind]``: the
    evaluator's loss of eager's post-step weights with that kind (:data:`PARAM_KINDS`) taken from variant ``v``
    (which kinds carry ``v``'s gap). ``agreement[v]``: ``params_rel_median``, the median over tensors of
    ``|w_v - w_eager| / |w_eager|`` after the update, and ``loss_gap``, ``common[v] - common["eager"]`` (the inputs of
    :func:`hybridlib.train.equivalence.rounding_check`). ``update[v][kind]``: ``rel_diff``, the norm of ``v``'s
    update (post - pre weights) minus eager's over the norm of eager's, and ``sign_flips``, the fraction of
    elements whose update has the other sign. ``kinds``: parameters per kind. Plus ``loss_curves``' settings."""
    variants = list(dict.fromkeys(["eager", *variants]))
    weights: dict[str, list[dict[str, torch.Tensor]]] = {}
    judge: dict[str, PreTrainedModel] = {}

    def keep(variant: str, student: PreTrainedModel, teacher: PreTrainedModel, updates: int) -> None:
        if updates <= 1:
            weights.setdefault(variant, []).append(
                {n: p.detach().clone() for n, p in student.named_parameters()}
            )
        if variant == "eager" and updates == 0:
            judge.update(student=student, teacher=teacher)

    curves = loss_curves(teacher_name, variants, steps=2, on_step=keep, **setup)
    pre, eager = weights["eager"]
    for variant, (start, _) in weights.items():
        if any(not torch.equal(start[n], w) for n, w in pre.items()):
            raise RuntimeError(f"variant {variant!r} starts from other weights than eager's")
    evaluator, teacher = judge["student"], judge["teacher"]
    device, precision = next(evaluator.parameters()).device, curves["precision"]
    ids = curve_batches(
        teacher.config.vocab_size, 2, curves["batch_size"], curves["seq_len"], curves["seed"]
    )[1]
    ids = ids.to(device)
    with torch.no_grad(), distill._autocast(device, precision):
        target = teacher(input_ids=ids, use_cache=False).logits

    def score(state: dict[str, torch.Tensor]) -> float:
        with torch.no_grad():
            for name, param in evaluator.named_parameters():
                param.copy_(state[name])
            with distill._autocast(device, precision):
                return float(forward_kl(evaluator(input_ids=ids, use_cache=False).logits, target))

    kinds: dict[str, list[str]] = {}
    for name in pre:
        kinds.setdefault(param_kind(name), []).append(name)
    update: dict[str, dict[str, dict[str, float]]] = {}
    for variant in variants[1:]:
        post = weights[variant][1]
        update[variant] = {}
        for kind, names in kinds.items():
            d_e = torch.cat([(eager[n] - pre[n]).flatten().float() for n in names])
            d_v = torch.cat([(post[n] - pre[n]).flatten().float() for n in names])
            moved = (d_e != 0) | (d_v != 0)
            update[variant][kind] = {
                "rel_diff": float((d_v - d_e).norm() / d_e.norm().clamp(min=1e-30)),
                "sign_flips": float((d_v.sign() != d_e.sign())[moved].float().mean()) if moved.any() else 0.0,
            }
    swap = {
        v: {kind: score(eager | {n: weights[v][1][n] for n in names}) for kind, names in kinds.items()}
        for v in variants[1:]
    }
    settings = {k: v for k, v in curves.items() if k not in ("losses", "max_rel_gap_to_first", "steps")}
    common = {v: score(weights[v][1]) for v in variants}
    agreement = {
        v: {
            "params_rel_median": float(
                torch.tensor(
                    [
                        float((weights[v][1][n] - w).norm() / w.norm().clamp(min=1e-30))
                        for n, w in eager.items()
                    ]
                ).median()
            ),
            "loss_gap": common[v] - common["eager"],
        }
        for v in variants[1:]
    }
    return settings | {
        "own": {v: losses[1] for v, losses in curves["losses"].items()},
        "common": common,
        "agreement": agreement,
        "swap": swap,
        "update": update,
        "kinds": {kind: sum(pre[n].numel() for n in names) for kind, names in kinds.items()},
    }


def judge_fast_path(files: Sequence[str | Path]) -> dict[str, Any]:
    """The fast path's equivalence checks (:mod:`hybridlib.train.equivalence`) over bench JSONs: every file's
    ``loss_curves`` give each batch seed's ``fast`` curve and its ``eager`` repeats (one per file holding one), a
    ``first_step`` probe in float32 the rounding check of each variant. Eager curves from weights perturbed at
    bf16's rounding (:data:`BF16_ROUNDING`, one ``perturb_seed`` each) form a second null: the fast run against
    eager runs that differ from eager by a rounding-level change, as its own rounding differs
    (``curves_vs_rounding``). All curves must share one setting (teacher, steps, batch, sequence length, learning
    rate, precision, convolution).

    Returns ``curves`` (:func:`~hybridlib.train.equivalence.judge_curves` against eager's repeats, or None without
    curves), ``curves_vs_rounding`` (against the perturbed runs, or None without >= 2 at every fast seed),
    ``losses`` (per seed the ``fast`` curve, the ``eager`` repeats and the ``perturbed`` runs), ``first_step``
    per precision (``own``, ``common``, ``agreement``, ``update``; in float32 also ``rounding`` per variant) and
    ``files`` (each file's name, commit, device and date). A file holding an earlier result of this function
    contributes its runs (``losses``, ``first_step``, ``files``) as if its bench JSONs were given again."""
    fast: dict[int, list[float]] = {}
    eager: dict[int, list[list[float]]] = {}
    perturbed: dict[int, list[list[float]]] = {}
    setting: dict[str, Any] | None = None
    first: dict[str, dict[str, Any]] = {}
    names = []
    for path in sorted(Path(f) for f in files):
        data = json.loads(path.read_text())
        if "losses" in data:  # an earlier judgement: its runs' curves, first-step probes and files again
            if setting is not None and data["setting"] != setting:
                raise ValueError(f"{path.name}: curves of another setting {data['setting']} than {setting}")
            setting = data["setting"]
            for key, runs in data["losses"].items():
                seed = int(key)
                if seed in fast:
                    raise ValueError(f"{path.name}: a second fast curve for seed {seed}")
                fast[seed] = runs["fast"]
                eager.setdefault(seed, []).extend(runs["eager"])
                perturbed.setdefault(seed, []).extend(runs.get("perturbed", []))
            first |= data["first_step"]
            names.extend(data["files"])
            continue
        prov = data.get("provenance") or {}
        names.append({"file": path.name} | {k: prov.get(k) for k in ("git_commit", "device", "date_utc")})
        if (probe := data.get("first_step")) is not None:
            entry = {k: probe[k] for k in ("own", "common", "agreement", "update")}
            if probe["precision"] == "fp32":
                entry["rounding"] = {v: rounding_check(**a) for v, a in probe["agreement"].items()}
            first[probe["precision"]] = entry
        if (curves := data.get("loss_curves")) is None:
            continue
        this = {
            k: curves[k]
            for k in ("teacher", "steps", "batch_size", "seq_len", "lr", "precision", "conv_impl")
        }
        if setting is not None and this != setting:
            raise ValueError(f"{path.name}: curves of another setting {this} than the first file's {setting}")
        setting = this
        seed = curves["seed"]
        if curves.get("perturb"):
            if curves["perturb"] != BF16_ROUNDING or set(curves["losses"]) != {"eager"}:
                raise ValueError(
                    f"{path.name}: a perturbed run must be eager alone from weights perturbed at BF16_ROUNDING"
                    f" = {BF16_ROUNDING}, got {sorted(curves['losses'])} at {curves['perturb']}"
                )
            perturbed.setdefault(seed, []).append(curves["losses"]["eager"])
            continue
        if "fast" in curves["losses"]:
            if seed in fast:
                raise ValueError(f"{path.name}: a second fast curve for seed {seed}")
            fast[seed] = curves["losses"]["fast"]
        if "eager" in curves["losses"]:
            eager.setdefault(seed, []).append(curves["losses"]["eager"])
    judged = judge_curves(fast, eager) if fast else None
    covered = fast and all(len(perturbed.get(s, [])) >= 2 for s in fast)
    vs_rounding = judge_curves(fast, {s: perturbed[s] for s in fast}) if covered else None
    losses = {
        s: {"fast": fast[s], "eager": eager.get(s, []), "perturbed": perturbed.get(s, [])}
        for s in sorted(fast)
    }
    return {
        "curves": judged,
        "curves_vs_rounding": vs_rounding,
        "setting": setting,
        "losses": losses,
        "first_step": first,
        "files": names,
    }


#: the variants :func:`gradient_probe` can compare (one backward each, so no CUDA graphs)
GRADIENT_VARIANTS = ("eager", "fused", "compiled")


def _gradients(
    variant: str, student: PreTrainedModel, teacher: PreTrainedModel, ids: torch.Tensor, precision: str
) -> tuple[float, dict[str, torch.Tensor]]:
    """The loss of one forward of ``variant`` (:data:`GRADIENT_VARIANTS`: ``eager``'s logits and
    :func:`~hybridlib.losses.forward_kl`, or a :class:`DistillationModel` with eager or compiled backbones) on
    ``ids`` [B, T], and every student parameter's gradient (float32, by name)."""
    device = ids.device
    with distill._autocast(device, precision):
        if variant == "eager":
            with torch.no_grad():
                target = teacher(input_ids=ids, use_cache=False).logits
            loss = forward_kl(student(input_ids=ids, use_cache=False).logits, target)
        else:
            loss = DistillationModel(student, teacher, compile=variant == "compiled")(ids)
    loss.backward()
    return float(loss.detach()), {n: p.grad.detach().float() for n, p in student.named_parameters()}


def gradient_distance(g: torch.Tensor, reference: torch.Tensor) -> dict[str, float]:
    """How far a flat gradient ``g`` is from ``reference`` (same shape): ``rel_err`` ``|g - ref| / |ref|``, ``cos``
    (their cosine) and ``signs_flipped`` (the fraction of ``reference``'s non-zero components whose sign ``g``
    does not share), computed in float64."""
    a, b = g.double(), reference.double()
    nonzero = b != 0
    return {
        "rel_err": float((a - b).norm() / b.norm().clamp(min=1e-30)),
        "cos": float(torch.nn.functional.cosine_similarity(a, b, dim=0)),
        "signs_flipped": float((a.sign() != b.sign())[nonzero].double().mean()) if nonzero.any() else 0.0,
    }


def gradient_probe(
    teacher_name: str,
    variants: Sequence[str] = ("fused", "compiled"),
    *,
    batch_size: int = 32,
    seq_len: int = 512,
    seed: int = 0,
    random_weights: bool = False,
    teacher_path: str | Path | None = None,
    device: str | torch.device | None = None,
    precision: str | None = None,
    conv_impl: str = "torch",
) -> dict[str, Any]:
    """Each variant's gradient of one step, from the same weights on the first batch of :func:`curve_batches`,
    against the reference: ``fused`` (eager backbones) in float32. Where a bf16 variant's gradient is further
    from it than eager backbones' bf16 gradient, that variant loses precision; the kinds (:data:`PARAM_KINDS`)
    and layers where it does say where.

    Returns the settings, ``loss[v]`` and ``reference_loss``; ``overall[v]`` and ``by_kind[v][kind]``: the
    :func:`gradient_distance` of all parameters and of the kind's; ``by_layer[v]``: the rel_err of each decoder
    layer's parameters, in layer order; ``mixers``: each layer's mixer class. AdamW's first update is nearly
    each component's sign (``g / (|g| + eps)``), so ``signs_flipped`` says how far the first updates part."""
    bad = [v for v in variants if v not in GRADIENT_VARIANTS]
    if bad or not variants:
        raise ValueError(f"variants={list(variants)!r}: choose one or more of {GRADIENT_VARIANTS}")
    device, precision = distill._resolve_device(device, precision)
    setup = dict(random_weights=random_weights, teacher_path=teacher_path, seed=seed)
    ids: torch.Tensor | None = None
    grads: dict[str, dict[str, torch.Tensor]] = {}
    losses: dict[str, float] = {}
    mixers: list[str] = []
    for variant, run_precision in [("reference", "fp32"), *((v, precision) for v in variants)]:
        student, teacher = _models(teacher_name, device, run_precision, conv_impl=conv_impl, **setup)
        if ids is None:
            ids = curve_batches(teacher.config.vocab_size, 1, batch_size, seq_len, seed)[0].to(device)
            mixers = [type(layer.self_attn).__name__ for layer in student.model.layers]
        kind = "fused" if variant == "reference" else variant
        losses[variant], grads[variant] = _gradients(kind, student, teacher, ids, run_precision)
        del student, teacher
    ref = grads.pop("reference")

    def compare(g: dict[str, torch.Tensor], names: list[str]) -> dict[str, float]:
        return gradient_distance(*(torch.cat([x[n].flatten() for n in names]) for x in (g, ref)))

    kinds: dict[str, list[str]] = {}
    layers: dict[int, list[str]] = {}
    for name in ref:
        kinds.setdefault(param_kind(name), []).append(name)
        if (match := re.search(r"\.layers\.(\d+)\.", name)) is not None:
            layers.setdefault(int(match.group(1)), []).append(name)
    return {
        "teacher": teacher_name,
        "batch_size": batch_size,
        "seq_len": seq_len,
        "seed": seed,
        "precision": precision,
        "conv_impl": conv_impl,
        "reference_loss": losses.pop("reference"),
        "loss": losses,
        "overall": {v: compare(g, list(ref)) for v, g in grads.items()},
        "by_kind": {v: {k: compare(g, names) for k, names in kinds.items()} for v, g in grads.items()},
        "by_layer": {v: [compare(g, layers[i])["rel_err"] for i in sorted(layers)] for v, g in grads.items()},
        "mixers": mixers,
    }


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
    student, teacher = _models(
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
    flops = 6 * distill.matmul_params(student) + 2 * distill.matmul_params(teacher)
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
        "mfu": tokens_per_s * flops / (world * distill.PEAK_BF16_FLOPS) if cuda else None,
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
        prog="python -m hybridlib.findings.layout.bench", description=__doc__.split("\n\n")[0]
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
        choices=LAYOUTS,
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
        help="folder for the JSON (default data/results/layout_distillation); on a lent GPU machine one outside "
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
        folder = Path(args.results_dir) if args.results_dir else results_dir("layout_distillation")
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
    folder = Path(args.results_dir) if args.results_dir else results_dir("layout_distillation")
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
