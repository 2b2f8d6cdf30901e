"""Progress bars: a widget in Jupyter, plain text lines when a run's output goes to a log file, none in a
notebook the book runner executes.

``python -m hybridlib.book run --log-output`` sets ``$HYBRIDLIB_PROGRESS_LOG``: the notebook widget's updates
never reach a log (they travel as widget messages, not output), so there the bars are text on stderr instead,
redrawn at most every ``LOG_INTERVAL_S`` seconds. A device log then shows how far a long cell has got.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

from tqdm.auto import tqdm as widget_tqdm
from tqdm.std import tqdm as text_tqdm

LOG_ENV = "HYBRIDLIB_PROGRESS_LOG"
OFF_ENV = "HYBRIDLIB_PROGRESS_OFF"
"""Set by ``python -m hybridlib.book run`` (without ``--log-output``): an executed page keeps no bar's residue or
widget state (the runner shows its own per-cell progress)."""
LOG_INTERVAL_S = 20.0


def progress_bar(iterable: Iterable[Any] | None = None, **kwargs: Any) -> text_tqdm:
    """A tqdm bar over ``iterable`` (keyword arguments as tqdm's): text on stderr if ``$HYBRIDLIB_PROGRESS_LOG``
    is set, disabled if ``$HYBRIDLIB_PROGRESS_OFF`` is, otherwise tqdm.auto's choice (the widget in a notebook)."""
    if os.environ.get(OFF_ENV):
        return text_tqdm(iterable, **{**kwargs, "disable": True})
    if os.environ.get(LOG_ENV):
        kwargs.setdefault("mininterval", LOG_INTERVAL_S)
        kwargs.setdefault("file", sys.stderr)
        kwargs.setdefault("ascii", True)
        kwargs.pop("dynamic_ncols", None)
        return text_tqdm(iterable, ncols=100, **kwargs)
    return widget_tqdm(iterable, **kwargs)
