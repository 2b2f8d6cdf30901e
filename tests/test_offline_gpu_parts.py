"""tools/offline_gpu/parts.sh: every upload call it prints fits the lent machine's 64 MiB (its part, the working
tree, and for the last call the frozen trees it carries), or it refuses before cutting anything. Run on a scratch
checkout with a sparse working tree and payload (zeros; sizes as at c0dcbe9: the call that carried the frozen tree
was refused at 66 MiB)."""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
LIMIT = 64 * MIB


def sparse(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        f.truncate(size)


def checkout(tmp_path: Path, tree_mib: int, frozen_mib: int) -> Path:
    """A git checkout holding parts.sh, ``tree_mib`` MiB of untracked working tree, a 32 MiB payload and
    ``frozen_mib`` MiB of frozen tree."""
    repo = tmp_path / "repo"
    (repo / "tools" / "offline_gpu").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / "offline_gpu" / "parts.sh", repo / "tools" / "offline_gpu" / "parts.sh")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text(".gpu/\n")
    sparse(repo / "data" / "records.bin", tree_mib * MIB)
    payload = repo / ".gpu" / "payload"
    for name, mib in (("site.tar.xz", 12), ("wheels.tar", 9), ("cache.tar.xz", 10)):
        sparse(payload / name, mib * MIB)
    sparse(tmp_path / "smollm2_135m" / "weights.bin", MIB)
    with tarfile.open(payload / "pkgs.tar", "w") as tar:
        tar.add(tmp_path / "smollm2_135m", arcname="smollm2_135m")
    sparse(repo / ".gpu" / "frozen" / f"tree-{'0' * 40}.tar.gz", frozen_mib * MIB)
    return repo


def parts(repo: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "tools/offline_gpu/parts.sh"], cwd=repo, capture_output=True, text=True, timeout=120
    )


def size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def test_every_call_fits_with_the_frozen_tree_on_the_last(tmp_path):
    repo = checkout(tmp_path, tree_mib=50, frozen_mib=5)
    got = parts(repo)
    assert got.returncode == 0, got.stderr
    stages = sorted((repo / ".gpu").glob("stage-*"), key=lambda p: int(p.name.split("-")[1]))
    tree = size(repo) - size(repo / ".gpu") - size(repo / ".git")
    frozen = size(repo / ".gpu" / "frozen")
    calls = [size(s) + tree for s in stages]
    calls[-1] += frozen
    assert max(calls) <= LIMIT, [c / MIB for c in calls]
    # the parts hold the whole payload, cut at 64 - 2 - (50 + 5) - 1 = 6 MiB
    assert re.match(r"\d+ parts of 6 MiB \(working tree 50 MiB", got.stdout)
    payload = size(repo / ".gpu" / "payload") + 4 * 512  # + the tar headers
    assert sum(size(s) for s in stages) - 64 == pytest.approx(payload, abs=20 * 1024)  # less payload.sha
    assert '".gpu/frozen"' in got.stdout.splitlines()[-1]


def test_no_room_is_refused_before_cutting(tmp_path):
    repo = checkout(tmp_path, tree_mib=57, frozen_mib=5)
    got = parts(repo)
    assert got.returncode == 2
    assert "the working tree (57 MiB) and .gpu/frozen (5 MiB) leave no room in a 64 MiB call" in got.stderr
    assert not list((repo / ".gpu").glob("stage-*"))


def test_more_than_ten_parts_reassemble_in_order(tmp_path):
    """A payload cut into more than ten parts (1 MiB each here): the last call joins them in numeric order (0, 1,
    ..., 10, not 0, 1, 10, 2) into the payload whose sha256 it checks."""
    repo = checkout(tmp_path, tree_mib=55, frozen_mib=5)
    got = parts(repo)
    assert got.returncode == 0, got.stderr
    n = len(list((repo / ".gpu").glob("stage-*")))
    assert n > 10 and got.stdout.startswith(f"{n} parts of 1 MiB")
    joined = (
        re.search(r"cat ((?:pchunk\.\d+ ?)+) > payload\.tar", got.stdout.splitlines()[-1]).group(1).split()
    )
    assert joined == [f"pchunk.{k}" for k in range(n)]
    whole = b"".join((repo / ".gpu" / f"stage-{k}" / f"pchunk.{k}").read_bytes() for k in range(n))
    sha = (repo / ".gpu" / f"stage-{n - 1}" / "payload.sha").read_text().strip()
    assert hashlib.sha256(whole).hexdigest() == sha
    with tarfile.open(fileobj=io.BytesIO(whole)) as tar:
        assert tar.getnames() == ["site.tar.xz", "wheels.tar", "cache.tar.xz", "pkgs.tar"]


def test_staged_records_travel_with_the_first_call_and_the_last_installs_them(tmp_path):
    """Archives ``light.sh on`` staged in .gpu/records/ (here 6 MiB, more than the 2 MiB frozen tree): the first call
    carries them within 64 MiB, the parts leave room for the larger of the two, the last call installs each."""
    repo = checkout(tmp_path, tree_mib=40, frozen_mib=2)
    sparse(repo / ".gpu" / "records" / "records-r0.tgz", 4 * MIB)
    sparse(repo / ".gpu" / "records" / "records-r0-partial.tgz", 2 * MIB)
    got = parts(repo)
    assert got.returncode == 0, got.stderr
    assert re.match(r"3 parts of 15 MiB \(working tree 40 MiB", got.stdout)  # 64 - 2 - (40 + 6) - 1
    calls = got.stdout.splitlines()[1:]
    assert calls[0].startswith(
        '  carry [".gpu/stage-0", ".gpu/records"]: mkdir -p /tmp/stage && cp .gpu/stage-0/* '
    )
    assert ".gpu/records/*" in calls[0] and all(".gpu/records" not in c for c in calls[1:])
    installs = re.findall(r"install\.sh records /tmp/stage/([^ ;]+)", calls[-1])
    assert sorted(installs) == ["records-r0-partial.tgz", "records-r0.tgz"]
    tree = size(repo) - size(repo / ".gpu") - size(repo / ".git")
    first = size(repo / ".gpu" / "stage-0") + tree + size(repo / ".gpu" / "records")
    assert first <= LIMIT, first / MIB


def test_without_staged_records_no_call_names_them(tmp_path):
    got = parts(checkout(tmp_path, tree_mib=20, frozen_mib=2))
    assert got.returncode == 0, got.stderr
    assert "records" not in got.stdout


def test_no_room_beside_staged_records_is_refused_naming_them(tmp_path):
    repo = checkout(tmp_path, tree_mib=57, frozen_mib=1)
    sparse(repo / ".gpu" / "records" / "records-r0.tgz", 5 * MIB)
    got = parts(repo)
    assert got.returncode == 2
    assert "the working tree (57 MiB) and .gpu/records (5 MiB) leave no room in a 64 MiB call" in got.stderr
    assert not list((repo / ".gpu").glob("stage-*"))
