"""tools/offline_gpu/todo.py: the replicates of the layout chapter's gpu pages that given records archives lack,
read from a temporary cache holding only those archives (nothing trained, this checkout's cache untouched)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hybridlib.findings.layout.spec import LAYOUTS
from hybridlib.layouts import SWA_ARM

ROOT = Path(__file__).resolve().parents[1]
TODO = ROOT / "tools" / "offline_gpu" / "todo.py"
FROZEN = ROOT / "data" / "gpu_memo" / "3713393063e5efbb8429c420751e28f7dc6c08ba"
#: replicate 0 of the layout chapter: the SWA control in 3713393's archive, its six GDN arms in a6122238's
REPLICATE_0 = [
    FROZEN / "records-r0.tgz",
    ROOT / "data/gpu_memo/a6122238cd42f4fa447ed2d896307cb5b7af7edd/records-r0-partial.tgz",
]
ARMS = [*LAYOUTS, SWA_ARM]  # the gpu preset's arms, in the order the tool prints them
#: the four arms the committed replicate 1 archive holds
FOUR = ["standard_periodic", "reverse_periodic", "sandwich", "standard_periodic+swa"]


def todo(*archives: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(TODO), *map(str, archives)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_replicate_0_and_1_leave_the_rest_lacking():
    got = todo(*REPLICATE_0, FROZEN / "records-r1.tgz")
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    expected = [
        f"{arm}: 2 of 10, lacking 2 3 4 5 6 7 8 9"
        if arm in FOUR
        else f"{arm}: 1 of 10, lacking 1 2 3 4 5 6 7 8 9"
        for arm in ARMS
    ]
    assert lines == [
        *expected,
        "lr_check: 0 of 10, lacking 0 1 2 3 4 5 6 7 8 9",  # waits for every FA-first replicate
        "other_teachers: 0 of 1, lacking 0",
        f"{4 * 8 + 3 * 9 + 10 + 1} of 81 replicates lacking (3 archives)",
    ]


def test_a_path_that_is_not_an_archive_is_refused():
    got = todo(ROOT / "README.md")
    assert (
        got.returncode == 2 and "ARCHIVE must be a records .tgz" in got.stderr and "README.md" in got.stderr
    )
