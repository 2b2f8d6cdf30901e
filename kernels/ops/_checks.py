"""Input validation and one-time warnings shared by the token-mixer ops."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence

import torch

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_warned: set[str] = set()


def warn_once(key: str, message: str) -> None:
    """Emit ``message`` as a UserWarning the first time ``key`` is seen in this process."""
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, UserWarning, stacklevel=3)


def check_choice(name: str, value: object, allowed: Iterable[object]) -> None:
    """Raise ValueError unless ``value`` is one of ``allowed``."""
    allowed = tuple(allowed)
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not supported; allowed values: {allowed}")


def check_positive_int(name: str, value: object, *, allow_zero: bool = False) -> None:
    """Raise ValueError unless ``value`` is an int > 0 (or >= 0 with ``allow_zero``)."""
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")


def check_tensor(name: str, x: object, ndim: int, layout: str) -> torch.Tensor:
    """Raise unless ``x`` is a floating tensor with ``ndim`` dims (``layout`` names them in the message)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape {layout}, got {type(x).__name__}")
    if x.dim() != ndim:
        raise ValueError(f"{name} must have shape {layout} ({ndim} dims), got {tuple(x.shape)}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} has dtype {x.dtype}; allowed dtypes: {FLOAT_DTYPES}")
    return x


def check_same_device(**tensors: torch.Tensor | None) -> torch.device:
    """Raise unless every given tensor lives on one device; return it."""
    devices = {name: t.device for name, t in tensors.items() if t is not None}
    if len(set(devices.values())) > 1:
        raise ValueError(f"all inputs must be on one device, got {devices}")
    return next(iter(devices.values()))


def check_dims(name: str, shape: Sequence[int], expected: Sequence[int | None], layout: str) -> None:
    """Raise unless ``shape`` matches ``expected`` (None = any size); ``layout`` names the dims."""
    if len(shape) != len(expected) or any(e is not None and s != e for s, e in zip(shape, expected)):
        want = tuple("*" if e is None else e for e in expected)
        raise ValueError(f"{name} must have shape {layout} = {want}, got {tuple(shape)}")


def compute_dtype(*tensors: torch.Tensor) -> torch.dtype:
    """float64 if any input is float64, else float32: the precision the pure-PyTorch paths compute in."""
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32
