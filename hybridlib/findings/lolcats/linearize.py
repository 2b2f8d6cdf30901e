"""Swap a HF Llama / Qwen3 / Gemma 3 model's attention for :class:`LinearizedAttention` (LoLCATs' conversion).

Variants: linear only (``window=0``), window + linear (``window=w``, sliding or ``terraced``), and
keep-some-layers-softmax (``softmax_layers``: those layers keep the teacher's module untouched; the
paper's 50% hybrid is :func:`alternate_layers`). Everything outside attention is untouched.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Sequence

from torch import nn
from transformers import PreTrainedModel

from hybridlib.models.linearized import LinearizedAttention, check_feature_map

SUPPORTED_MODEL_TYPES = ("llama", "qwen3", "gemma3_text")


def alternate_layers(n_layers: int) -> tuple[int, ...]:
    """Every other layer, starting at 0: the layers a 50% hybrid keeps as softmax attention."""
    if not isinstance(n_layers, int) or n_layers < 1:
        raise ValueError(f"n_layers must be a positive int, got {n_layers!r}")
    return tuple(range(0, n_layers, 2))


def linearize(
    teacher: PreTrainedModel,
    *,
    feature_map: str = "hedgehog",
    window: int = 0,
    terraced: bool = False,
    feature_dim: int | None = None,
    softmax_layers: Sequence[int] = (),
) -> PreTrainedModel:
    """A deep copy of ``teacher`` with every attention module outside ``softmax_layers`` linearised.

    The new feature maps and softmax weights are the only parameters that require gradients; the copy is
    in eval mode. See :class:`LinearizedAttention` for ``feature_map``, ``feature_dim``, ``window``, ``terraced``.
    """
    model_type = teacher.config.get_text_config().model_type
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"teacher model_type={model_type!r} is not supported; allowed: {SUPPORTED_MODEL_TYPES}"
        )
    check_feature_map(feature_map)
    layers = teacher.model.layers
    bad = [i for i in softmax_layers if not (isinstance(i, int) and 0 <= i < len(layers))]
    if bad:
        raise ValueError(f"softmax_layers {bad} are not layer indices in [0, {len(layers)})")
    student = copy.deepcopy(teacher).eval()
    student.requires_grad_(False)
    for idx, layer in enumerate(student.model.layers):
        if idx not in softmax_layers:
            layer.self_attn = LinearizedAttention(
                layer.self_attn,
                feature_map=feature_map,
                feature_dim=feature_dim,
                window=window,
                terraced=terraced,
            )
    return student


def linearized_modules(model: nn.Module) -> list[LinearizedAttention]:
    """The model's :class:`LinearizedAttention` modules in layer order (works through a PEFT wrapper)."""
    return [m for m in model.modules() if isinstance(m, LinearizedAttention)]


def attention_parameters(model: nn.Module) -> dict[str, nn.Parameter]:
    """The parameters attention transfer trains: feature maps and softmax weights, by name."""
    return {
        n: p
        for n, p in model.named_parameters()
        if ".phi_q." in n or ".phi_k." in n or n.endswith("window_factors")
    }


@contextlib.contextmanager
def softmax_attention(model: nn.Module) -> Iterator[None]:
    """Run every linearised layer as the teacher's softmax attention inside the block."""
    modules = linearized_modules(model)
    for m in modules:
        m.use_softmax = True
    try:
        yield
    finally:
        for m in modules:
            m.use_softmax = False
