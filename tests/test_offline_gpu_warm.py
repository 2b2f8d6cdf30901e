"""tools/offline_gpu/warm.py and install.sh site: the kernel warm-up's head shapes ($WARM_SHAPES, default all) are
checked before anything is installed, a bad one refused naming the allowed shapes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WARM = ROOT / "tools" / "offline_gpu" / "warm.py"


def warm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(WARM), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("names", "printed"),
    [([], "H=9 D=64 H=4 D=256 H=2 D=64"), (["9x64"], "H=9 D=64"), (["2x64", "4x256"], "H=2 D=64 H=4 D=256")],
)
def test_check_names_the_shapes_it_would_warm(names, printed):
    got = warm("--check", *names)
    assert got.returncode == 0 and got.stdout.strip() == f"warm.py: {printed}", got.stderr


def test_a_bad_shape_is_refused_naming_the_allowed_ones():
    got = warm("9by64")
    assert got.returncode == 2
    assert "shapes ['9by64'] are not warmed here; allowed: 9x64, 4x256, 2x64 (heads x head dim)" in got.stderr


def test_install_site_refuses_a_bad_shape_before_installing(tmp_path):
    """No payload in DIR: the shape check fails first, so nothing is extracted and no /tmp/site is touched."""
    got = subprocess.run(
        ["bash", "tools/offline_gpu/install.sh", "site", str(tmp_path / "none")],
        cwd=ROOT,
        env=os.environ | {"WARM_SHAPES": "9x64 3x3"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert got.returncode == 2 and "shapes ['3x3'] are not warmed here" in got.stderr
    assert "tar" not in got.stderr
