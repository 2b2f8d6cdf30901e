"""Compile the fla / TileLang Gated DeltaNet kernels for head shapes the chapters use (disk caches):
``python warm.py [HxD ...]`` (heads x head dim, default every shape of :data:`SHAPES`); ``--check HxD ...`` only
validates the shapes (install.sh, before it starts the detached warm-up)."""

import sys
import time

#: heads x head dim -> (heads, dim): the SmolLM2 and Gemma students, MQAR (Qwen3-4B: committed benchmark)
SHAPES = {"9x64": (9, 64), "4x256": (4, 256), "2x64": (2, 64)}


def shapes(names: list[str]) -> list[tuple[int, int]]:
    """The (heads, dim) of ``names`` (every shape when none); exits 2 naming the allowed ones for another."""
    if bad := [n for n in names if n not in SHAPES]:
        print(
            f"warm.py: shapes {bad} are not warmed here; allowed: {', '.join(SHAPES)} (heads x head dim)",
            file=sys.stderr,
        )
        sys.exit(2)
    return [SHAPES[n] for n in names] or list(SHAPES.values())


def main(argv: list[str]) -> None:
    check = argv[:1] == ["--check"]
    chosen = shapes(argv[1:] if check else argv)
    if check:
        print("warm.py: " + " ".join(f"H={h} D={d}" for h, d in chosen))
        return
    import torch

    import kernels

    t0 = time.perf_counter()
    for heads, dim in chosen:
        q, k, v = (
            torch.randn(2, 1024, heads, dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(3)
        )
        g = torch.nn.functional.logsigmoid(torch.randn(2, 1024, heads, device="cuda")).requires_grad_()
        beta = torch.rand(2, 1024, heads, device="cuda").requires_grad_()
        o, _ = kernels.gated_delta_rule(q, k, v, g, beta, impl="fla", use_qk_l2norm=True)
        o.float().sum().backward()
        torch.cuda.synchronize()
        print(f"H={heads} D={dim} ready at {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
