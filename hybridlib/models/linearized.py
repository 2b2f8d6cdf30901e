"""LoLCATs' linearised attention as a drop-in replacement for a Hugging Face attention module (the LoLCATs chapter
linearises models with it, the efficiency chapter decodes them).

:class:`LinearizedAttention` keeps the teacher's module (``self.attn``: its q/k/v/o projections, Qwen3 / Gemma
q/k norms, RoPE, softmax scale) and adds trainable feature maps ``phi_q``, ``phi_k`` (applied per query
head after RoPE, keys repeated over GQA groups, as in the paper) and one softmax weight per head
(``gamma = sigmoid(window_factors)``, LoLCATs' ``window_factors`` initialised to 0). With ``window=0``
it is pure linear attention; with ``window=w`` it is window + linear attention (sliding, or terraced
blocks of ``w``), computed by :func:`kernels.window_linear_attention`.

``use_softmax=True`` runs the teacher's own module unchanged (attention transfer's teacher pass).
The call signature is HF's ``forward(hidden_states, position_embeddings, attention_mask, cache, **kw)
-> (output, None)``. The attention mask is ignored: feed unpadded (or right-padded) batches. Decoding
with a HF ``Cache`` keeps a :class:`kernels.WindowLinearState` per layer (:class:`WindowLinearCacheLayer`):
constant memory in the sequence length.
"""

from __future__ import annotations

import importlib

import torch
from torch import nn
from transformers.cache_utils import Cache, DynamicLayer

from kernels import (
    HedgehogFeatureMap,
    T2RFeatureMap,
    WindowLinearState,
    window_linear_attention,
    window_weight_share,
)

FEATURE_MAPS = {"hedgehog": HedgehogFeatureMap, "t2r": T2RFeatureMap}


def check_feature_map(name: str) -> str:
    """``name`` if it is a known feature map, else a ``ValueError`` listing them."""
    if name not in FEATURE_MAPS:
        raise ValueError(f"feature_map={name!r} is not allowed; choose one of {sorted(FEATURE_MAPS)}")
    return name


class WindowLinearCacheLayer(DynamicLayer):
    """A HF cache slot holding one linearised layer's decode state (window tokens + linear state)."""

    def __init__(self) -> None:
        super().__init__()
        self.state: WindowLinearState | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        raise NotImplementedError("a linearised layer keeps a WindowLinearState, not keys and values")

    def get_seq_length(self) -> int:
        return 0 if self.state is None else self.state.offset

    @property
    def nbytes(self) -> int:
        """Memory held by this layer's state."""
        return 0 if self.state is None else self.state.nbytes


class LinearizedAttention(nn.Module):
    """Window + linear attention reusing a teacher attention module ``attn`` (see the module docstring).

    Args:
        attn: the teacher's Llama / Qwen3 / Gemma 3 attention module (kept, not copied).
        feature_map: ``"hedgehog"`` or ``"t2r"``.
        feature_dim: width of ``xW`` (Hedgehog outputs twice that); default ``head_dim // 2`` for Hedgehog
            (the paper's 128 -> 64), ``head_dim`` for T2R.
        window: softmax window in tokens; 0 = linear attention only.
        terraced: terraced blocks of ``window`` instead of a sliding window.
    """

    def __init__(
        self,
        attn: nn.Module,
        *,
        feature_map: str = "hedgehog",
        feature_dim: int | None = None,
        window: int = 0,
        terraced: bool = False,
    ) -> None:
        super().__init__()
        check_feature_map(feature_map)
        if not isinstance(window, int) or window < 0:
            raise ValueError(f"window must be an int >= 0 (0 = linear only), got {window!r}")
        if terraced and window == 0:
            raise ValueError("terraced=True needs a window > 0")
        self.attn, self.layer_idx = attn, attn.layer_idx
        self.head_dim = attn.head_dim
        self.num_heads = attn.config.num_attention_heads
        self.window, self.terraced, self.feature_map = window, terraced, feature_map
        feature_dim = feature_dim or (self.head_dim // 2 if feature_map == "hedgehog" else self.head_dim)
        like = attn.q_proj.weight
        self.phi_q, self.phi_k = (
            FEATURE_MAPS[feature_map](self.head_dim, feature_dim, self.num_heads).to(
                device=like.device, dtype=like.dtype
            )
            for _ in range(2)
        )
        self.window_factors = nn.Parameter(torch.zeros(self.num_heads, device=like.device, dtype=like.dtype))
        self._rope = importlib.import_module(type(attn).__module__).apply_rotary_pos_emb
        self.use_softmax = False

    def extra_repr(self) -> str:
        return f"feature_map={self.feature_map!r}, window={self.window}, terraced={self.terraced}"

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, None]:
        cache = (
            cache if cache is not None else kwargs.pop("past_key_values", None)
        )  # transformers < 5.2x name
        if self.use_softmax:
            return self.attn(
                hidden_states,
                position_embeddings=position_embeddings,
                attention_mask=attention_mask,
                cache=cache,
                **kwargs,
            )
        slot = self._cache_slot(cache) if cache is not None else None
        y, state = self.heads(
            hidden_states,
            position_embeddings,
            state=slot.state if slot else None,
            output_state=slot is not None,
        )
        if slot is not None:
            slot.state = state
        return self.attn.o_proj(y), None

    def heads(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        state: WindowLinearState | None = None,
        output_state: bool = False,
    ) -> tuple[torch.Tensor, WindowLinearState | None]:
        """Attention output before ``o_proj``: hidden_states [B, T, d] -> y [B, T, H * head_dim] (and state)."""
        q, k, v = self.qkv(hidden_states, position_embeddings)
        y, state = window_linear_attention(
            q,
            k,
            v,
            self.phi_q(q),
            self.phi_k(k),
            window=self.window,
            terraced=self.terraced,
            softmax_weight=torch.sigmoid(self.window_factors),
            scale=self.attn.scaling,
            state=state,
            output_state=output_state,
        )
        return y.flatten(2), state

    def window_share(
        self, hidden_states: torch.Tensor, position_embeddings: tuple[torch.Tensor, torch.Tensor]
    ) -> torch.Tensor:
        """Share of each query's attention weight that the softmax window carries: [B, T, H] (all 0 without
        a window). See :func:`kernels.window_weight_share`."""
        q, k, _ = self.qkv(hidden_states, position_embeddings)
        if self.window == 0:
            return torch.zeros(q.shape[:3], device=q.device)
        return window_weight_share(
            q,
            k,
            self.phi_q(q),
            self.phi_k(k),
            window=self.window,
            terraced=self.terraced,
            softmax_weight=torch.sigmoid(self.window_factors),
            scale=self.attn.scaling,
        )

    def qkv(
        self, hidden_states: torch.Tensor, position_embeddings: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The teacher's queries and keys (normed if it norms them, after RoPE) and values, K/V repeated to
        every query head: three [B, T, H, head_dim]."""
        attn = self.attn
        shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        q, k, v = (
            proj(hidden_states).view(shape).transpose(1, 2)
            for proj in (attn.q_proj, attn.k_proj, attn.v_proj)
        )
        if hasattr(attn, "q_norm"):
            q, k = attn.q_norm(q), attn.k_norm(k)
        q, k = self._rope(q, k, *position_embeddings)
        groups = self.num_heads // k.shape[1]
        k, v = (x.repeat_interleave(groups, dim=1) for x in (k, v))
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def _cache_slot(self, cache: Cache) -> WindowLinearCacheLayer:
        if not isinstance(cache.layers[self.layer_idx], WindowLinearCacheLayer):
            cache.layers[self.layer_idx] = WindowLinearCacheLayer()
        return cache.layers[self.layer_idx]
