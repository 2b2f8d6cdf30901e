"""tools/offline_gpu/light.sh: `on` takes the committed record folders out of what a `run` call uploads (the tracked
tree and untracked files git does not ignore) and stages the named archives for the first call; `off` leaves the
checkout as it was. Run on a scratch git repository holding two record folders and a kernel cache beside them."""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from hybridlib import carry

ROOT = Path(__file__).resolve().parents[1]
COMMIT = "a" * 40


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def light(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "tools/offline_gpu/light.sh", *args], cwd=repo, capture_output=True, text=True
    )


def uploaded(repo: Path) -> set[str]:
    """What a `run` call carries: tracked files and the untracked ones git does not ignore."""
    return set(git(repo, "ls-files").split()) | set(
        git(repo, "ls-files", "--others", "--exclude-standard").split()
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "tools" / "offline_gpu").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / "offline_gpu" / "light.sh", repo / "tools" / "offline_gpu" / "light.sh")
    for name in (
        f"{COMMIT}/codes.json",
        f"{COMMIT}/records-r0.tgz",
        f"{COMMIT}/records-r1.tgz",
        f"{'b' * 40}/x.tgz",
        f"{'b' * 40}/records-r0.tgz",
    ):
        (repo / "data" / "gpu_memo" / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / "data" / "gpu_memo" / name).write_bytes(name.encode())
    (repo / "data" / "gpu_memo" / "kernel-caches.tgz").write_bytes(b"kernels")
    (repo / ".gitignore").write_text(".gpu/\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "records")
    return repo


def test_on_leaves_the_records_out_of_the_upload_and_off_restores_the_checkout(repo):
    before = uploaded(repo)
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    got = light(repo, "on", f"data/gpu_memo/{COMMIT}/records-r0.tgz", f"data/gpu_memo/{'b' * 40}/x.tgz")
    assert got.returncode == 0, got.stderr
    assert uploaded(repo) == {
        ".gitignore",
        "data/gpu_memo/kernel-caches.tgz",
        "tools/offline_gpu/light.sh",
    }
    assert (
        repo / f"data/gpu_memo/{COMMIT}/records-r1.tgz"
    ).read_bytes() == f"{COMMIT}/records-r1.tgz".encode()
    staged = repo / ".gpu" / "records"
    assert {p.name: p.read_bytes() for p in staged.iterdir()} == {
        "records-r0.tgz": f"{COMMIT}/records-r0.tgz".encode(),
        "x.tgz": f"{'b' * 40}/x.tgz".encode(),
    }
    got = light(repo, "off")
    assert got.returncode == 0, got.stderr
    assert uploaded(repo) == before
    assert git(repo, "status", "--porcelain") == ""
    assert (repo / ".git" / "info" / "exclude").read_text() == exclude


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["on", "notes.txt"],
            "ARCHIVE must be a records archive under data/gpu_memo/<commit>/, got 'notes.txt'",
        ),
        (["on", f"data/gpu_memo/{COMMIT}/records-r9.tgz"], "ARCHIVE must be a records archive"),
        (["sideways"], "usage: light.sh on [ARCHIVE...] [--runs ARCHIVE...] | off (got 'sideways')"),
        (["on", "--runs", "notes.txt"], "ARCHIVE must be a records archive under data/gpu_memo/<commit>/"),
        (
            ["on", f"data/gpu_memo/{COMMIT}/records-r0.tgz", f"data/gpu_memo/{'b' * 40}/records-r0.tgz"],
            "two ARCHIVEs share the name records-r0.tgz",
        ),
    ],
)
def test_bad_input_is_refused_before_anything_changes(repo, args, message):
    got = light(repo, *args)
    assert got.returncode == 2
    assert message in got.stderr
    assert git(repo, "status", "--porcelain") == ""
    assert not (repo / ".gpu").exists()


def test_on_refuses_staged_changes_and_a_second_on(repo):
    (repo / "new.txt").write_text("x")
    git(repo, "add", "new.txt")
    got = light(repo, "on")
    assert got.returncode == 2 and "staged changes" in got.stderr
    git(repo, "reset", "-q", "new.txt")
    assert light(repo, "on").returncode == 0
    got = light(repo, "on")
    assert got.returncode == 2 and "'on' ran already" in got.stderr


def records_archive(path: Path, files: dict[str, bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_runs_stages_only_the_students_run_records_as_one_archive_carry_installs(repo, tmp_path):
    """`on A --runs B C` stages A whole and, in runs.tgz, exactly the students' run.json of B and C (their scores,
    SoftCKA and first-FA records left out), which carry.unpack installs as carried students; an archive staged
    whole under the name runs.tgz is refused."""
    memo = repo / "data" / "gpu_memo" / COMMIT
    runs = {f"students/k{i}/run.json": f'{{"key": "k{i}"}}'.encode() for i in range(3)}
    records_archive(
        memo / "records-r2.tgz",
        {
            "students/k0/run.json": runs["students/k0/run.json"],
            "students/k0/test-16.json": b"[]",
            "alignment/a.npz": b"npz",
        },
    )
    records_archive(
        memo / "records-r3.tgz",
        {
            "students/k1/run.json": runs["students/k1/run.json"],
            "students/k2/run.json": runs["students/k2/run.json"],
            "memo/first_fa_locality/m.pkl": b"pkl",
        },
    )
    records_archive(memo / "runs.tgz", {"students/k9/run.json": b"{}"})
    clash = light(
        repo, "on", f"data/gpu_memo/{COMMIT}/runs.tgz", "--runs", f"data/gpu_memo/{COMMIT}/records-r2.tgz"
    )
    assert clash.returncode == 2 and "two ARCHIVEs share the name runs.tgz" in clash.stderr
    got = light(
        repo,
        "on",
        f"data/gpu_memo/{COMMIT}/records-r0.tgz",
        "--runs",
        f"data/gpu_memo/{COMMIT}/records-r2.tgz",
        f"data/gpu_memo/{COMMIT}/records-r3.tgz",
    )
    assert got.returncode == 0, got.stderr
    staged = repo / ".gpu" / "records"
    assert sorted(p.name for p in staged.iterdir()) == ["records-r0.tgz", "runs.tgz"]
    with tarfile.open(staged / "runs.tgz") as tar:
        assert {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()} == runs
    cache = tmp_path / "cache"
    assert sorted(map(str, carry.unpack(staged / "runs.tgz", cache))) == sorted(runs)
    assert all((cache / "students" / f"k{i}" / carry.CARRIED).is_file() for i in range(3))
    assert light(repo, "off").returncode == 0


def test_runs_refuses_an_archive_without_run_records_before_anything_changes(repo):
    memo = repo / "data" / "gpu_memo" / COMMIT
    records_archive(memo / "records-m.tgz", {"memo/first_fa_locality/m.pkl": b"pkl"})
    index = git(repo, "ls-files")
    got = light(repo, "on", "--runs", f"data/gpu_memo/{COMMIT}/records-m.tgz")
    assert got.returncode == 2
    assert f"--runs: 'data/gpu_memo/{COMMIT}/records-m.tgz' holds no student's run record" in got.stderr
    assert git(repo, "ls-files") == index and not (repo / ".gpu").exists()
