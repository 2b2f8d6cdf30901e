"""Provenance of a result: preset, parameters, library versions, git commit, device, wall time."""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import importlib.metadata
import inspect
import os
import platform
import subprocess
import time
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from hybridlib.paths import REPO_ROOT

_PACKAGES = ("torch", "transformers", "flash-linear-attention", "datasets", "peft", "numpy", "jupyter-book")
_CODE_PATHS = (
    "hybridlib",
    "kernels",
    "pyproject.toml",
)  # executed notebooks and results do not make code dirty
_START = time.monotonic()


def git_commit() -> str:
    """``$HYBRIDLIB_GIT_COMMIT`` when the caller set it (a tree copied to a GPU machine, whose ``.git`` may be
    stale), else ``HEAD``'s short hash with ``+dirty`` when tracked code changed; ``unknown`` outside a checkout."""
    if os.environ.get("HYBRIDLIB_GIT_COMMIT"):
        return os.environ["HYBRIDLIB_GIT_COMMIT"]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", *_CODE_PATHS],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


@functools.cache
def code_digest() -> str:
    """Hash of the library's Python sources (``hybridlib``, ``kernels``) and the data manifests: what a result
    computed here depends on besides its settings (one value per process)."""
    h = hashlib.sha256()
    files = [p for d in ("hybridlib", "kernels") for p in (REPO_ROOT / d).rglob("*.py")]
    files += list((REPO_ROOT / "data" / "manifests").glob("*.json"))
    for path in sorted(files):
        h.update(str(path.relative_to(REPO_ROOT)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def source_digest(modules: Iterable[ModuleType], length: int = 16) -> str:
    """Hash (``length`` hex digits) of the given modules' source text: the code a cached artefact depends on."""
    h = hashlib.sha256()
    for module in modules:
        h.update(inspect.getsource(module).encode())
    return h.hexdigest()[:length]


def device_name() -> str:
    """The CUDA device's name when one is visible, else the CPU's model and core count."""
    try:
        import torch

        if torch.cuda.is_available():
            return f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
        threads = torch.get_num_threads()
    except ImportError:
        threads = None
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return f"CPU {cpu} ({threads} torch threads)"


def versions() -> dict[str, str]:
    """Installed versions of the packages a result depends on (absent ones omitted)."""
    found = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def collect(preset: str | None = None, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything needed to say where a number came from; ``wall_time_s`` counts from this module's import."""
    return {
        "preset": preset,
        "params": params,
        "git_commit": git_commit(),
        "device": device_name(),
        "versions": versions(),
        "date_utc": utc_now(),
        "wall_time_s": round(time.monotonic() - _START, 1),
    }
