"""Lazy imports of flash-linear-attention's kernels (Triton cannot run on CPU, so nothing imports fla eagerly)."""

from __future__ import annotations

import functools
import importlib
from typing import Any


@functools.cache
def import_fla(module: str, *names: str) -> tuple[Any, ...]:
    """``names`` from fla's ``module``; an ImportError that says which fla version to install if it is missing."""
    try:
        loaded = importlib.import_module(module)
        return tuple(getattr(loaded, name) for name in names)
    except (ImportError, AttributeError) as err:
        raise ImportError(
            f"flash-linear-attention is not importable ({err}); install flash-linear-attention==0.6.0"
        ) from err
