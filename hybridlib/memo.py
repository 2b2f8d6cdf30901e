"""Experiment results computed once: a return value kept in the artefact cache under a hash of the settings
that produced it and of the code it depends on (by default the whole library's,
:func:`hybridlib.provenance.code_digest`).

A re-run of a chapter, or one resumed after its process was killed, skips every experiment that already
finished. Values are pickled (the cache is local and never committed) and written atomically; a pickle that
does not load is moved aside with a warning naming it and computed again.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from hybridlib.atomic import atomic_path
from hybridlib.integrity import MISSING, read_or_discard
from hybridlib.paths import cache_dir
from hybridlib.provenance import code_digest

T = TypeVar("T")


def memo_key(settings: Mapping[str, Any], code: str | None = None) -> str:
    """20 hex digits over ``settings`` (JSON, keys sorted) and ``code`` (default: the library's code digest)."""
    payload = json.dumps(
        [dict(settings), code_digest() if code is None else code],
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def memoized(
    kind: str, settings: Mapping[str, Any], compute: Callable[[], T], *, code: str | None = None
) -> T:
    """``compute()``, or the value an earlier call with the same ``kind`` and ``settings`` stored in
    ``cache_dir("memo", kind)`` under the same code: ``code`` names the sources the result depends on (e.g.
    :func:`hybridlib.provenance.source_digest` of its modules; default: the whole library's). ``settings`` must
    name everything else it depends on."""
    path = cache_dir("memo", kind) / f"{memo_key(settings, code)}.pkl"
    if path.is_file():
        value = read_or_discard(path, lambda p: pickle.loads(p.read_bytes()))
        if value is not MISSING:
            return value
    value = compute()
    with atomic_path(path) as tmp:
        tmp.write_bytes(pickle.dumps(value))
    return value
