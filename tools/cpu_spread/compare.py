"""Run ``probe.py`` under several CPU settings (each in a fresh process) and compare the trained weights.

``python tools/cpu_spread/compare.py OUT_DIR``: prints one line per setting pair with "bitwise equal" or the
max |difference| of the weights and losses, and writes ``OUT_DIR/probe.json``.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# name -> (environment set in the shell, variables set inside the process after `import torch`)
SETTINGS = {
    "native": ({}, []),
    "default": ({"ATEN_CPU_CAPABILITY": "default"}, []),
    "avx2": ({"ATEN_CPU_CAPABILITY": "avx2"}, []),
    "avx512": ({"ATEN_CPU_CAPABILITY": "avx512"}, []),
    "cbwr_avx2": ({"MKL_CBWR": "AVX2"}, []),
    "default+cbwr_avx2": ({"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "AVX2"}, []),
    "avx2+cbwr_avx2": ({"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}, []),
    "avx2+cbwr_avx2+onednn_avx2": (
        {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
        [],
    ),
    "cbwr_compatible": ({"MKL_CBWR": "COMPATIBLE"}, []),
    "threads1": ({"OMP_NUM_THREADS": "1"}, []),
    "threads1+cbwr_avx2": ({"OMP_NUM_THREADS": "1", "MKL_CBWR": "AVX2"}, []),
    "inproc:default": ({}, ["ATEN_CPU_CAPABILITY=default"]),
    "inproc:cbwr_avx2": ({}, ["MKL_CBWR=AVX2"]),
}


def run(name: str, out: Path) -> dict:
    done_before = out / f"{name}.json"
    if done_before.exists() and (out / f"{name}.npz").exists():  # resume an interrupted comparison
        return json.loads(done_before.read_text())
    shell, inproc = SETTINGS[name]
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "OMP_NUM_THREADS")
    } | shell
    cmd = [
        sys.executable,
        str(HERE / "probe.py"),
        str(out / f"{name}.npz"),
        *[f"--set-env={kv}" for kv in inproc],
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    record = json.loads(done.stdout.strip().splitlines()[-1])
    done_before.write_text(json.dumps(record))
    return record


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    names = sys.argv[2:] or list(SETTINGS)
    records = {}
    for name in names:
        records[name] = run(name, out)
        r = records[name]
        print(
            name,
            r["capability"],
            r["threads"],
            r["llama_full_sha"],
            r["llama_micro1_sha"],
            r["teacher_sha"],
            flush=True,
        )
    pairs = []
    for a, b in itertools.combinations(names, 2):
        wa, wb = np.load(out / f"{a}.npz"), np.load(out / f"{b}.npz")
        row = {"a": a, "b": b}
        for tag in wa.files:
            row[f"{tag}_max_abs"] = float(np.abs(wa[tag] - wb[tag]).max())
            la, lb = records[a][f"{tag}_losses"], records[b][f"{tag}_losses"]
            row[f"{tag}_loss_max_abs"] = float(np.abs(np.subtract(la, lb)).max())
        pairs.append(row)
    # accumulation vs full batch within one setting (what the trainer test compares)
    for name in names:
        w = np.load(out / f"{name}.npz")
        records[name]["full_vs_micro_max_abs"] = float(np.abs(w["llama_full"] - w["llama_micro1"]).max())
    (out / "probe.json").write_text(json.dumps({"settings": records, "pairs": pairs}, indent=1))
    for row in pairs:
        print(row["a"], "vs", row["b"], {k: f"{v:.1e}" for k, v in row.items() if k not in ("a", "b")})
    for name in names:
        print(name, "full vs micro-batch 1:", f"{records[name]['full_vs_micro_max_abs']:.2e}")


if __name__ == "__main__":
    main()
