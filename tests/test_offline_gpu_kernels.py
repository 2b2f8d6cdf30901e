"""tools/offline_gpu/kernels.sh: the TileLang and Triton caches one GPU machine compiled are packed into one archive
($OUT/kernel-caches.tgz) and restored on the next machine byte for byte, TileLang's half-written entries left out;
Triton's cache is dropped when the archive would pass the size a file that comes back may have; nothing is packed
while the kernel warm-up still compiles. Run on stand-in caches laid out as TileLang 0.1.15 and Triton lay theirs."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "tools" / "offline_gpu" / "kernels.sh"
TILELANG = {  # as an H100 left it: <version>/<platform>/kernels/<key>/ a kernel, <version>/cuda-binaries/<key>/
    "0.1.15/linux-x86_64/kernels/9f2c/executable.so": b"\x7fELF compiled kernel",
    "0.1.15/linux-x86_64/kernels/9f2c/params.json": b"{}",
    "0.1.15/linux-x86_64/kernels/41aa/executable.so": b"\x7fELF another shape",
    "0.1.15/cuda-binaries/84d1/kernel.cubin": b"cubin",
}
STAGING = "0.1.15/.staging/cuda-binaries/77ab/kernel.cubin"  # <version>/.staging: a save a crash cut short
TRITON = {  # <hash>/...: two kernels
    "AB12/chunk_fwd_h.cubin": b"cubin",
    "AB12/__grp__chunk_fwd_h.json": b"{}",
    "CD34/l2norm_fwd.cubin": b"cubin 2",
}


def lay_out(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def kernels(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """Run kernels.sh ``args`` with ``home`` as HOME (the caches under it), $OUT in ``home/out``, no warm-up pid
    unless ``env`` names one."""
    (home / "out").mkdir(parents=True, exist_ok=True)
    base = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "OUT": str(home / "out"),
        "WARM_PID": str(home / "none"),
    }
    return subprocess.run(
        ["bash", str(KERNELS), *args],
        cwd=home,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def packed(tmp_path: Path) -> Path:
    home = tmp_path / "first"
    lay_out(home / ".tilelang" / "cache", TILELANG | {STAGING: b"half written"})
    lay_out(home / ".triton" / "cache", TRITON)
    got = kernels(home, "pack")
    assert got.returncode == 0, got.stderr
    assert got.stdout.rstrip().endswith("2 TileLang kernels, 2 Triton kernels")
    return home / "out" / "kernel-caches.tgz"


def test_pack_then_restore_gives_the_next_machine_the_same_caches(tmp_path):
    archive = packed(tmp_path)
    with tarfile.open(archive) as tar:
        names = {m.name for m in tar.getmembers() if m.isfile()}
    assert names == {f"tilelang/{n}" for n in TILELANG} | {f"triton/{n}" for n in TRITON}
    home = tmp_path / "next"
    lay_out(home / ".triton" / "cache", {"EF56/own.cubin": b"compiled here"})  # what the machine has is kept
    got = kernels(home, "restore", str(archive))
    assert got.returncode == 0, got.stderr
    assert tree(home / ".tilelang" / "cache") == TILELANG
    assert tree(home / ".triton" / "cache") == TRITON | {"EF56/own.cubin": b"compiled here"}


def test_the_cache_folders_follow_their_variables(tmp_path):
    archive = packed(tmp_path)
    home = tmp_path / "next"
    got = kernels(
        home, "restore", str(archive), TILELANG_CACHE_DIR=str(home / "tl"), TRITON_CACHE_DIR=str(home / "tr")
    )
    assert got.returncode == 0, got.stderr
    assert tree(home / "tl") == TILELANG and tree(home / "tr") == TRITON
    assert not (home / ".tilelang").exists() and not (home / ".triton").exists()


def test_triton_s_cache_is_dropped_when_the_archive_would_not_come_back(tmp_path):
    """A Triton cache of 2 MiB of incompressible bytes under a 1 MiB limit: TileLang's cache alone, and it says so;
    when TileLang's alone passes the limit, nothing is written and the call fails."""
    home = tmp_path / "first"
    lay_out(home / ".tilelang" / "cache", TILELANG)
    lay_out(home / ".triton" / "cache", {"AB12/big.cubin": os.urandom(2 << 20)})
    got = kernels(home, "pack", KERNELS_MAX_MIB="1")
    assert got.returncode == 0, got.stderr
    assert "with Triton's cache the archive holds 2 MiB > 1 MiB: TileLang's alone" in got.stdout
    with tarfile.open(home / "out" / "kernel-caches.tgz") as tar:
        assert {m.name for m in tar.getmembers() if m.isfile()} == {f"tilelang/{n}" for n in TILELANG}
    (home / "out" / "kernel-caches.tgz").unlink()
    lay_out(
        home / ".tilelang" / "cache", {"0.1.15/linux-x86_64/kernels/77/executable.so": os.urandom(2 << 20)}
    )
    got = kernels(home, "pack", KERNELS_MAX_MIB="1")
    assert got.returncode == 3 and "TileLang's cache alone passes 1 MiB: nothing packed" in got.stderr
    assert list((home / "out").iterdir()) == []


def test_nothing_is_packed_while_the_warm_up_compiles(tmp_path):
    home = tmp_path / "first"
    lay_out(home / ".tilelang" / "cache", TILELANG)
    warm = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "warm.py"])  # names warm.py
    try:
        (tmp_path / "warm.pid").write_text(f"{warm.pid}\n")
        got = kernels(home, "pack", WARM_PID=str(tmp_path / "warm.pid"))
    finally:
        warm.kill()
        warm.wait()
    assert got.returncode == 2
    assert (
        got.stderr.strip()
        == f"kernels.sh: the kernel warm-up (pid {warm.pid}) is still compiling: pack when it has ended"
    )
    assert list((home / "out").iterdir()) == []
    got = kernels(home, "pack", WARM_PID=str(tmp_path / "warm.pid"))  # ended: its pid names no warm.py now
    assert got.returncode == 0, got.stderr


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ((), {}, "kernels.sh: first argument must be 'pack' or 'restore', got ''"),
        (("unpack",), {}, "kernels.sh: first argument must be 'pack' or 'restore', got 'unpack'"),
        (("restore",), {}, "kernels.sh restore: FILE must be an archive of 'kernels.sh pack', got ''"),
        (
            ("restore", "gone.tgz"),
            {},
            "kernels.sh restore: FILE must be an archive of 'kernels.sh pack', got 'gone.tgz'",
        ),
        (("pack",), {"KERNELS_MAX_MIB": "0"}, "kernels.sh: KERNELS_MAX_MIB takes whole MiB >= 1, got '0'"),
        (
            ("pack",),
            {"KERNELS_MAX_MIB": "16M"},
            "kernels.sh: KERNELS_MAX_MIB takes whole MiB >= 1, got '16M'",
        ),
    ],
)
def test_bad_input_is_refused_before_any_work(tmp_path, args, env, message):
    lay_out(tmp_path / ".tilelang" / "cache", TILELANG)
    got = kernels(tmp_path, *args, **env)
    assert got.returncode == 2 and got.stderr.strip() == message
    assert list((tmp_path / "out").iterdir()) == []
    assert tree(tmp_path / ".tilelang" / "cache") == TILELANG


def test_a_machine_that_compiled_nothing_packs_nothing(tmp_path):
    got = kernels(tmp_path, "pack")
    assert got.returncode == 2
    assert got.stderr.strip() == (
        f"kernels.sh: nothing compiled: neither {tmp_path}/.tilelang/cache nor {tmp_path}/.triton/cache exists"
    )
    assert list((tmp_path / "out").iterdir()) == []
