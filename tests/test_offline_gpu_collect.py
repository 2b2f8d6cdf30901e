"""tools/offline_gpu/collect.sh: the campaign's per-replicate records, a layout share's (records-r<R>.tgz) and a
budget share's (records-b<N>-r<R>.tgz), each finished or partial, come back beside gpu-out.tgz as files of their own,
at most 6 a call; everything else the runs wrote goes into gpu-out.tgz, and only there. Run on a stand-in
/tmp/gpu-out (GPU_OUT) with a stand-in nvidia-smi, into a scratch $OUT."""

from __future__ import annotations

import os
import subprocess
import tarfile
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COLLECT = ROOT / "tools" / "offline_gpu" / "collect.sh"
EPOCH = 1_796_428_800  # 2026-12-05 00:00 UTC
RECORDS = (
    "records-r0.tgz",
    "records-r1-partial.tgz",
    "records-b16777216-r0.tgz",
    "records-b16777216-r1-partial.tgz",
)
OTHERS = (
    "notes.txt",
    "records.tgz",
    "layout_distillation/paper_vs_book_gpu.json",
)  # not records of a replicate


def collect(
    tmp_path: Path,
    names: tuple[str, ...],
    mtimes: Iterable[int] | None = None,
    args: tuple[str, ...] = ("0",),
    smi: str = "",
) -> tuple[Path, subprocess.CompletedProcess]:
    """Run collect.sh ``args`` over a stand-in output folder holding ``names`` (each file's content: its name;
    modified at ``mtimes`` seconds after 2026-12-05 00:00 UTC, when given), the queue marks in ``tmp_path/marks``
    and the run logs in ``tmp_path/logs``, collecting every second; the stand-in nvidia-smi (one a round) counts
    its rounds in ``tmp_path/rounds`` and runs ``smi`` first. The $OUT it filled and the run."""
    src, out, bin_ = tmp_path / "gpu-out", tmp_path / "out", tmp_path / "bin"
    (tmp_path / "marks").mkdir(exist_ok=True)
    (tmp_path / "logs").mkdir(exist_ok=True)
    for name in names:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(name)
    for name, seconds in zip(names, mtimes or ()):
        os.utime(src / name, (EPOCH + seconds, EPOCH + seconds))
    out.mkdir(exist_ok=True)
    bin_.mkdir(exist_ok=True)
    (bin_ / "nvidia-smi").write_text(f"#!/bin/sh\n{smi}\necho . >> {tmp_path}/rounds\necho '0, 0 %, 0 MiB'\n")
    (bin_ / "nvidia-smi").chmod(0o755)
    env = {
        "PATH": f"{bin_}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "OUT": str(out),
        "GPU_OUT": str(src),
        "QUEUE_MARKS": str(tmp_path / "marks"),
        "GPU_LOGS": str(tmp_path / "logs"),
        "COLLECT_EVERY": "1",
    }
    got = subprocess.run(
        ["bash", str(COLLECT), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    return out, got


def test_both_kinds_of_records_and_their_partials_come_back(tmp_path):
    out, got = collect(tmp_path, RECORDS + OTHERS)
    assert got.returncode == 0, got.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(["gpu-out.tgz", *RECORDS])
    for name in RECORDS:
        assert (out / name).read_text() == name
    with tarfile.open(out / "gpu-out.tgz") as tar:
        packed = {Path(m.name).as_posix() for m in tar.getmembers() if m.isfile()}
    assert packed == set(OTHERS)  # the rest of what the runs wrote, and no replicate's records twice


def test_the_six_last_written_records_a_call(tmp_path):
    """8 files come back a call: gpu-out.tgz and the 6 records written last (the older ones came back in an earlier
    call). Two shares write both kinds: here the layout share's archives are the newest although a budget share's
    sort first by name."""
    names = tuple(f"records-b1024-r{r}.tgz" for r in range(4)) + tuple(f"records-r{r}.tgz" for r in range(4))
    out, got = collect(tmp_path, names, mtimes=range(len(names)))
    assert got.returncode == 0, got.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(["gpu-out.tgz", *names[2:]])


def test_collecting_again_keeps_only_the_last_written(tmp_path):
    """A call that collects in a loop: a partial archive renamed when its replicate finished leaves $OUT, and $OUT
    never holds more than the 6 records written last."""
    out, _ = collect(tmp_path, ("records-r0-partial.tgz",))
    assert (out / "records-r0-partial.tgz").is_file()
    (tmp_path / "gpu-out" / "records-r0-partial.tgz").rename(tmp_path / "gpu-out" / "records-r0.tgz")
    names = ("records-r0.tgz",) + tuple(f"records-b1024-r{r}.tgz" for r in range(6))
    out, got = collect(tmp_path, names, mtimes=range(7))  # records-r0.tgz the oldest
    assert got.returncode == 0, got.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(["gpu-out.tgz", *names[1:]])


def test_each_queue_s_records_since_its_start_come_back(tmp_path):
    """A queue's mark (queue.sh) makes collect.sh pack the records written since it (python -m hybridlib.carry pack
    --newer MARK, run with env.sh: here a stand-in python3 that writes the archive it is given) into
    records-queue-<G>-partial.tgz, which comes back with the campaign's records; without a mark nothing is packed."""
    env = tmp_path / "tools" / "offline_gpu" / "env.sh"
    env.parent.mkdir(parents=True)
    env.write_text(
        f'python3() {{ echo "$*" >> {tmp_path}/asked; echo "${{@: -1}}" > "${{@: -1}}"; }}\nexport -f python3\n'
    )
    out, got = collect(tmp_path, RECORDS[:1])
    assert got.returncode == 0, got.stderr
    assert not (tmp_path / "asked").exists() and sorted(p.name for p in out.iterdir()) == [
        "gpu-out.tgz",
        RECORDS[0],
    ]
    (tmp_path / "marks" / "queue-5.mark").touch()
    out, got = collect(tmp_path, RECORDS[:1])
    assert got.returncode == 0, got.stderr
    archive = tmp_path / "gpu-out" / "records-queue-5-partial.tgz"
    mark = tmp_path / "marks" / "queue-5.mark"
    assert (tmp_path / "asked").read_text() == f"-m hybridlib.carry pack --newer {mark} {archive}\n"
    assert (out / archive.name).read_text() == f"{archive}\n"


def rounds(tmp_path: Path) -> int:
    return len((tmp_path / "rounds").read_text().split())


@pytest.mark.parametrize(
    "last",
    ["11:21:55 share done", "11:21:55 share failed", "11:40:02 queue done"],
)
def test_until_ends_at_once_when_every_run_has_ended(tmp_path, last):
    """--until collects once, without waiting, when every campaign and queue log ends with its end line."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "campaign.log").write_text(
        "campaign: replicate 1\r 53%|...\r\n11:21:55 share done\n\n"
    )
    (tmp_path / "logs" / ("queue-0.log" if "queue" in last else "campaign-1.log")).write_text(f"x\n{last}\n")
    out, got = collect(tmp_path, RECORDS[:1], args=("--until", "30"))
    assert got.returncode == 0, got.stderr
    assert rounds(tmp_path) == 1 and (out / RECORDS[0]).is_file()
    assert got.stdout == (out / "collect.out").read_text() and "share done" in got.stdout


def test_until_collects_while_a_share_runs_and_once_more_when_it_ends(tmp_path):
    """A share whose log ends during the wait (here the second round's nvidia-smi writes its end line): collected
    each round, then once more; the archive it wrote last comes back."""
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "campaign.log"
    log.write_text("11:02:37 replicate 1\n")
    smi = (
        f'[ "$(cat {tmp_path}/rounds 2>/dev/null | wc -l)" = 1 ] && echo "11:21:55 share done" >> {log}'
        f" && echo late > {tmp_path}/gpu-out/records-r2.tgz"
    )
    out, got = collect(tmp_path, RECORDS[:1], args=("--until", "30"), smi=smi)
    assert got.returncode == 0, got.stderr
    assert rounds(tmp_path) == 3 and (out / "records-r2.tgz").read_text() == "late\n"


def test_until_stops_at_its_deadline_while_a_share_still_runs(tmp_path):
    """A share that has not ended: rounds until the next would pass the deadline (3 s, a round a second), then one
    more; a share never started (no log) is not waited for."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "campaign.log").write_text("11:02:37 replicate 1\n 54%|...\r")
    out, got = collect(tmp_path, RECORDS[:1], args=("--until", "3"))
    assert got.returncode == 0, got.stderr
    assert 2 <= rounds(tmp_path) <= 4 and (out / RECORDS[0]).is_file()
    (tmp_path / "logs" / "campaign.log").unlink()
    (tmp_path / "rounds").unlink()
    collect(tmp_path, RECORDS[:1], args=("--until", "30"))
    assert rounds(tmp_path) == 1


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("--until",), {}, "collect.sh: --until takes whole seconds from now, got ''"),
        (("--until", "9m"), {}, "collect.sh: --until takes whole seconds from now, got '9m'"),
        (("soon",), {}, "collect.sh: takes WAIT_SECONDS or --until SECONDS, got 'soon'"),
        (
            ("--until", "9"),
            {"COLLECT_EVERY": "0"},
            "collect.sh: COLLECT_EVERY takes whole seconds >= 1, got '0'",
        ),
    ],
)
def test_bad_input_is_refused_before_any_round(tmp_path, args, env, message):
    got = subprocess.run(
        ["bash", str(COLLECT), *args],
        cwd=tmp_path,
        env={**os.environ, "OUT": str(tmp_path), "GPU_OUT": str(tmp_path / "gpu-out"), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert got.returncode == 2 and got.stderr.strip() == message
    assert not (tmp_path / "gpu-out").exists()
