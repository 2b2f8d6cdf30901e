"""Run a Hugging Face model's full-attention layers through :func:`kernels.ops.causal_sdpa` in a chosen layout and
on a chosen SDPA backend.

``use_sdpa_layout(model, layout, backend)`` registers one attention function per layout of
:data:`kernels.ops.SDPA_LAYOUTS` and backend of :data:`kernels.ops.SDPA_BACKENDS` with transformers'
``AttentionInterface`` (as ``"sdpa_<layout>[_<backend>]"``, with SDPA's mask function) and switches ``model`` to it;
``"hf"`` on ``"auto"`` is transformers' own ``"sdpa"``. The function computes the
causal, unmasked, full-length case (training and prefill without padding) and hands every other call (a mask,
one query token, dropout, a position bias, a KV cache longer than the queries) to transformers' SDPA function,
so the model computes the same attention in every layout.
"""

from __future__ import annotations

from functools import partial

import torch
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from kernels.ops._checks import check_choice
from kernels.ops.attention import SDPA_BACKENDS, SDPA_LAYOUTS, causal_sdpa, sdpa_backend


def _attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    *,
    layout: str,
    backend: str,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature: q ``[B, H, T, D]``, k, v ``[B, Hkv, S, D]`` ->
    (``[B, T, H, D]`` contiguous, no weights)."""
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    plain = attention_mask is None and dropout == 0.0 and kwargs.get("position_bias") is None
    if not (plain and causal and query.shape[2] > 1 and key.shape[2] == query.shape[2]):
        with sdpa_backend(backend):
            return sdpa_attention_forward(
                module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs
            )
    return causal_sdpa(query, key, value, layout, scaling, backend).transpose(1, 2).contiguous(), None


def use_sdpa_layout(model: PreTrainedModel, layout: str, backend: str = "auto") -> PreTrainedModel:
    """``model`` (in place) with its attention layers on causal SDPA with inputs in ``layout``
    (:data:`kernels.ops.SDPA_LAYOUTS`), SDPA restricted to ``backend`` (:data:`kernels.ops.SDPA_BACKENDS`)."""
    if layout not in SDPA_LAYOUTS:
        raise ValueError(f"layout={layout!r} is not allowed; choose one of {SDPA_LAYOUTS}")
    check_choice("backend", backend, SDPA_BACKENDS)
    name = "sdpa" if layout == "hf" else f"sdpa_{layout}"
    name += "" if backend == "auto" else f"_{backend}"
    if name not in AttentionInterface._global_mapping and name != "sdpa":
        AttentionInterface.register(name, partial(_attention, layout=layout, backend=backend))
        AttentionMaskInterface.register(name, sdpa_mask)
    model.set_attn_implementation(name)
    return model
