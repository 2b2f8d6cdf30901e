"""Learnable feature maps for linear attention (LoLCATs): tiny per-head parametrised functions.

Both take x [B, T, H, head_dim] (queries or keys, after RoPE) and use a per-head weight
W [num_heads, head_dim, feature_dim]; ``num_heads=1`` shares one W across all heads. W starts
identity-like (ones on the diagonal of each head's [head_dim, feature_dim] block), so at
initialisation ``xW`` keeps the leading ``min(head_dim, feature_dim)`` coordinates of x.
"""

from __future__ import annotations

import torch
from torch import nn

from kernels.ops._checks import check_positive_int, check_tensor


class _PerHeadProjection(nn.Module):
    """x [B, T, H, head_dim] -> x W_h [B, T, H, feature_dim] with one W per head (or one shared)."""

    def __init__(self, head_dim: int, feature_dim: int, num_heads: int = 1) -> None:
        super().__init__()
        for name, value in (("head_dim", head_dim), ("feature_dim", feature_dim), ("num_heads", num_heads)):
            check_positive_int(name, value)
        self.head_dim, self.feature_dim, self.num_heads = head_dim, feature_dim, num_heads
        self.weight = nn.Parameter(torch.empty(num_heads, head_dim, feature_dim))
        with torch.no_grad():
            self.weight.copy_(torch.eye(head_dim, feature_dim).expand(num_heads, -1, -1))

    def project(self, x: torch.Tensor) -> torch.Tensor:
        check_tensor("x", x, 4, "[B, T, H, head_dim]")
        if x.shape[-1] != self.head_dim or self.num_heads not in (1, x.shape[2]):
            raise ValueError(
                f"x must have shape [B, T, H, head_dim={self.head_dim}] with H == num_heads="
                f"{self.num_heads} (or num_heads=1), got {tuple(x.shape)}"
            )
        return torch.einsum("bthd,hdf->bthf", x, self.weight.to(x.dtype))

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, feature_dim={self.feature_dim}, num_heads={self.num_heads}"


class HedgehogFeatureMap(_PerHeadProjection):
    """Hedgehog: ``[softmax(xW), softmax(-xW)]`` along features; output [B, T, H, 2*feature_dim]."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xw = self.project(x)
        return torch.cat([xw.softmax(-1), (-xw).softmax(-1)], dim=-1)


class T2RFeatureMap(_PerHeadProjection):
    """T2R: ``relu(xW + b)`` with a per-head bias b [num_heads, feature_dim] (zeros at init);
    output [B, T, H, feature_dim]."""

    def __init__(self, head_dim: int, feature_dim: int, num_heads: int = 1) -> None:
        super().__init__(head_dim, feature_dim, num_heads)
        self.bias = nn.Parameter(torch.zeros(num_heads, feature_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.project(x) + self.bias.to(x.dtype))
