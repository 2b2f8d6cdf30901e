"""fla's CUDA kernels against the pure-PyTorch chunk path (float32) and the float64 recurrence."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from kernels import gated_delta_rule, sliding_window_attention, window_linear_attention

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    return ((x.double() - ref.double()).norm() / ref.double().norm()).item()


def inputs(B, T, H, HV, K, V, dtype, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, device="cuda")
    return {
        "q": r(B, T, H, K).to(dtype),
        "k": r(B, T, H, K).to(dtype),
        "v": r(B, T, HV, V).to(dtype),
        "g": F.logsigmoid(r(B, T, HV) + 3.0),  # float32, as fla's gates usually are
        "beta": torch.sigmoid(r(B, T, HV)).to(dtype),
        "initial_state": r(B, HV, K, V) * 0.1,
    }


@pytest.mark.parametrize("B,T,H,HV,K,V", [(2, 300, 4, 4, 64, 64), (1, 1000, 2, 2, 128, 128)])
def test_fla_matches_chunk_reference_forward_and_all_gradients(B, T, H, HV, K, V):
    pytest.importorskip("fla.ops.gated_delta_rule")
    xs = {n: x.requires_grad_() for n, x in inputs(B, T, H, HV, K, V, torch.bfloat16).items()}
    ref_in = {n: x.detach().float().requires_grad_() for n, x in xs.items()}
    o, s = gated_delta_rule(**xs, use_qk_l2norm=True, output_final_state=True, impl="fla")
    o_ref, s_ref = gated_delta_rule(**ref_in, use_qk_l2norm=True, output_final_state=True, impl="chunk")
    assert o.dtype == torch.bfloat16 and s.dtype == torch.float32
    assert rel_err(o, o_ref) < 1e-2 and rel_err(s, s_ref) < 1e-2
    w_o, w_s = torch.randn_like(o_ref), torch.randn_like(s_ref)
    grads = torch.autograd.grad((o.float() * w_o).sum() + (s * w_s).sum(), list(xs.values()))
    refs = torch.autograd.grad((o_ref * w_o).sum() + (s_ref * w_s).sum(), list(ref_in.values()))
    for name, g, r in zip(xs, grads, refs):
        assert rel_err(g, r) < 2e-2, f"grad of {name}: relative error {rel_err(g, r):.3g}"


def test_fla_decode_step_matches_recurrence():
    pytest.importorskip("fla.ops.gated_delta_rule")
    xs = inputs(2, 9, 2, 2, 64, 64, torch.float32)
    o_ref, s_ref = gated_delta_rule(
        **{n: x.double() for n, x in xs.items()}, use_qk_l2norm=True, output_final_state=True, impl="naive"
    )
    state, outs = xs.pop("initial_state"), []
    with torch.no_grad():  # T == 1 without autograd takes fla's fused recurrent kernel
        for t in range(9):
            o, state = gated_delta_rule(
                **{n: x[:, t : t + 1] for n, x in xs.items()},
                initial_state=state,
                use_qk_l2norm=True,
                output_final_state=True,
                impl="fla",
            )
            outs.append(o)
    assert rel_err(torch.cat(outs, 1), o_ref) < 1e-3 and rel_err(state, s_ref) < 1e-3


def test_chunk_and_windowed_mixers_on_cuda_match_cpu():
    xs = inputs(1, 100, 2, 2, 32, 16, torch.float32)
    o_gpu, _ = gated_delta_rule(**xs, impl="chunk", chunk_size=32)
    o_cpu, _ = gated_delta_rule(**{n: x.cpu() for n, x in xs.items()}, impl="chunk", chunk_size=32)
    assert rel_err(o_gpu.cpu(), o_cpu) < 1e-4
    q, k, v = xs["q"], xs["k"], xs["v"]
    qf, kf = q.softmax(-1), k.softmax(-1)
    gamma = torch.full((2,), 0.5, device="cuda")
    y_gpu, _ = window_linear_attention(q, k, v, qf, kf, window=16, softmax_weight=gamma)
    y_cpu, _ = window_linear_attention(
        *(x.cpu() for x in (q, k, v, qf, kf)), window=16, softmax_weight=gamma.cpu()
    )
    assert rel_err(y_gpu.cpu(), y_cpu) < 1e-4
    a_gpu = sliding_window_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), window=24)
    a_cpu = sliding_window_attention(q.cpu(), k.cpu(), v.cpu(), window=24)
    assert rel_err(a_gpu.cpu(), a_cpu) < 2e-2
