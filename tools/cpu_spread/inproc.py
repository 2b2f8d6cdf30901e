"""Does a CPU setting made inside Python (where a package starts) take effect like one made in the shell?

``python tools/cpu_spread/inproc.py [before-import|after-import|after-first-op] [K=V ...]`` sets the variables
at that moment and prints torch's CPU capability and hashes of two computations: an ATen reduction
(log-softmax + sum, vectorised per capability) and an MKL matrix product (float32 sgemm), and of the random
inputs themselves (``torch.randn`` is vectorised too).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys


def fingerprint(torch) -> dict:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 8192, generator=g)
    a, b = torch.randn(257, 129, generator=g), torch.randn(129, 263, generator=g)
    aten = torch.log_softmax(x, -1).sum(-1)
    mkl = a @ b
    digest = lambda t: hashlib.sha256(t.numpy().tobytes()).hexdigest()[:12]
    return {
        "capability": torch.backends.cpu.get_cpu_capability(),
        "randn": digest(torch.cat([x.flatten(), a.flatten()])),
        "aten": digest(aten),
        "mkl": digest(mkl),
        "mkl_same_inputs": digest(a.double().float() @ b),
    }


def main() -> None:
    when, pairs = sys.argv[1], [p.partition("=")[::2] for p in sys.argv[2:]]
    if when == "before-import":
        os.environ.update(pairs)
    import torch

    if when == "after-first-op":
        torch.ones(8).sum()
        torch.ones(8, 8) @ torch.ones(8, 8)
    if when in ("after-import", "after-first-op"):
        os.environ.update(pairs)
    print(json.dumps({"when": when, "set": dict(pairs), **fingerprint(torch)}))


if __name__ == "__main__":
    main()
