"""tools/offline_gpu/campaign.sh: bad options are refused before any work, and a second share (--slot) on the same
GPU runs from its own tree, log, start mark, archives and copy of the cache, so that neither share packs the other's
records (a stand-in env.sh replaces python3 with a shell function that records its arguments and writes the pack),
and a budget share (--budget N) packs into its own archives, records-b<N>-r<R>.tgz; --arms trains only the arms it
names."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from hybridlib.findings.layout.spec import LAYOUTS
from hybridlib.layouts import SWA_ARM

ROOT = Path(__file__).resolve().parents[1]
CAMPAIGN = ROOT / "tools" / "offline_gpu" / "campaign.sh"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
SLOT = "97"  # a slot no real share uses: /tmp/tree-97, /tmp/campaign-97.log
REPLICATE = "97"  # its archive /tmp/gpu-out/records-r97-slot97.tgz (a second share names its slot)
FOUND = "96"  # a replicate whose every record the stand-in finds carried: it packs nothing
FAILS = "95"  # a replicate whose campaign step the stand-in fails
BROKEN = "94"  # a replicate whose records the stand-in's carry fails to pack (another error than nothing new)


def campaign(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(CAMPAIGN), *args],
        cwd=ROOT,
        env=None if env is None else os.environ | env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--slot", "x", "--tree", "t.tar.gz", "1"], "--slot takes a share index 0, 1, ..., got 'x'"),
        (["--slot"], "--slot takes a share index 0, 1, ..., got ''"),
        (["--tree", "frozen.tar.gz", "1"], "--tree must name a file tree-<40-hex commit>.tar.gz"),
        (
            ["--fast", "1"],
            "unknown option '--fast' (allowed: --tree FILE, --slot S, --budget N, --lr-check, --other-teachers, "
            "--arms A,B,...)",
        ),
        (
            ["--arms", "standard periodic", "1"],
            "--arms takes arm labels separated by commas (e.g. standard_periodic,reverse_periodic), got "
            "'standard periodic'",
        ),
        (["--arms"], "--arms takes arm labels separated by commas"),
        (
            ["--budget", "0", "1"],
            "--budget takes a positive number of tokens (one of the gpu preset's budgets), got '0'",
        ),
        (
            ["--budget", "1M", "1"],
            "--budget takes a positive number of tokens (one of the gpu preset's budgets), got '1M'",
        ),
        (
            ["--budget"],
            "--budget takes a positive number of tokens (one of the gpu preset's budgets), got ''",
        ),
    ],
)
def test_bad_options_are_refused_before_any_work(args, message):
    shutil.rmtree(f"/tmp/tree-{SLOT}", ignore_errors=True)
    got = campaign(*args)
    assert got.returncode == 2
    assert message in got.stderr
    assert not Path(f"/tmp/tree-{SLOT}").exists()


def test_every_arm_label_of_the_gpu_preset_passes_the_option_check():
    """Each arm of the layout chapter (a label with a digit too, ``periodic_first_at_0``) gets past --arms' syntax to
    the next check (the commit the tree was sent from: none here)."""
    got = campaign("--arms", ",".join([*LAYOUTS, SWA_ARM]), "1", env={"HYBRIDLIB_GIT_COMMIT": ""})
    assert got.returncode != 0 and "separated by commas" not in got.stderr
    assert "HYBRIDLIB_GIT_COMMIT" in got.stderr


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["0"], {}, "HYBRIDLIB_GIT_COMMIT"),
        (
            [],
            {"HYBRIDLIB_GIT_COMMIT": "abc"},
            "usage: campaign.sh [--tree FILE] [--slot S] [--budget N | --lr-check | --other-teachers] "
            "[--arms A,B,...] REPLICATE",
        ),
        (["--tree", "tree-abc.tar.gz", "0"], {}, "--tree must name a file tree-<40-hex commit>"),
        (["0", "x"], {"HYBRIDLIB_GIT_COMMIT": "abc"}, "replicates are indices 0, 1, ..., got 'x'"),
        (
            ["--lr-check", "--other-teachers", "0"],
            {"HYBRIDLIB_GIT_COMMIT": "abc"},
            "--lr-check and --other-teachers are two shares: give one",
        ),
        (
            ["--lr-check", "--arms", "reverse_periodic", "0"],
            {"HYBRIDLIB_GIT_COMMIT": "abc"},
            "--lr-check trains its own arms: not with --budget or --arms",
        ),
        (
            ["--other-teachers", "--budget", "1048576", "0"],
            {"HYBRIDLIB_GIT_COMMIT": "abc"},
            "--other-teachers trains its own arms: not with --budget or --arms",
        ),
        (
            ["--other-teachers", "1"],
            {"HYBRIDLIB_GIT_COMMIT": "abc"},
            "--other-teachers trains two students with replicate 0's seeds: give replicate 0, got '1'",
        ),
    ],
)
def test_campaign_refuses_bad_input_before_any_work(args, env, named, tmp_path):
    """Nothing starts (no log, no records) when the commit or a replicate index is missing or malformed."""
    got = subprocess.run(
        ["bash", str(CAMPAIGN), *args],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert got.returncode != 0 and named in got.stderr


def stand_in_tree(tmp_path: Path) -> tuple[Path, Path]:
    """A frozen tree whose env.sh points the cache into ``tmp_path`` and replaces python3 with a shell function
    that prints its arguments (for ``-c``: the arm list, or with HYBRIDLIB_RECORDS_ONLY the best FA-first layout,
    failing when $MISSING names a student) and writes the archive --pack or ``carry pack`` names, except for
    replicate :data:`FOUND` (every record found in carried ones: nothing new to pack), :data:`FAILS` (it fails)
    and :data:`BROKEN` (carry fails to pack); (tree, cache)."""
    cache = tmp_path / "hlcache"
    (cache / "students" / "s0").mkdir(parents=True)
    (cache / "students" / "s0" / "run.json").write_text("{}")
    env = tmp_path / "tree" / "tools" / "offline_gpu" / "env.sh"
    env.parent.mkdir(parents=True)
    env.write_text(
        f"export HYBRIDLIB_CACHE={cache} FOUND={FOUND} FAILS={FAILS} BROKEN={BROKEN}\n"
        'python3() { if [ "$1" = -c ]; then [ -n "${HYBRIDLIB_RECORDS_ONLY-}" ] || { echo arm_a arm_b; return; };'
        ' [ -z "${MISSING-}" ] || { echo "FileNotFoundError: student $MISSING is not in the cache" >&2; return 1; };'
        " echo reverse_periodic; return; fi;"
        ' echo "python3 $* | cache $HYBRIDLIB_CACHE | commit $HYBRIDLIB_GIT_COMMIT | $(pwd)";'
        ' [[ " $* " != *" --replicates $FAILS "* ]] || return 1;'
        ' if [ "${2-}" = hybridlib.carry ]; then case ${@: -1} in'
        ' *-r$FOUND-*) echo "ValueError: no records newer than the mark" >&2; return 1 ;;'
        ' *-r$BROKEN-*) echo "OSError: no space left on device" >&2; return 1 ;; esac; touch "${@: -1}"; fi;'
        ' [ "${2-}" != hybridlib.campaign ] || [[ " $* " == *" --replicates $FOUND "* ]] || touch "${@: -1}"; }\n'
        "export -f python3\n"
    )
    tree = tmp_path / f"tree-{COMMIT}.tar.gz"
    with tarfile.open(tree, "w:gz") as tar:
        tar.add(tmp_path / "tree", arcname=".")
    return tree, cache


def wait_for_share(log: Path) -> str:
    for _ in range(100):
        if any(end in (log.read_text() if log.exists() else "") for end in ("share done", "share failed")):
            break
        time.sleep(0.1)
    return log.read_text()


def test_a_second_slot_runs_on_its_own_copy_of_the_cache(tmp_path):
    tree, cache = stand_in_tree(tmp_path)
    log, archive = (
        Path(f"/tmp/campaign-{SLOT}.log"),
        Path(f"/tmp/gpu-out/records-r{REPLICATE}-slot{SLOT}.tgz"),
    )
    log.unlink(missing_ok=True)
    archive.unlink(missing_ok=True)
    try:
        got = campaign("--tree", str(tree), "--slot", SLOT, REPLICATE)
        assert got.returncode == 0, got.stderr
        assert f"(log {log}, cache {cache}-{SLOT})" in got.stdout
        copy = Path(f"{cache}-{SLOT}")
        assert (copy / "students" / "s0" / "run.json").read_text() == "{}"  # the cache as it was at the start
        text = wait_for_share(log)
        assert (
            f"python3 -m hybridlib.campaign --preset gpu --arms arm_a arm_b --replicates {REPLICATE} "
            f"--newer /tmp/campaign-{SLOT}.mark "
            f"--pack /tmp/gpu-out/records-r{REPLICATE}-slot{SLOT}-partial.tgz | cache {copy} | commit {COMMIT} | "
            f"/tmp/tree-{SLOT}" in text
        ), text
        assert (
            "share done" in text and archive.exists()
        )  # the partial archive renamed when the replicate is done
    finally:
        for path in (log, archive, Path(f"/tmp/campaign-{SLOT}.mark")):
            path.unlink(missing_ok=True)
        shutil.rmtree(f"/tmp/tree-{SLOT}", ignore_errors=True)


def test_a_budget_share_trains_every_arm_of_its_budget_into_its_own_archive(tmp_path):
    """--budget N runs python -m hybridlib.campaign --budgets N (every arm of that budget: no --arms) for each
    replicate, packing into records-b<N>-r<R>-partial.tgz, renamed records-b<N>-r<R>.tgz when the replicate is done."""
    tree, cache = stand_in_tree(tmp_path)
    budget = "16777216"
    log, archive = (
        Path(f"/tmp/campaign-{SLOT}.log"),
        Path(f"/tmp/gpu-out/records-b{budget}-r{REPLICATE}-slot{SLOT}.tgz"),
    )
    log.unlink(missing_ok=True)
    archive.unlink(missing_ok=True)
    try:
        got = campaign("--tree", str(tree), "--slot", SLOT, "--budget", budget, REPLICATE)
        assert got.returncode == 0, got.stderr
        assert f"campaign: replicates {REPLICATE} of budget {budget} (log {log}" in got.stdout
        text = wait_for_share(log)
        assert (
            f"python3 -m hybridlib.campaign --preset gpu --budgets {budget} --replicates {REPLICATE} "
            f"--newer /tmp/campaign-{SLOT}.mark "
            f"--pack /tmp/gpu-out/records-b{budget}-r{REPLICATE}-slot{SLOT}-partial.tgz "
            f"| cache {cache}-{SLOT} | commit {COMMIT} | /tmp/tree-{SLOT}" in text
        ), text
        assert "--arms" not in text and "share done" in text and archive.exists()
        assert not Path(f"/tmp/gpu-out/records-b{budget}-r{REPLICATE}-slot{SLOT}-partial.tgz").exists()
    finally:
        for path in (log, archive, Path(f"/tmp/campaign-{SLOT}.mark")):
            path.unlink(missing_ok=True)
        shutil.rmtree(f"/tmp/tree-{SLOT}", ignore_errors=True)


@pytest.mark.parametrize(
    ("budget", "work"),
    [("", "--arms arm_b"), ("16777216", "--budgets 16777216 --arms arm_b")],
)
def test_a_share_with_arms_trains_only_those(tmp_path, budget, work):
    """--arms arm_b trains that arm of the plan (the stand-in's: arm_a arm_b) for each replicate, of the layout chapter
    or of the budget curve at --budget N; an arm not in the plan is refused, naming the plan's arms, before the
    second share's copy of the cache is made or anything runs."""
    tree, cache = stand_in_tree(tmp_path)
    name = f"records-b{budget}-r" if budget else "records-r"
    log, archive = Path(f"/tmp/campaign-{SLOT}.log"), Path(f"/tmp/gpu-out/{name}{REPLICATE}-slot{SLOT}.tgz")
    log.unlink(missing_ok=True)
    archive.unlink(missing_ok=True)
    at = ["--budget", budget] if budget else []
    try:
        bad = campaign("--tree", str(tree), "--slot", SLOT, *at, "--arms", "arm_b,arm_c", REPLICATE)
        assert bad.returncode == 2 and "--arms: 'arm_c' is not an arm of the gpu preset's" in bad.stderr
        assert "allowed: arm_a arm_b" in bad.stderr
        assert not Path(f"{cache}-{SLOT}").exists() and not log.exists()
        got = campaign("--tree", str(tree), "--slot", SLOT, *at, "--arms", "arm_b", REPLICATE)
        assert got.returncode == 0, got.stderr
        text = wait_for_share(log)
        assert (
            f"python3 -m hybridlib.campaign --preset gpu {work} --replicates {REPLICATE} "
            f"--newer /tmp/campaign-{SLOT}.mark --pack /tmp/gpu-out/{name}{REPLICATE}-slot{SLOT}-partial.tgz"
            in text
        ), text
        assert "arm_a" not in text and "share done" in text and archive.exists()
    finally:
        for path in (log, archive, Path(f"/tmp/campaign-{SLOT}.mark")):
            path.unlink(missing_ok=True)
        shutil.rmtree(f"/tmp/tree-{SLOT}", ignore_errors=True)


def test_a_slot_copy_cut_short_is_made_again(tmp_path):
    """A second share whose copy of the cache was cut short (here: a ``cp`` that makes the folder, then dies) copies
    it again when started anew, instead of running on the part that arrived."""
    tree, cache = stand_in_tree(tmp_path)
    dying = tmp_path / "bin"
    dying.mkdir()
    (dying / "cp").write_text('#!/bin/sh\nfor last; do :; done\nmkdir -p "$last"\nexit 1\n')
    (dying / "cp").chmod(0o755)
    log, archive = (
        Path(f"/tmp/campaign-{SLOT}.log"),
        Path(f"/tmp/gpu-out/records-r{REPLICATE}-slot{SLOT}.tgz"),
    )
    try:
        cut = subprocess.run(
            ["bash", str(CAMPAIGN), "--tree", str(tree), "--slot", SLOT, REPLICATE],
            cwd=ROOT,
            env={**os.environ, "PATH": f"{dying}:{os.environ['PATH']}"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert cut.returncode != 0 and not log.exists()  # nothing started on the part that arrived
        got = campaign("--tree", str(tree), "--slot", SLOT, REPLICATE)
        assert got.returncode == 0, got.stderr
        assert (Path(f"{cache}-{SLOT}") / "students" / "s0" / "run.json").read_text() == "{}"
        assert not Path(f"{cache}-{SLOT}.partial").exists()
        wait_for_share(log)
    finally:
        for path in (log, archive, Path(f"/tmp/campaign-{SLOT}.mark")):
            path.unlink(missing_ok=True)
        shutil.rmtree(f"/tmp/tree-{SLOT}", ignore_errors=True)


def test_a_replicate_found_in_carried_records_leaves_the_share_going(tmp_path):
    """A replicate whose every arm was found in carried records writes no archive: the share says so and goes on
    to the next replicate, whose archive is written."""
    tree, _ = stand_in_tree(tmp_path)
    log, archive = (
        Path(f"/tmp/campaign-{SLOT}.log"),
        Path(f"/tmp/gpu-out/records-r{REPLICATE}-slot{SLOT}.tgz"),
    )
    log.unlink(missing_ok=True)
    archive.unlink(missing_ok=True)
    try:
        got = campaign("--tree", str(tree), "--slot", SLOT, FOUND, REPLICATE)
        assert got.returncode == 0, got.stderr
        text = wait_for_share(log)
        assert f"replicate {FOUND}: every record found, nothing new" in text, text
        assert not Path(f"/tmp/gpu-out/records-r{FOUND}-slot{SLOT}.tgz").exists()
        assert f"--replicates {REPLICATE} " in text and "share done" in text and archive.exists()
    finally:
        for path in (log, archive, Path(f"/tmp/campaign-{SLOT}.mark")):
            path.unlink(missing_ok=True)
        shutil.rmtree(f"/tmp/tree-{SLOT}", ignore_errors=True)


def test_a_failed_replicate_stops_the_share_and_its_log_says_so(tmp_path):
    """A replicate whose campaign step fails ends the share there (the next replicate never starts) with the log's
    last line "share failed", the end line collect.sh --until waits for, never "share done"."""
    tree, _ = stand_in_tree(tmp_path)
    log = Path(f"/tmp/campaign-{SLOT}.log")
    log.unlink(missing_ok=True)
    try:
        got = campaign("--tree", str(tree), "--slot", SLOT, FAILS, REPLICATE)
        assert got.returncode == 0, got.stderr
        text = wait_for_share(log)
        assert text.rstrip().endswith("share failed") and "share done" not in text, text
        assert f"--replicates {REPLICATE} " not in text
        assert not Path(f"/tmp/gpu-out/records-r{REPLICATE}-slot{SLOT}.tgz").exists()
    finally:
        for path in (log, Path(f"/tmp/campaign-{SLOT}.mark")):
            path.unlink(missing_ok=True)
        shutil.rmtree(f"/tmp/tree-{SLOT}", ignore_errors=True)


@pytest.mark.parametrize("warm_up", [True, False])
def test_a_second_slot_starts_training_when_the_kernel_warm_up_has_ended(tmp_path, warm_up):
    """A slot >= 1 share whose pid file names a running warm.py (install.sh's kernel warm-up) logs that it waits and
    starts its first campaign step only after that process ended; a pid file naming another live process (a pid
    reused) does not hold it."""
    tree, _ = stand_in_tree(tmp_path)
    log = Path(f"/tmp/campaign-{SLOT}.log")
    log.unlink(missing_ok=True)
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3)", "warm.py" if warm_up else "x.py"]
    )
    (tmp_path / "warm.pid").write_text(f"{other.pid}\n")
    try:
        got = campaign(
            "--tree", str(tree), "--slot", SLOT, REPLICATE, env={"WARM_PID": str(tmp_path / "warm.pid")}
        )
        assert got.returncode == 0, got.stderr
        for _ in range(200):
            if "python3 -m hybridlib.campaign" in (log.read_text() if log.exists() else ""):
                break
            time.sleep(0.05)
        ended = other.poll() is not None
        text = wait_for_share(log)
        waits = f"waiting for the kernel warm-up, pid {other.pid}, to end"
        assert "share done" in text, text
        if warm_up:
            assert ended and text.index(waits) < text.index(f"replicate {REPLICATE}"), text
        else:
            assert not ended and waits not in text, text
    finally:
        other.kill()
        other.wait()
        for path in (
            log,
            Path(f"/tmp/gpu-out/records-r{REPLICATE}-slot{SLOT}.tgz"),
            Path(f"/tmp/campaign-{SLOT}.mark"),
        ):
            path.unlink(missing_ok=True)
        shutil.rmtree(f"/tmp/tree-{SLOT}", ignore_errors=True)


@pytest.mark.parametrize(
    ("check", "name", "replicates"),
    [("--lr-check", "records-lr-r", [FOUND, REPLICATE]), ("--other-teachers", "records-teachers-r", ["0"])],
)
def test_a_learning_rate_or_teachers_share_trains_scores_and_packs_each_replicate(
    tmp_path, check, name, replicates
):
    """--lr-check (--other-teachers: replicate 0 only) runs the layout chapter's replicates tool for that check and
    replicate with --score, then packs what it wrote since the mark into <name><R>-partial.tgz, renamed when done;
    a replicate whose students were all carried packs nothing and the share goes on. The best FA-first layout it
    names comes from the records alone (HYBRIDLIB_RECORDS_ONLY): when a student of those arms is missing the share
    is refused with its name before the slot's cache is copied or anything runs."""
    tree, cache = stand_in_tree(tmp_path)
    last = replicates[-1]
    log, archive = Path(f"/tmp/campaign-{SLOT}.log"), Path(f"/tmp/gpu-out/{name}{last}-slot{SLOT}.tgz")
    log.unlink(missing_ok=True)
    archive.unlink(missing_ok=True)
    try:
        missing = "sandwich (gdn, 1,048,576 tokens, data_seed=9, init_seed=9)"
        bad = campaign("--tree", str(tree), "--slot", SLOT, check, *replicates, env={"MISSING": missing})
        assert bad.returncode == 2, bad.stderr
        assert f"the cache lacks one: FileNotFoundError: student {missing} is not in the cache" in bad.stderr
        assert not Path(f"{cache}-{SLOT}").exists() and not log.exists()
        got = campaign("--tree", str(tree), "--slot", SLOT, check, *replicates)
        assert got.returncode == 0, got.stderr
        assert f"of the {check[2:]} (best FA-first: reverse_periodic)" in got.stdout
        text = wait_for_share(log)
        mark = f"/tmp/campaign-{SLOT}.mark"
        for r in replicates:
            assert (
                f"python3 -m hybridlib.findings.layout.replicates --preset gpu {check} --replicates {r} --score "
                f"| cache {cache}-{SLOT} | commit {COMMIT} | /tmp/tree-{SLOT}" in text
            ), text
            assert (
                f"python3 -m hybridlib.carry pack --newer {mark} /tmp/gpu-out/{name}{r}-slot{SLOT}-partial.tgz"
                in text
            )
        assert (f"replicate {FOUND}: every record found, nothing new" in text) == (FOUND in replicates), text
        assert "share done" in text and archive.exists() and "hybridlib.campaign" not in text
    finally:
        for path in (
            log,
            archive,
            Path(f"/tmp/campaign-{SLOT}.mark"),
            Path(f"/tmp/campaign-{SLOT}.mark.err"),
        ):
            path.unlink(missing_ok=True)
        shutil.rmtree(f"/tmp/tree-{SLOT}", ignore_errors=True)


def test_a_pack_that_fails_otherwise_stops_the_share(tmp_path):
    """carry's failure to pack for another reason than nothing new ends the share with "share failed" and its
    error in the log; the next replicate never starts."""
    tree, _ = stand_in_tree(tmp_path)
    log = Path(f"/tmp/campaign-{SLOT}.log")
    log.unlink(missing_ok=True)
    try:
        got = campaign("--tree", str(tree), "--slot", SLOT, "--lr-check", BROKEN, REPLICATE)
        assert got.returncode == 0, got.stderr
        text = wait_for_share(log)
        assert "OSError: no space left on device" in text and text.rstrip().endswith("share failed"), text
        assert f"--replicates {REPLICATE} " not in text
    finally:
        for path in (log, Path(f"/tmp/campaign-{SLOT}.mark"), Path(f"/tmp/campaign-{SLOT}.mark.err")):
            path.unlink(missing_ok=True)
        shutil.rmtree(f"/tmp/tree-{SLOT}", ignore_errors=True)
