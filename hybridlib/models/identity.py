"""A loaded model's content identity: a hash of its folder's config and weight files (or of its hub id and
revision), the key under which students, measurements and memoized results of that model are cached."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from transformers import PreTrainedModel


def teacher_identity(model: PreTrainedModel) -> str:
    """Content hash of a loaded teacher: its folder's config and weight files (or its hub id and revision)."""
    source = Path(str(model.name_or_path))
    if not source.is_dir():
        return hashlib.sha256(
            f"{model.name_or_path}@{getattr(model.config, '_commit_hash', None)}".encode()
        ).hexdigest()[:20]
    files = sorted(source.glob("*.json")) + sorted(source.glob("*.safetensors"))
    return _files_hash(tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files))


@functools.lru_cache(maxsize=8)
def _files_hash(files: tuple[tuple[str, int, int], ...]) -> str:
    """sha256 over the names and bytes of ``files`` ((path, size, mtime) tuples, so edits miss the cache)."""
    h = hashlib.sha256()
    for name, _, _ in files:
        h.update(Path(name).name.encode())
        with open(name, "rb") as f:
            while chunk := f.read(1 << 24):
                h.update(chunk)
    return h.hexdigest()[:20]
