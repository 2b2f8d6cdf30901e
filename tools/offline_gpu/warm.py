"""Compile the fla / TileLang Gated DeltaNet kernels for the head shapes the chapters use (disk caches)."""

import time

import torch

import kernels

t0 = time.perf_counter()
for heads, dim in (
    (9, 64),
    (4, 256),
    (2, 64),
):  # SmolLM2 and Gemma students, MQAR (Qwen3-4B: committed benchmark)
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
