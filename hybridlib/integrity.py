"""Reading the artefact cache safely: a file that does not decode (truncated by a kill, a full disk) is either
named in one line with the command that rebuilds it, or moved aside and recomputed; weights are checked against
the sha256 digests stored beside them (``weights.sha256``, ``sha256sum -c`` format) when they are read."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from hybridlib.atomic import write_text

T = TypeVar("T")
DIGESTS = "weights.sha256"
MISSING: Any = object()  # what read_or_discard returns for a broken file


class BrokenCacheError(RuntimeError):
    """A cached file that cannot be read; the message names the file and the command that rebuilds it."""


def _reason(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:200]}" if text else type(err).__name__


def read(path: Path, decode: Callable[[Path], T], remedy: str) -> T:
    """``decode(path)``; any decoding failure becomes one :class:`BrokenCacheError` naming ``path`` and
    ``remedy`` (what rebuilds it, e.g. ``"rebuild it: <command>"``)."""
    try:
        return decode(path)
    except Exception as err:  # noqa: BLE001 - every decoder's own error class (json, pickle, torch, safetensors)
        raise BrokenCacheError(f"{path} is broken ({_reason(err)}); {remedy}") from err


def quarantine(path: Path) -> Path:
    """Move the file or folder ``path`` to ``<path>.broken`` (replacing an older one); returns the new path.
    A path another process moved already is left alone."""
    target = path.with_name(path.name + ".broken")
    if target.is_dir():
        shutil.rmtree(target)
    try:
        os.replace(path, target)
    except FileNotFoundError:
        pass
    return target


def read_or_discard(path: Path, decode: Callable[[Path], T]) -> T:
    """``decode(path)``, or :data:`MISSING` when it fails: the broken file is moved aside (:func:`quarantine`)
    with one warning naming it, so the caller computes the entry again."""
    try:
        return decode(path)
    except Exception as err:  # noqa: BLE001 - see read()
        aside = quarantine(path)
        warnings.warn(
            f"{path} is broken ({_reason(err)}); moved to {aside.name}, computing it again", stacklevel=2
        )
        return MISSING


@functools.lru_cache(maxsize=64)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    """sha256 of the file ``path`` (``size`` and ``mtime_ns`` key the cache, so a rewritten file is hashed again)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            h.update(chunk)
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 (hex) of ``path``, computed once per content version in this process."""
    stat = path.stat()
    return _sha256(str(path), stat.st_size, stat.st_mtime_ns)


def write_digests(folder: Path) -> None:
    """Store the sha256 of every ``*.safetensors`` in ``folder`` in ``folder/weights.sha256``."""
    lines = [f"{file_sha256(f)}  {f.name}\n" for f in sorted(Path(folder).glob("*.safetensors"))]
    write_text(Path(folder) / DIGESTS, "".join(lines))


def check_weights(folder: Path, remedy: str) -> None:
    """Raise :class:`BrokenCacheError` naming the first ``*.safetensors`` in ``folder`` that is missing, does not
    match its stored digest, or whose header does not fit its size (a truncated file); a folder without stored
    digests gets the header check only."""
    from safetensors import safe_open

    folder = Path(folder)
    stored = {}
    if (folder / DIGESTS).is_file():
        for line in (folder / DIGESTS).read_text(encoding="utf-8").splitlines():
            digest, _, name = line.partition("  ")
            stored[name] = digest
    for name in sorted(set(stored) | {f.name for f in folder.glob("*.safetensors")}):
        path = folder / name
        if not path.is_file():
            raise BrokenCacheError(f"{path} is missing (listed in {DIGESTS}); {remedy}")
        if name in stored and file_sha256(path) != stored[name]:
            raise BrokenCacheError(f"{path} is broken (it does not match its sha256 in {DIGESTS}); {remedy}")
        read(path, lambda p: safe_open(str(p), "pt").keys(), remedy)
