"""``torch.compile``'s caches kept across processes and machines.

Inductor caches what it compiles under ``/tmp`` of one machine; a fresh GPU machine compiles every graph again
(185-450 s a process for the distillation step). :func:`activate`, called before the first compile of a
process, loads the artefacts an earlier process saved (``torch.compiler.load_cache_artifacts``: FX graphs,
AOT autograd graphs, Triton kernels, autotuning results) from one file per torch version and GPU model under the
artefact cache, and saves this process's artefacts there when it exits (``save_cache_artifacts``). The file
travels with the cache folder (``$HYBRIDLIB_CACHE/compile/``), like the memo. ``HYBRIDLIB_COMPILE_CACHE=0``
turns it off (a cold compile on purpose).
"""

from __future__ import annotations

import atexit
import os
import re
import time
from pathlib import Path
from typing import Any

import torch

from hybridlib import atomic, paths

#: environment switch: "0" leaves inductor's caches to the machine
ENV = "HYBRIDLIB_COMPILE_CACHE"
_state: dict[str, Any] = {}


def artifact_path(root: Path | None = None) -> Path:
    """The artefact file for this torch version and device: ``<root>/compile/torch-<version>-<device>.bin``
    (``root``: the artefact cache)."""
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    key = re.sub(r"[^A-Za-z0-9.]+", "_", f"torch-{torch.__version__}-{device}")
    return (root if root is not None else paths.cache_dir()) / "compile" / f"{key}.bin"


def enabled() -> bool:
    """False when :data:`ENV` is ``0``."""
    return os.environ.get(ENV, "1") != "0"


def activate(path: Path | None = None) -> dict[str, Any]:
    """Once per process: load the saved artefacts (if any) and save this process's at exit. Returns (and
    keeps, for :func:`status`) ``{"path", "restored", "restored_bytes", "load_s"}``; later calls return the same."""
    if _state:
        return status()
    target = path if path is not None else artifact_path()
    _state.update(path=str(target), restored=False, restored_bytes=0, load_s=0.0, enabled=enabled())
    if not enabled():
        return status()
    if target.is_file():
        start = time.perf_counter()
        data = target.read_bytes()
        try:
            torch.compiler.load_cache_artifacts(data)
            _state.update(restored=True, restored_bytes=len(data))
        except Exception as err:  # an artefact of another build: compile from scratch, overwrite it at exit
            _state["load_error"] = f"{type(err).__name__}: {err}"
        _state["load_s"] = round(time.perf_counter() - start, 2)
    atexit.register(save)
    return status()


def save() -> int:
    """Write this process's compile artefacts to the :func:`activate` path (atomically); returns their bytes
    (0: nothing compiled, nothing written)."""
    if not _state or not _state["enabled"]:
        return 0
    got = torch.compiler.save_cache_artifacts()
    if not got or not got[0]:
        return 0
    data = got[0]
    target = Path(_state["path"])
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic.atomic_path(target) as tmp:
        tmp.write_bytes(data)
    _state["saved_bytes"] = len(data)
    return len(data)


def status() -> dict[str, Any]:
    """What :func:`activate` did in this process (empty before it)."""
    return dict(_state)
