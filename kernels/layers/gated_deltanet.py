"""Gated DeltaNet token mixer (Yang et al., 2025) as used by the paper's hybrid students.

Shapes: B batch, T time, D hidden, H heads, K = head_k_dim, V = head_v_dim.

    q, k, v = SiLU(causal depthwise conv(x W_q | x W_k | x W_v))    [B, T, H, K|K|V]
    g_t     = -exp(A_log) * softplus(x W_a + dt_bias)                [B, T, H]  log-decay, a_t = exp(g_t)
    beta_t  = sigmoid(x W_b)                                         [B, T, H]  write strength
    S_t     = a_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T  (q, k L2-normalised per head)
    o_t     = K^-1/2 S_t^T q_t ;  y = (RMSNorm(o_t) * SiLU(x W_g)) W_o   (norm per head)

The recurrence itself is ``kernels.gated_delta_rule`` (fla's convention). Decoding token by token with a
:class:`GatedDeltaNetState` gives the same outputs as one parallel call over the whole sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from kernels.ops._checks import check_choice
from kernels.ops.gated_delta_rule import gated_delta_rule
from kernels.ops.short_conv import IMPLS as CONV_IMPLS
from kernels.ops.short_conv import causal_conv_silu
from kernels.ops.split_linear import split_linear

#: how the q, k, v and gate projections run: "fused" as one matmul over their concatenated weights (its backward
#: concatenates their output gradients), "separate" as four (their input gradients are summed instead),
#: "split_backward" as one forward and four backward (:func:`kernels.ops.split_linear.split_linear`)
PROJECTIONS = ("fused", "separate", "split_backward")
#: the layers' default: the fastest step on the H200 (80.5 and 80.7 ms against the fused projections' 81.8 and 81.8,
#: one machine; its step profiles are in git history before e2aab2e); the outputs are the fused layer's
DEFAULT_PROJECTIONS = "split_backward"


@dataclass
class GatedDeltaNetState:
    """Decoding state of one layer, updated in place by :meth:`GatedDeltaNet.forward`.

    ``conv_*``: the last ``conv_size - 1`` inputs of each short convolution, [B, channels, conv_size - 1];
    ``recurrent``: the delta-rule state S, [B, H, K, V] (float32). ``None`` before the first call.
    """

    conv_q: torch.Tensor | None = None
    conv_k: torch.Tensor | None = None
    conv_v: torch.Tensor | None = None
    recurrent: torch.Tensor | None = None


class ShortConvolution(nn.Conv1d):
    """Causal depthwise 1-D convolution over time followed by SiLU
    (:func:`kernels.ops.short_conv.causal_conv_silu`, its ``torch`` path); input and output [B, T, C]."""

    def __init__(self, channels: int, kernel_size: int):
        super().__init__(channels, channels, kernel_size, groups=channels, bias=False)

    def forward(self, x: torch.Tensor, past: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Return (SiLU(conv(x)) [B, T, C], the new past [B, C, kernel_size - 1])."""
        return causal_conv_silu(x, self.weight[:, 0], past)


class GatedRMSNorm(nn.Module):
    """RMSNorm over the last axis, then times SiLU(gate): ``x / rms(x) * weight * silu(gate)``."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        dtype, f32 = x.dtype, torch.promote_types(x.dtype, torch.float32)
        x = x.to(f32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.to(f32)
        return (x * F.silu(gate.to(f32))).to(dtype)


class GatedDeltaNet(nn.Module):
    """Gated DeltaNet mixer: ``forward(hidden_states [B, T, D]) -> [B, T, D]``.

    Parameters are fla's: ``q_proj, k_proj, v_proj, a_proj, b_proj, g_proj, o_proj``, short convolutions
    ``q_conv, k_conv, v_conv``, ``A_log`` [H], ``dt_bias`` [H], per-head ``o_norm``. Default initialisation
    follows fla / Mamba-2 (``A`` uniform in [1, 16], ``dt`` log-uniform in [1e-3, 1e-1] and
    ``dt_bias = softplus^-1(dt)``); a converter overwrites it from a teacher. ``conv_impl``: the short
    convolutions' path without a cache (:data:`kernels.ops.short_conv.IMPLS`; "fla" on CUDA only) and
    ``projections`` (:data:`PROJECTIONS`) are attributes that may be set after construction; neither changes the
    parameters or, beyond rounding, the outputs.
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        head_k_dim: int,
        head_v_dim: int,
        conv_size: int = 4,
        norm_eps: float = 1e-6,
        conv_impl: str = "torch",
        projections: str = DEFAULT_PROJECTIONS,
    ):
        super().__init__()
        check_choice("conv_impl", conv_impl, CONV_IMPLS)
        check_choice("projections", projections, PROJECTIONS)
        self.conv_impl, self.projections = conv_impl, projections
        for name, value in [
            ("hidden_size", hidden_size),
            ("num_heads", num_heads),
            ("head_k_dim", head_k_dim),
            ("head_v_dim", head_v_dim),
            ("conv_size", conv_size),
        ]:
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.hidden_size, self.num_heads = hidden_size, num_heads
        self.head_k_dim, self.head_v_dim, self.conv_size = head_k_dim, head_v_dim, conv_size
        key_dim, value_dim = num_heads * head_k_dim, num_heads * head_v_dim

        self.q_proj = nn.Linear(hidden_size, key_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, key_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, value_dim, bias=False)
        self.a_proj = nn.Linear(hidden_size, num_heads, bias=False)
        self.b_proj = nn.Linear(hidden_size, num_heads, bias=False)
        self.g_proj = nn.Linear(hidden_size, value_dim, bias=False)
        self.q_conv = ShortConvolution(key_dim, conv_size)
        self.k_conv = ShortConvolution(key_dim, conv_size)
        self.v_conv = ShortConvolution(value_dim, conv_size)
        self.A_log = nn.Parameter(torch.empty(num_heads).uniform_(1, 16).log())
        self.dt_bias = nn.Parameter(inverse_softplus(sample_dt(num_heads)))
        self.o_norm = GatedRMSNorm(head_v_dim, eps=norm_eps)
        self.o_proj = nn.Linear(value_dim, hidden_size, bias=False)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        cache: GatedDeltaNetState | None = None,
    ) -> torch.Tensor:
        """Mix ``hidden_states`` [B, T, D] causally; returns [B, T, D].

        ``attention_mask`` [B, T] (1 = token, 0 = padding) zeroes padded inputs, which is exact for left
        padding (the state stays zero until the first token). ``cache`` carries the state across calls.
        """
        B, T, _ = hidden_states.shape
        if attention_mask is not None:
            if attention_mask.dim() != 2:
                raise ValueError(
                    f"attention_mask must be a [B, T] padding mask, got shape {tuple(attention_mask.shape)}"
                )
            hidden_states = hidden_states * attention_mask[:, -T:, None].to(hidden_states.dtype)
        state = cache if cache is not None else GatedDeltaNetState()
        # "fused": the four wide input projections as one matmul, the two per-head ones (a, b) as another: with all
        # six in one output (2 * num_heads columns past a multiple of 128) the compiled backward's concatenation of
        # their gradients took 1.8x as long on the H200 (profiles before e2aab2e); the three convolutions as one
        # (per-conv pasts when decoding; with fla's kernel one per projection, so that q, k, v come out
        # contiguous, as fla's gated delta rule needs them: a split of one output would be copied). "separate": four
        # matmuls, each output its convolution's own input (no split forward, no concatenation backward);
        # "split_backward": the fused forward with the separate backward
        projs = (self.q_proj, self.k_proj, self.v_proj, self.g_proj)
        qkv_dims = [p.out_features for p in projs[:3]]
        if self.projections == "separate":
            *pieces, gate = (F.linear(hidden_states, p.weight) for p in projs)
        elif self.projections == "split_backward":
            *pieces, gate = split_linear(hidden_states, [p.weight for p in projs])
        else:
            x = F.linear(hidden_states, torch.cat([p.weight for p in projs]))
            qkv, gate = x.split([sum(qkv_dims), self.g_proj.out_features], dim=-1)
            pieces = qkv.split(qkv_dims, dim=-1)
        a, b = F.linear(hidden_states, torch.cat([self.a_proj.weight, self.b_proj.weight])).split(
            self.num_heads, dim=-1
        )
        convs = (self.q_conv, self.k_conv, self.v_conv)
        if cache is None and (self.conv_impl != "torch" or self.projections != "fused"):
            q, k, v = (
                causal_conv_silu(x_, c.weight[:, 0], impl=self.conv_impl)[0] for x_, c in zip(pieces, convs)
            )
        elif cache is None:
            weight = torch.cat([c.weight[:, 0] for c in convs])
            q, k, v = causal_conv_silu(qkv, weight)[0].split(qkv_dims, dim=-1)
        else:
            q, k, v = pieces
            q, state.conv_q = self.q_conv(q, state.conv_q)
            k, state.conv_k = self.k_conv(k, state.conv_k)
            v, state.conv_v = self.v_conv(v, state.conv_v)
        q = q.reshape(B, T, self.num_heads, self.head_k_dim)
        k = k.reshape(B, T, self.num_heads, self.head_k_dim)
        v = v.reshape(B, T, self.num_heads, self.head_v_dim)

        f32 = torch.promote_types(hidden_states.dtype, torch.float32)  # gates in float32 at least
        g = -self.A_log.to(f32).exp() * F.softplus(a.to(f32) + self.dt_bias.to(f32))
        beta = b.to(f32).sigmoid()
        o, state.recurrent = gated_delta_rule(
            q,
            k,
            v,
            g,
            beta,
            initial_state=state.recurrent,
            output_final_state=cache is not None,
            use_qk_l2norm=True,
        )

        gate = gate.reshape(B, T, self.num_heads, self.head_v_dim)
        o = self.o_norm(o.to(gate.dtype), gate)
        return self.o_proj(o.reshape(B, T, -1))


def sample_dt(
    n: int, dt_min: float = 1e-3, dt_max: float = 1e-1, generator: torch.Generator | None = None
) -> torch.Tensor:
    """``n`` time steps, log-uniform in [dt_min, dt_max] (Mamba-2 / fla initialisation), float32."""
    u = torch.rand(n, generator=generator)
    return torch.exp(
        u * (torch.log(torch.tensor(dt_max)) - torch.log(torch.tensor(dt_min)))
        + torch.log(torch.tensor(dt_min))
    )


def inverse_softplus(x: torch.Tensor) -> torch.Tensor:
    """``y`` with ``softplus(y) == x`` for ``x > 0``: ``log(expm1(x)) = x + log(-expm1(-x))``."""
    return x + torch.log(-torch.expm1(-x))
