"""Probes of the distillation step's fast path against eager: loss curves on the same batches
(:func:`loss_curves`), each variant's first update scored by one evaluator (:func:`first_step_probe`) and its
one-step gradient against eager backbones' in float32 (:func:`gradient_probe`, by parameter kind and layer).
The CLI is :mod:`benchmarks.distill_step`'s (``--curve-steps``, ``--first-step``, ``--grad-probe``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel

from benchmarks.distill_setup import Step, Timer, build_models, curve_batches
from hybridlib.losses import forward_kl
from hybridlib.train import distill
from hybridlib.train.objectives import DistillationModel


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
    (:data:`~hybridlib.train.equivalence.BF16_ROUNDING`), a difference of bf16 rounding, whose spread by step 200
    says how far this training carries rounding-level differences (a control for the fast path's curve; several
    ``perturb_seed`` at one batch seed: the rounding null of :func:`~hybridlib.train.equivalence.judge_fast_path`).
    ``on_step(variant, student, teacher, updates)`` runs before the first step and after each."""
    if not 0.0 <= perturb < 1.0:
        raise ValueError(f"perturb must be in [0, 1), got {perturb}")
    device, precision = distill._resolve_device(device, precision)
    curves: dict[str, list[float]] = {}
    for variant in variants:
        conv = "torch" if variant == "eager" else conv_impl
        student, teacher = build_models(
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
        step = Step(
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
            losses.append(step(ids.to(device), Timer(device).phase))
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
        student, teacher = build_models(teacher_name, device, run_precision, conv_impl=conv_impl, **setup)
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
