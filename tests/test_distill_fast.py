"""The fast distillation step against the eager one: fused linear-KL, shifted-sum short convolution, and the
whole step (DistillationModel, eager and compiled) on tiny hybrids of Llama and Gemma 3, checked against an
independent reference (full logits of both models and the chunked float32 ``forward_kl``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from tiny_models import tiny_causal_lm

from hybridlib.convert import convert_to_hybrid
from hybridlib.losses import forward_kl, linear_forward_kl
from hybridlib.train.objectives import DistillationModel
from kernels.layers.gated_deltanet import PROJECTIONS, GatedDeltaNet, GatedDeltaNetState, ShortConvolution
from kernels.ops.short_conv import causal_conv_silu
from kernels.ops.split_linear import split_linear

F64 = torch.float64
SMALL = {
    "vocab_size": 97,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "tie_word_embeddings": True,
}


def rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    return float((x - ref).norm() / ref.norm())


@pytest.mark.parametrize("tau,chunk_rows", [(1.0, 4), (2.0, 64), (0.5, None)])
def test_linear_kl_matches_kl_of_full_logits_in_float64(tau, chunk_rows):
    """Loss and both gradients against the KL written out on float64 logits (autograd differentiates it); float64
    throughout leaves only summation order (~1e-16), so 1e-12 fails any real difference."""
    gen = torch.Generator().manual_seed(0)
    h_s, h_t = (
        torch.randn(3, 7, 16, generator=gen, dtype=F64),
        torch.randn(3, 7, 24, generator=gen, dtype=F64),
    )
    w_s, w_t = torch.randn(50, 16, generator=gen, dtype=F64), torch.randn(50, 24, generator=gen, dtype=F64)
    h_s.requires_grad_(True)
    w_s.requires_grad_(True)
    loss = linear_forward_kl(h_s, w_s, h_t, w_t, tau, chunk_rows)
    grads = torch.autograd.grad(3.0 * loss, (h_s, w_s))  # a non-unit upstream gradient must scale both
    log_p_s, log_p_t = F.log_softmax(h_s @ w_s.T / tau, -1), F.log_softmax(h_t @ w_t.T / tau, -1)
    ref = tau**2 * (log_p_t.exp() * (log_p_t - log_p_s)).sum(-1).mean()
    refs = torch.autograd.grad(3.0 * ref, (h_s, w_s))
    assert loss.dtype == F64 and abs(loss.item() - ref.item()) < 1e-12 * ref.item()
    for g, r in zip(grads, refs):
        assert g.dtype == F64 and rel(g, r) < 1e-12


def test_linear_kl_refuses_mismatched_inputs():
    h, w = torch.zeros(2, 3, 4), torch.zeros(5, 4)
    with pytest.raises(ValueError, match="differ in"):
        linear_forward_kl(h, w, torch.zeros(2, 4, 4), w)
    with pytest.raises(ValueError, match="vocabularies differ"):
        linear_forward_kl(h, w, h, torch.zeros(6, 4))
    with pytest.raises(ValueError, match="tau"):
        linear_forward_kl(h, w, h, w, tau=0.0)


def test_short_convolution_is_the_causal_depthwise_conv1d():
    """The shifted multiply-adds against F.conv1d on the left-padded input (float64: exact up to rounding)."""
    conv = ShortConvolution(6, 4).double()
    torch.nn.init.normal_(conv.weight)
    x = torch.randn(2, 9, 6, dtype=F64)
    y, past = conv(x)
    ref = F.silu(F.conv1d(F.pad(x.transpose(1, 2), (3, 0)), conv.weight, groups=6)).transpose(1, 2)
    assert rel(y, ref) < 1e-14 and torch.equal(past, x.transpose(1, 2)[..., -3:])
    y_tail, _ = conv(x[:, 5:], past=conv(x[:, :5])[1])  # decoding in two pieces continues the sequence
    assert rel(y_tail, y[:, 5:]) < 1e-14


def test_short_convolution_refuses_bad_input_before_any_work():
    """The parameter and its allowed values in the message; fla's kernel needs CUDA and no past state."""
    x, w = torch.zeros(1, 5, 6), torch.zeros(6, 4)
    with pytest.raises(
        ValueError, match=r"impl='triton' is not supported; allowed values: \('torch', 'fla', 'fla_onepass'\)"
    ):
        causal_conv_silu(x, w, impl="triton")
    for impl in ("fla", "fla_onepass"):
        with pytest.raises(ValueError, match=f"impl='{impl}' runs on CUDA without a past state"):
            causal_conv_silu(x, w, impl=impl)
    with pytest.raises(ValueError, match=r"need x \[B, T, C\] and weight \[C, K\]"):
        causal_conv_silu(x, torch.zeros(5, 4))
    with pytest.raises(ValueError, match="conv_impl='cuda' is not supported"):
        GatedDeltaNet(12, 2, 4, 4, conv_impl="cuda")
    with pytest.raises(
        ValueError,
        match=r"projections='split' is not supported; allowed values: \('fused', 'separate', 'split_backward'\)",
    ):
        GatedDeltaNet(12, 2, 4, 4, projections="split")


def test_separate_projections_give_the_fused_layers_outputs_and_gradients():
    """Four matmuls instead of one over the concatenated weights, and one forward with four backward: the same
    function (float64, rounding apart), outputs and every parameter's gradient; decoding from a cache too."""
    torch.manual_seed(0)
    layer = GatedDeltaNet(12, 2, 4, 6).double()
    x = torch.randn(2, 7, 12, dtype=F64)
    results = {}
    for projections in PROJECTIONS:
        layer.projections = projections
        layer.zero_grad()
        y = layer(x)
        (y * torch.linspace(-1, 1, y.numel(), dtype=F64).view_as(y)).sum().backward()
        state = GatedDeltaNetState()
        steps = torch.cat([layer(x[:, t : t + 1], cache=state) for t in range(x.shape[1])], dim=1)
        grads = {n: p.grad.clone() for n, p in layer.named_parameters()}
        results[projections] = (y.detach(), steps.detach(), grads)
    y_f, step_f, g_f = results["fused"]
    assert rel(step_f, y_f) < 1e-12
    for other in PROJECTIONS[1:]:
        y_s, step_s, g_s = results[other]
        assert rel(y_s, y_f) < 1e-13 and rel(step_s, step_f) < 1e-13
        assert g_f.keys() == g_s.keys() and all(rel(g_s[n], g_f[n]) < 1e-12 for n in g_f)
    assert all(g_f[n].abs().sum() > 0 for n in ("q_proj.weight", "g_proj.weight", "q_conv.weight"))


def test_split_linear_is_each_linear_map_with_its_gradients():
    """Outputs against ``F.linear`` per weight and gradients by ``gradcheck`` (finite differences, float64), with
    the input's or one weight's gradient switched off."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 5, generator=gen, dtype=F64, requires_grad=True)
    ws = [torch.randn(o, 5, generator=gen, dtype=F64, requires_grad=True) for o in (4, 2, 3)]
    out = split_linear(x, ws)
    assert [tuple(o.shape) for o in out] == [(2, 3, 4), (2, 3, 2), (2, 3, 3)]
    assert all(torch.equal(o, F.linear(x, w)) or rel(o, F.linear(x, w)) < 1e-15 for o, w in zip(out, ws))
    assert torch.autograd.gradcheck(lambda x, *ws: split_linear(x, ws), (x, *ws))
    ws[1].requires_grad_(False)
    assert torch.autograd.gradcheck(lambda x, a, c: split_linear(x, (a, ws[1], c)), (x, ws[0], ws[2]))
    assert torch.autograd.gradcheck(lambda *ws: split_linear(x.detach(), ws), (ws[0], ws[2]))


def test_split_linear_under_autocast_rounds_as_the_fused_linear():
    """bfloat16 autocast on float32 weights (the chapters' training): outputs identical to ``F.linear`` over the
    concatenated weights (the same matmul), gradients in each input's dtype within a few bf16 roundings
    (2^-8 relative) of the fused linear's (autograd's backward of the split)."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, 6, 16, generator=gen, requires_grad=True)
    ws = [torch.randn(o, 16, generator=gen, requires_grad=True) for o in (8, 8, 12)]
    probe = [torch.randn(4, 6, o, generator=gen) for o in (8, 8, 12)]
    grads = {}
    for name in ("split", "fused"):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if name == "split":
                out = split_linear(x, ws)
            else:
                out = F.linear(x, torch.cat(ws)).split([8, 8, 12], dim=-1)
        assert all(o.dtype == torch.bfloat16 for o in out)
        sum((o.float() * p).sum() for o, p in zip(out, probe)).backward()
        grads[name] = (out, x.grad.clone(), [w.grad.clone() for w in ws])
        x.grad = None
        for w in ws:
            w.grad = None
    (out_s, dx_s, dw_s), (out_f, dx_f, dw_f) = grads["split"], grads["fused"]
    assert all(torch.equal(a, b) for a, b in zip(out_s, out_f))
    assert dx_s.dtype == torch.float32 and all(g.dtype == torch.float32 for g in dw_s)
    # dW: the same dot products (0 on this test's CPUs); dx: three bf16 products summed instead of one (0.3%)
    assert rel(dx_s, dx_f) < 2**-6 and all(rel(a, b) < 2**-8 for a, b in zip(dw_s, dw_f))


@pytest.mark.slow
def test_compiled_gdn_layer_with_split_backward_has_no_graph_break(inductor_at_capability):
    """The custom backward traced by torch.compile(fullgraph=True) (inductor on CPU; a graph break raises): the
    eager fused layer's output and gradients within float32 rounding as the compiled step's test (1e-4: inductor
    reorders sums; observed up to 1.3e-5, in the two-element A_log and dt_bias gradients under avx2)."""
    import torch._dynamo

    torch._dynamo.reset()
    torch.manual_seed(0)
    layer = GatedDeltaNet(24, 2, 8, 8)
    x = torch.randn(2, 9, 24)
    weight = torch.linspace(-1, 1, x.numel()).view_as(x)
    out = {}
    for projections, fn in [("fused", layer), ("split_backward", torch.compile(layer, fullgraph=True))]:
        layer.projections = projections
        y = fn(x)
        out[projections] = (y.detach(), torch.autograd.grad((y * weight).sum(), list(layer.parameters())))
    (y_f, g_f), (y_s, g_s) = out["fused"], out["split_backward"]
    assert rel(y_s, y_f) < 1e-4 and all(rel(a, b) < 1e-4 for a, b in zip(g_s, g_f))


def test_split_linear_names_the_bad_weights():
    with pytest.raises(
        ValueError, match=r"weights must be one or more \[O_i, D\] matrices with D = x.shape\[-1\] = 5"
    ):
        split_linear(torch.zeros(2, 5), [torch.zeros(3, 4)])
    with pytest.raises(ValueError, match="weights must be one or more"):
        split_linear(torch.zeros(2, 5), [])


def _pair(family: str):
    gemma = {"sliding_window": 4, "query_pre_attn_scalar": 8} if family == "gemma3" else {}
    teacher = tiny_causal_lm(family, num_hidden_layers=4, **SMALL, **gemma)
    student = convert_to_hybrid(teacher, [1, 3], "gdn").train()
    return student, teacher.requires_grad_(False)


def _eager_reference(student, teacher, ids: torch.Tensor) -> tuple[float, dict[str, torch.Tensor]]:
    loss = forward_kl(student(input_ids=ids).logits, teacher(input_ids=ids).logits)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in student.named_parameters()}
    student.zero_grad(set_to_none=True)
    return loss.item(), grads


def _check_step(
    model: DistillationModel,
    ids: torch.Tensor,
    tol: float,
    reference: tuple[float, dict[str, torch.Tensor]] | None = None,
) -> None:
    """``model``'s loss and student gradients against :func:`_eager_reference` (computed here unless given:
    a layer-wise compiled model compiles its layers in place, so its reference is taken before)."""
    ref_loss, ref_grads = reference or _eager_reference(model.student, model.teacher, ids)
    loss = model(ids)
    loss.backward()
    assert loss.item() == pytest.approx(ref_loss, rel=tol)
    errors = {n: rel(p.grad, ref_grads[n]) for n, p in model.student.named_parameters()}
    assert max(errors.values()) < tol, errors


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_fused_step_matches_the_eager_step(family):
    """Loss and every student gradient, float32 on CPU. Both sides compute the same function in float32 with
    different groupings (chunked logits, shifted-sum convolution), so they differ by float32 rounding
    amplified through 4 layers (observed <= 2e-6); 1e-4 is far below any real error (a wrong scale or a dropped
    term moves them by O(1))."""
    student, teacher = _pair(family)
    ids = torch.randint(0, SMALL["vocab_size"], (2, 16), generator=torch.Generator().manual_seed(0))
    _check_step(DistillationModel(student, teacher), ids, 1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("regional", [False, True])
def test_compiled_step_matches_the_eager_step_without_graph_breaks(regional, inductor_at_capability):
    """torch.compile of both backbones, whole or layer by layer (inductor on CPU, ~2 minutes on one core): no
    graph break, same loss and gradients as the eager reference within float32 rounding (inductor reorders and
    fuses; same 1e-4). Layer by layer, layers of one class share their graphs."""
    import torch._dynamo

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    student, teacher = _pair("llama")
    ids = torch.randint(0, SMALL["vocab_size"], (2, 16), generator=torch.Generator().manual_seed(1))
    reference = _eager_reference(student, teacher, ids)
    _check_step(DistillationModel(student, teacher, compile=True, regional=regional), ids, 1e-4, reference)
    assert not torch._dynamo.utils.counters["graph_break"]
    # whole: one graph per backbone; layer by layer: the teacher's layer, the student's FA and GDN layers (of its
    # 4 layers, 2 are GDN), each shared by every layer of its kind
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == (3 if regional else 2)
