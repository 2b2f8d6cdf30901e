"""tools/offline_gpu/queue.sh: bad options are refused before any work, and a queue hands its groups and
parameter overrides to chapter.sh (a stand-in that records its arguments: the real one needs the GPU preset);
convbench.sh times the convolution paths again alone only once the GPU runs nothing else."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
QUEUE = ROOT / "tools" / "offline_gpu" / "queue.sh"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
GPU = "97"  # a queue index no real run uses: its copy is /tmp/repo-97, its log /tmp/queue-97.log


def queue(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(QUEUE), *args], cwd=cwd, capture_output=True, text=True, timeout=60, env=env
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpu", "x", "60:efficiency"], "--gpu takes GPU indices N or N,M,..., got 'x'"),
        (["--set", "parallel", "60:lolcats"], "--set takes NAME=VALUE (a chapter parameter), got 'parallel'"),
        (["--set"], "--set takes NAME=VALUE (a chapter parameter), got ''"),
        (["--tree", "frozen.tar.gz", "60:lolcats"], "--tree must name a file tree-<40-hex commit>.tar.gz"),
        (
            ["--fast", "60:lolcats"],
            "unknown option '--fast' (allowed: --gpu N[,M...], --tree FILE, --set NAME=VALUE)",
        ),
        (["--gpu", GPU, "lolcats"], "a group is SECONDS:CHAPTER[,CHAPTER]..., got 'lolcats'"),
    ],
)
def test_bad_options_are_refused_before_any_work(args, message):
    shutil.rmtree(f"/tmp/repo-{GPU}", ignore_errors=True)
    got = queue(*args)
    assert got.returncode == 2
    assert message in got.stderr
    assert not Path(f"/tmp/repo-{GPU}").exists()


def test_groups_and_overrides_reach_chapter_sh(tmp_path):
    stand_in = tmp_path / "tree" / "tools" / "offline_gpu" / "chapter.sh"
    stand_in.parent.mkdir(parents=True)
    stand_in.write_text('echo "chapter.sh $* (GPUs $CUDA_VISIBLE_DEVICES)"\n')
    tree = tmp_path / f"tree-{COMMIT}.tar.gz"
    with tarfile.open(tree, "w:gz") as tar:
        tar.add(tmp_path / "tree", arcname=".")
    log = Path(f"/tmp/queue-{GPU},3.log")
    log.unlink(missing_ok=True)
    got = queue(
        "--gpu",
        f"{GPU},3",
        "--tree",
        str(tree),
        "--set",
        "parallel=4",
        "--set",
        "seeds=3",
        "60:lolcats",
        env={**os.environ, "QUEUE_MARKS": str(tmp_path)},
    )
    assert got.returncode == 0, got.stderr
    assert f"commit {COMMIT}; -p parallel=4 -p seeds=3" in got.stdout
    for _ in range(100):
        if log.exists() and "queue done" in log.read_text():
            break
        time.sleep(0.1)
    assert f"chapter.sh 60 lolcats -p parallel=4 -p seeds=3 (GPUs {GPU},3)" in log.read_text()
    assert (tmp_path / f"queue-{GPU},3.mark").is_file()  # where collect.sh finds it ($QUEUE_MARKS)
    shutil.rmtree(f"/tmp/repo-{GPU},3", ignore_errors=True)
    log.unlink()


CONVBENCH = ROOT / "tools" / "offline_gpu" / "convbench.sh"


def convbench(tmp_path: Path, busy_polls: int, wait_s: str) -> str:
    """convbench.sh with stand-ins for python3 (records its arguments), sleep (returns at once) and nvidia-smi (a
    process on the GPU for its first ``busy_polls`` queries); returns its log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    polls = tmp_path / "polls"
    polls.write_text("0")
    stand_ins = {
        "python3": 'echo "python3 $*"\n',
        "sleep": "true\n",
        "nvidia-smi": f'n=$(cat {polls}); echo $((n + 1)) > {polls}; [ "$n" -lt {busy_polls} ] && echo 4242\n',
    }
    for name, body in stand_ins.items():
        (bin_dir / name).write_text("#!/usr/bin/env bash\n" + body)
        (bin_dir / name).chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HYBRIDLIB_GIT_COMMIT": COMMIT, "OUT": str(tmp_path / "out")}
    got = subprocess.run(
        ["bash", str(CONVBENCH)],
        cwd=tmp_path,
        env=env | {"ALONE_WAIT_S": wait_s, "CUDA_VISIBLE_DEVICES": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert got.returncode == 0, got.stderr
    return (tmp_path / "out" / "convbench-log.txt").read_text()


def test_convbench_times_both_paths_alone_once_the_gpu_is_free(tmp_path):
    log = convbench(tmp_path, busy_polls=3, wait_s="1200")
    assert "--conv-impl fla --tag conv_fla_gluon" in log  # the three paths under load first
    assert "the GPU to itself after 30 s: the timings alone" in log
    assert log.index("--tag conv_torch_alone") < log.index("--tag conv_fla_alone")


@pytest.mark.parametrize(("busy_polls", "wait_s"), [(1000, "60"), (0, "0")])
def test_convbench_skips_the_timings_alone_on_a_shared_gpu_or_when_asked(tmp_path, busy_polls, wait_s):
    log = convbench(tmp_path, busy_polls=busy_polls, wait_s=wait_s)
    assert "the GPU stayed shared (or ALONE_WAIT_S=0): no timings alone" in log
    assert "_alone" not in log


CHAPTER = ROOT / "tools" / "offline_gpu" / "chapter.sh"


@pytest.mark.parametrize("overrides", [[], ["-p", "parallel=4"]])
def test_chapter_sh_collects_the_notebook_where_the_runner_wrote_it(tmp_path, overrides):
    """With overrides the book runner writes the notebook to _build/runs/gpu, outside the book (the LoLCATs run
    of 2026-12-01 lost its notebook so): chapter.sh collects it there as well as from book/gpu, with the
    chapter's new result JSON, and not the committed JSON that predates the run."""
    repo, bin_dir = tmp_path / "repo", tmp_path / "bin"
    (repo / "tools" / "offline_gpu").mkdir(parents=True)
    for name in ("chapter.sh", "env.sh"):
        shutil.copy(ROOT / "tools" / "offline_gpu" / name, repo / "tools" / "offline_gpu" / name)
    (repo / "data" / "results" / "lolcats").mkdir(parents=True)
    (repo / "data" / "results" / "lolcats" / "gpu_old.json").write_text("{}")  # committed, older than the run
    where = "_build/runs/gpu" if overrides else "book/gpu"
    bin_dir.mkdir()
    stand_ins = {  # the runner writes the notebook and a result; `python3 -c` names the chapter's notebook
        "python3": f"""if [ "$1" = -c ]; then echo 04_lolcats.ipynb; exit; fi
mkdir -p {where} && echo '{{"cells": []}}' > {where}/04_lolcats.ipynb && echo '{{}}' > data/results/lolcats/gpu.json
echo "runner $*"\n""",
        "nvidia-smi": "true\n",
    }
    for name, body in stand_ins.items():
        (bin_dir / name).write_text("#!/usr/bin/env bash\n" + body)
        (bin_dir / name).chmod(0o755)
    time.sleep(1.1)  # the committed JSON is older than chapter.sh's marker
    out, keep = tmp_path / "out", tmp_path / "keep"
    got = subprocess.run(
        ["bash", "tools/offline_gpu/chapter.sh", "60", "lolcats", *overrides],
        cwd=repo,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "OUT": str(out), "KEEP": str(keep)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert got.returncode == 0, got.stderr
    runner = f"runner -m hybridlib.book run lolcats {' '.join(overrides)}".rstrip()
    assert runner in (out / "log-lolcats.txt").read_text()
    assert sorted(p.name for p in (out / "lolcats").iterdir()) == ["04_lolcats.ipynb", "gpu.json"]
    assert (keep / where / "04_lolcats.ipynb").is_file()


SPEEDRUN = ROOT / "tools" / "offline_gpu" / "speedrun.sh"
LINES = ROOT / "tools" / "offline_gpu" / "lines.sh"


def test_speedrun_logs_each_bench_run_s_own_exit_status_and_its_tuning(tmp_path):
    """A failing timing is logged as failed (``$(date)`` in the log line once masked every status as 0), and
    SPEEDRUN_TUNED / SPEEDRUN_GEMMS reach the bench's environment."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(
        '#!/usr/bin/env bash\necho "python3 $* tuned=$TORCHINDUCTOR_COORDINATE_DESCENT_TUNING '
        'gemms=$TORCHINDUCTOR_MAX_AUTOTUNE_GEMM"\n[[ "$*" != *gemma3* ]]\n'
    )
    (bin_dir / "python3").chmod(0o755)
    out = tmp_path / "out"
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HYBRIDLIB_GIT_COMMIT": COMMIT,
        "SPEEDRUN_OUT": str(out),
        "SPEEDRUN_TUNED": "1",
        "SPEEDRUN_GEMMS": "1",
    }
    got = subprocess.run(["bash", str(SPEEDRUN), "x_"], env=env, capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    log = (out / "speedrun-log.txt").read_text()
    assert "--teacher smollm2-135m --tag x_fla_alone tuned=1 gemms=1" in log
    assert "--teacher gemma3-270m --tag gemma3_x_fla_alone" in log
    assert [line.split()[-1] for line in log.splitlines() if " rc " in line] == ["0", "1"]


def test_lines_runs_lines_appended_later_in_order_with_their_status_until_end(tmp_path):
    """lines.sh runs each line once, logs its real exit status, waits for lines not yet written and stops at end."""
    queue_file = tmp_path / "lines.txt"
    queue_file.write_text("echo first > a.txt\nfalse\n")
    proc = subprocess.Popen(
        ["bash", str(LINES), str(queue_file)], cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 30
    while not (tmp_path / "a.txt").exists():  # the first line has run; the rest are appended while it waits
        assert time.monotonic() < deadline
        time.sleep(0.1)
    with queue_file.open("a") as f:
        f.write("echo second >> a.txt\nend\necho never >> a.txt\n")
    log, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert (tmp_path / "a.txt").read_text() == "first\nsecond\n"
    assert [line.split(" rc ")[1] for line in log.splitlines() if " rc " in line] == [
        "0 (1)",
        "1 (2)",
        "0 (3)",
    ]
    assert log.rstrip().endswith("lines done")
