"""Cross-process file lock: two processes in the same lock never overlap."""

import multiprocessing
import time
from pathlib import Path

from hybridlib.atomic import file_lock


def _hold(lock: str, log: str) -> None:
    with file_lock(lock):
        with open(log, "a") as fh:
            fh.write("start\n")
        time.sleep(0.3)  # the other process arrives while this one holds the lock
        with open(log, "a") as fh:
            fh.write("end\n")


def test_two_processes_in_one_lock_take_turns(tmp_path: Path):
    lock, log = str(tmp_path / "dir" / ".x.lock"), str(tmp_path / "log")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hold, args=(lock, log)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert Path(log).read_text().split() == ["start", "end", "start", "end"]  # never start, start
