"""Manifests under ``data/manifests`` and sha256 verification of the files they describe."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from hybridlib.paths import REPO_ROOT

MANIFEST_DIR = REPO_ROOT / "data" / "manifests"
PREPARE_COMMAND = "`make data` (or `python -m hybridlib.data.sources`)"


class ChecksumError(RuntimeError):
    """A data file is missing or its sha256 differs from the committed manifest."""


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def load_manifest(name: str) -> dict[str, Any]:
    """Read ``data/manifests/<name>.json``."""
    path = MANIFEST_DIR / f"{name}.json"
    if not path.is_file():
        raise ChecksumError(f"manifest {path} is missing; restore it from git (`git checkout -- {path}`)")
    return json.loads(path.read_text(encoding="utf-8"))


def verify_file(path: str | os.PathLike, expected_sha256: str, fix: str) -> Path:
    """Return ``path`` if its sha256 matches, else raise ``ChecksumError`` naming the file and ``fix``."""
    path = Path(path)
    if not path.is_file():
        raise ChecksumError(f"{path} is missing; {fix}")
    actual = sha256_file(path)
    if actual != expected_sha256:
        raise ChecksumError(
            f"{path} is corrupt or a different version: sha256 {actual} != manifest {expected_sha256}; {fix}"
        )
    return path
