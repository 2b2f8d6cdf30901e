"""Hybrid layouts: which decoder layers keep full softmax attention (FA) and which become recurrent.

A layout is the sorted tuple of FA layer indices (0-based). The paper (Finding 7) fixes the FA budget
(25%: 9 of Qwen3-4B's 36 layers, 10 of Granite's 40) and varies only the positions. Every generator below
splits ``n_layers`` into ``n_full`` near-equal blocks, block ``i`` = layers
``[floor(i * n / k), floor((i + 1) * n / k) - 1]``, so the periodic layouts stay defined when ``n_full``
does not divide ``n_layers`` (SmolLM2's 30 layers with 8 FA layers: blocks of 3,4,4,4,3,4,4,4).

- ``standard_periodic``: FA closes each block (the industry default, e.g. ``3, 7, ..., 35`` for 36/9).
- ``reverse_periodic``: FA opens each block (``0, 4, ..., 32``).
- ``sandwich``: all FA at both ends; ``ceil(k/2)`` at the start, ``floor(k/2)`` at the end (the odd one
  goes to the start, so layer 0 is FA; the paper does not state its rounding).
- ``interleaved_sandwich``: ``round(2k/3)`` FA layers at the ends (split as in ``sandwich``; at least two
  when ``k >= 2``), the rest spread periodically over the middle: middle layer ``j`` of ``m`` sits at the
  centre of the ``j``-th of ``m`` equal slices of the middle span.
- ``endpoint_spread``: first and last layer plus evenly spread between: ``round(i * (n - 1) / (k - 1))``.
- ``periodic_first_at_0`` (not in the paper): ``standard_periodic`` with its first FA layer moved to
  layer 0 - a single change that isolates "layer 0 is FA".

The four paper alternatives share only layer 0 (checked in ``tests/test_layouts.py`` for 36/9 and 40/10).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

BASELINE = "standard_periodic"
#: the label suffix of a student trained on text capped to fewer unique tokens (``text_cap``): the repetition control
CAPPED_SUFFIX = "+capped"
#: the label suffix of a student trained at ``lr_check_factor`` x the peak learning rates (the budget curve's
#: learning-rate check)
LOW_LR_SUFFIX = "+low_lr"
#: the label suffix of a sliding-window student (``DistillRun.label``: the layout, then ``+`` and its mixer)
SWA_SUFFIX = "+swa"
SWA_ARM = BASELINE + SWA_SUFFIX  #: the sliding-window control's label: the baseline layout with SWA mixers


def _block_bounds(n_layers: int, n_full: int) -> list[tuple[int, int]]:
    """Inclusive (first, last) layer of each of ``n_full`` near-equal blocks."""
    return [((i * n_layers) // n_full, ((i + 1) * n_layers) // n_full - 1) for i in range(n_full)]


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


def _standard_periodic(n: int, k: int) -> list[int]:
    return [last for _, last in _block_bounds(n, k)]


def _reverse_periodic(n: int, k: int) -> list[int]:
    return [first for first, _ in _block_bounds(n, k)]


def _ends(n: int, n_ends: int) -> list[int]:
    n_start = math.ceil(n_ends / 2)
    return list(range(n_start)) + list(range(n - (n_ends - n_start), n))


def _sandwich(n: int, k: int) -> list[int]:
    return _ends(n, k)


def _interleaved_sandwich(n: int, k: int) -> list[int]:
    n_ends = min(k, max(_round_half_up(2 * k / 3), 2 if k >= 2 else 1))
    ends = _ends(n, n_ends)
    n_start = math.ceil(n_ends / 2)
    lo, span, m = n_start, n - n_ends, k - n_ends
    middle = [lo + math.floor((j + 0.5) * span / m) for j in range(m)]
    return ends + middle


def _endpoint_spread(n: int, k: int) -> list[int]:
    if k < 2:
        raise ValueError(f"n_full={k} is too small for 'endpoint_spread'; it needs n_full >= 2")
    return [_round_half_up(i * (n - 1) / (k - 1)) for i in range(k)]


def _periodic_first_at_0(n: int, k: int) -> list[int]:
    return [0] + _standard_periodic(n, k)[1:]


_GENERATORS: dict[str, Callable[[int, int], list[int]]] = {
    "standard_periodic": _standard_periodic,
    "reverse_periodic": _reverse_periodic,
    "sandwich": _sandwich,
    "interleaved_sandwich": _interleaved_sandwich,
    "endpoint_spread": _endpoint_spread,
    "periodic_first_at_0": _periodic_first_at_0,
}
LAYOUT_NAMES: tuple[str, ...] = tuple(_GENERATORS)
PAPER_LAYOUTS: tuple[str, ...] = LAYOUT_NAMES[:5]


def _check_fa_layers(n_layers: int, fa_layers: Iterable[int], n_full: int | None) -> tuple[int, ...]:
    if not isinstance(n_layers, int) or n_layers < 1:
        raise ValueError(f"n_layers must be a positive integer, got {n_layers!r}")
    layers = list(fa_layers)
    bad = [i for i in layers if not isinstance(i, int) or not 0 <= i < n_layers]
    if bad:
        raise ValueError(f"FA layer indices {bad} are out of range; allowed: integers 0..{n_layers - 1}")
    dupes = sorted({i for i in layers if layers.count(i) > 1})
    if dupes:
        raise ValueError(f"FA layer indices {dupes} are listed more than once")
    if n_full is not None and len(layers) != n_full:
        raise ValueError(f"the layout has {len(layers)} FA layers but the budget n_full={n_full}")
    return tuple(sorted(layers))


def make_layout(name: str, n_layers: int, n_full: int) -> tuple[int, ...]:
    """Sorted FA layer indices of the layout ``name`` for ``n_layers`` layers with ``n_full`` FA layers."""
    if name not in _GENERATORS:
        raise ValueError(f"unknown layout name={name!r}; allowed: {', '.join(LAYOUT_NAMES)}")
    if not isinstance(n_full, int) or not 1 <= n_full <= n_layers:
        raise ValueError(f"n_full={n_full!r} must be an integer in 1..n_layers={n_layers}")
    return _check_fa_layers(n_layers, _GENERATORS[name](n_layers, n_full), n_full)


@dataclass(frozen=True)
class Layout:
    """A validated layout: ``n_layers`` decoder layers, ``fa_layers`` sorted FA indices, an optional name."""

    n_layers: int
    fa_layers: tuple[int, ...]
    name: str = "custom"

    def __post_init__(self) -> None:
        object.__setattr__(self, "fa_layers", _check_fa_layers(self.n_layers, self.fa_layers, None))

    @classmethod
    def from_name(cls, name: str, n_layers: int, n_full: int) -> Layout:
        return cls(n_layers, make_layout(name, n_layers, n_full), name)

    @classmethod
    def from_list(cls, n_layers: int, fa_layers: Iterable[int], n_full: int | None = None) -> Layout:
        """An explicit layout; ``n_full`` (optional) checks the FA budget."""
        return cls(n_layers, _check_fa_layers(n_layers, fa_layers, n_full))

    @property
    def recurrent_layers(self) -> tuple[int, ...]:
        return tuple(i for i in range(self.n_layers) if i not in self.fa_layers)

    def is_full_attention(self, layer_idx: int) -> bool:
        return layer_idx in self.fa_layers

    def pattern(self) -> str:
        """One character a layer, ``A`` for FA and ``.`` for recurrent, e.g. ``...A...A``."""
        return "".join("A" if i in self.fa_layers else "." for i in range(self.n_layers))
