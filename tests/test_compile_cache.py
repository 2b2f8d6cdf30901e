"""Compile artefacts kept across processes (hybridlib.train.compile_cache): a process on an empty inductor cache
(a fresh machine) compiles from the artefacts an earlier process saved - inductor's own FX-graph cache counters
say hit, not miss - and computes what eager does."""

import json
import os
import subprocess
import sys
from pathlib import Path

from hybridlib.paths import REPO_ROOT

SCRIPT = """
import json, torch
from torch._dynamo.utils import counters
from hybridlib.train import compile_cache
status = compile_cache.activate()
f = torch.compile(lambda x: torch.sin(x) * 2 + x)
x = torch.arange(6.0)
y = f(x)
cache = counters["inductor"]
err = float((y - (torch.sin(x) * 2 + x)).abs().max())
hits, misses = cache["fxgraph_cache_hit"], cache["fxgraph_cache_miss"]
print(json.dumps({"status": status, "err": err, "hits": hits, "misses": misses}))
"""


def _run(tmp: Path, inductor: str, **env: str) -> dict:
    """SCRIPT in a fresh process whose inductor cache is ``tmp/inductor`` (empty unless reused)."""
    full = (
        os.environ
        | {
            "HYBRIDLIB_CACHE": str(tmp / "cache"),
            "TORCHINDUCTOR_CACHE_DIR": str(tmp / inductor),
            "TRITON_CACHE_DIR": str(tmp / inductor / "triton"),
            "PYTHONPATH": str(REPO_ROOT),
        }
        | env
    )
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=full, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_artefacts_saved_at_exit_are_restored_on_an_empty_machine_cache(tmp_path):
    cold = _run(tmp_path, "inductor-a")
    saved = tmp_path / "cache" / "compile"
    files = list(saved.glob("*.bin"))
    assert not cold["status"]["restored"] and cold["misses"] >= 1 and cold["hits"] == 0
    assert len(files) == 1 and files[0].stat().st_size > 0
    warm = _run(tmp_path, "inductor-b")  # another empty inductor cache: only the artefact file can help
    assert warm["status"]["restored"] and warm["status"]["restored_bytes"] == files[0].stat().st_size
    assert warm["hits"] >= 1 and warm["misses"] == 0
    assert cold["err"] < 1e-6 and warm["err"] < 1e-6
    off = _run(tmp_path, "inductor-c", HYBRIDLIB_COMPILE_CACHE="0")  # switched off: a cold compile on purpose
    assert not off["status"]["restored"] and off["misses"] >= 1 and off["hits"] == 0
