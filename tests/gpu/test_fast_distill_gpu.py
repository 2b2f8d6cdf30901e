"""The fast distillation path on CUDA: fla's chunk kernel as a torch.library op (same numbers as fla's own entry
point, schema / fake / autograd checked by opcheck, compiled without graph breaks), fla's short convolution as
one (against the shifted-sum path), and the bf16 fused linear-KL against a float64 reference."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hybridlib.losses import linear_forward_kl
from kernels import causal_conv_silu, gated_delta_rule
from kernels.layers import GatedDeltaNet
from kernels.layers.gated_deltanet import DEFAULT_PROJECTIONS, PROJECTIONS
from kernels.ops import short_conv
from kernels.ops.conv_onepass import conv_silu_bwd_onepass

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    return ((x.double() - ref.double()).norm() / ref.double().norm()).item()


def gdr_inputs(B=2, T=200, H=3, K=64, V=64, seed=0) -> dict[str, torch.Tensor]:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, device="cuda")
    return {
        "q": r(B, T, H, K).bfloat16(),
        "k": r(B, T, H, K).bfloat16(),
        "v": r(B, T, H, V).bfloat16(),
        "g": F.logsigmoid(r(B, T, H) + 3.0),
        "beta": torch.sigmoid(r(B, T, H)),
    }


def test_custom_op_equals_fla_entry_point_forward_and_gradients():
    """The op runs fla's own forward / backward functions: bit-for-bit the same as ``chunk_gated_delta_rule``
    up to kernel non-determinism (atomics in the backward), far below bf16 rounding (2e-3 allowed)."""
    chunk = pytest.importorskip("fla.ops.gated_delta_rule").chunk_gated_delta_rule
    xs = {n: x.requires_grad_() for n, x in gdr_inputs().items()}
    ys = {n: x.detach().clone().requires_grad_() for n, x in xs.items()}
    o, _ = gated_delta_rule(**xs, use_qk_l2norm=True, impl="fla")
    o_ref, _ = chunk(**ys, use_qk_l2norm_in_kernel=True)
    w = torch.randn_like(o, dtype=torch.float32)
    grads = torch.autograd.grad((o.float() * w).sum(), list(xs.values()))
    refs = torch.autograd.grad((o_ref.float() * w).sum(), list(ys.values()))
    assert rel_err(o, o_ref) < 2e-3
    for name, g, r in zip(xs, grads, refs):
        assert g.dtype == r.dtype and rel_err(g, r) < 2e-3, name


@pytest.mark.parametrize("l2norm", [True, False])
def test_custom_op_passes_opcheck(l2norm):
    pytest.importorskip("fla.ops.gated_delta_rule")
    xs = gdr_inputs(T=128)
    if (
        not l2norm
    ):  # the op does not normalise: unit keys keep the delta rule's state bounded (with raw random keys
        # of norm ~8 the H200 run of 2026-11-30 had NaN outputs from the second chunk on, failing the comparison)
        xs["q"], xs["k"] = (F.normalize(xs[n].float(), dim=-1).to(xs[n].dtype) for n in ("q", "k"))
    xs = {n: x.requires_grad_() for n, x in xs.items()}
    args = (*xs.values(), 64**-0.5, l2norm, 64)
    torch.library.opcheck(
        torch.ops.kernels.fla_chunk_gdr.default,
        args,
        test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"),
    )


def test_compiled_gdr_has_no_graph_break():
    pytest.importorskip("fla.ops.gated_delta_rule")
    import torch._dynamo

    torch._dynamo.reset()
    xs = {n: x.requires_grad_() for n, x in gdr_inputs().items()}
    fn = torch.compile(
        lambda **kw: gated_delta_rule(**kw, use_qk_l2norm=True)[0].float().square().sum(), fullgraph=True
    )
    fn(**xs).backward()
    assert all(x.grad is not None and torch.isfinite(x.grad).all() for x in xs.values())


@pytest.mark.parametrize("vocab", [49152, 262144])
def test_bf16_linear_kl_matches_float64(vocab):
    """Under bf16 autocast the logits are bf16 matmuls (relative rounding ~4e-3 per logit); the KL and the
    gradients then land within 2e-2 of the float64 values (bf16 operands: 1e-3 .. 1e-2 expected)."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    h_s, h_t = (torch.randn(2, 256, 64, generator=gen, device="cuda") for _ in range(2))
    w_s, w_t = (torch.randn(vocab, 64, generator=gen, device="cuda") * 0.1 for _ in range(2))
    h_s.requires_grad_(True)
    w_s.requires_grad_(True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = linear_forward_kl(h_s, w_s, h_t, w_t)
    grads = torch.autograd.grad(loss, (h_s, w_s))
    x = {
        n: t.detach().double().requires_grad_(n in ("h_s", "w_s"))
        for n, t in {"h_s": h_s, "w_s": w_s, "h_t": h_t, "w_t": w_t}.items()
    }
    log_s, log_t = F.log_softmax(x["h_s"] @ x["w_s"].T, -1), F.log_softmax(x["h_t"] @ x["w_t"].T, -1)
    ref = (log_t.exp() * (log_t - log_s)).sum(-1).mean()
    refs = torch.autograd.grad(ref, (x["h_s"], x["w_s"]))
    assert abs(loss.item() - ref.item()) < 2e-2 * ref.item()
    for g, r in zip(grads, refs):
        assert rel_err(g, r) < 2e-2


def conv_inputs(B=2, T=300, C=96, K=4, seed=0) -> tuple[torch.Tensor, torch.Tensor]:
    """x [B, T, C] in bf16 as the layer hands it over (a column slice of a wider projection), weight [C, K] float32."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    wide = torch.randn(B, T, C + 40, generator=gen, device="cuda").bfloat16()
    return wide[..., :C], torch.randn(C, K, generator=gen, device="cuda") * 0.5


@pytest.mark.parametrize(("impl", "chunk"), [("fla", 64), ("fla", 256), ("fla", 512), ("fla_onepass", 64)])
def test_fla_short_conv_matches_the_shifted_sums_forward_and_gradients(impl, chunk, monkeypatch):
    """fla's Triton kernel (float32 accumulation, bf16 output; with fla's backward or our one-pass one) against the
    float32 shifted sums on the same bf16 inputs, with ``chunk`` tokens a program (T = 300: a partial chunk): the
    outputs differ by bf16 rounding of the result (~4e-3), the gradients by bf16 rounding of dx."""
    pytest.importorskip("fla.modules.causal_conv1d")
    monkeypatch.setattr(short_conv, "FLA_CONV_CHUNK", chunk)
    x, w = conv_inputs()
    xs = [x.detach().requires_grad_(), w.detach().requires_grad_()]
    refs_in = [x.detach().requires_grad_(), w.detach().requires_grad_()]
    y, past = causal_conv_silu(*xs, impl=impl)
    y_ref, past_ref = causal_conv_silu(*refs_in, impl="torch")
    assert y.dtype == torch.bfloat16 and torch.equal(past, past_ref) and rel_err(y, y_ref) < 1e-2
    dy = torch.randn_like(y, dtype=torch.float32)
    grads = torch.autograd.grad((y.float() * dy).sum(), xs)
    refs = torch.autograd.grad((y_ref.float() * dy).sum(), refs_in)
    for name, g, r in zip(("x", "weight"), grads, refs):
        assert g.dtype == r.dtype and g.shape == r.shape and rel_err(g, r) < 2e-2, name


@pytest.mark.parametrize("op", ["fla_conv_silu", "fla_conv_silu_onepass"])
def test_fla_short_conv_op_passes_opcheck(op):
    pytest.importorskip("fla.modules.causal_conv1d")
    x, w = conv_inputs(T=128)
    torch.library.opcheck(
        getattr(torch.ops.kernels, op).default,
        (x.contiguous().requires_grad_(), w.requires_grad_(), short_conv.FLA_CONV_CHUNK),
        test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"),
    )


def test_one_pass_backward_is_the_float32_gradient_of_the_shifted_sums():
    """Our one-pass backward on float32 inputs (strided x, T = 300: a partial block of rows) against autograd
    through the float32 shifted sums: equal up to float32 rounding; its op passes opcheck."""
    x, w = conv_inputs()
    x = x.float()
    dy = torch.randn_like(x)
    xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
    ref = torch.autograd.grad(causal_conv_silu(xr, wr)[0], (xr, wr), dy)
    dx, partials = conv_silu_bwd_onepass(dy, x, w)
    assert rel_err(dx, ref[0]) < 1e-5 and rel_err(partials.sum(0).T, ref[1]) < 1e-5
    torch.library.opcheck(
        torch.ops.kernels.conv_silu_bwd_onepass.default,
        (dy, x, w),
        test_utils=("test_schema", "test_faketensor"),
    )


@pytest.mark.parametrize(
    ("conv", "projections"), [*(("fla", p) for p in PROJECTIONS), ("fla_onepass", DEFAULT_PROJECTIONS)]
)
def test_compiled_gdn_layer_with_fla_conv_has_no_graph_break_and_the_same_gradients(conv, projections):
    """A whole GDN layer under torch.compile(fullgraph=True) with both fla ops (the convolution with fla's backward
    or our one-pass one) and its projections as one matmul or four (or one forward and four backward), against the
    eager layer on the shifted-sum convolution and one matmul (bf16 autocast in both)."""
    pytest.importorskip("fla.modules.causal_conv1d")
    import torch._dynamo

    torch._dynamo.reset()
    torch.manual_seed(0)
    layer = GatedDeltaNet(192, 3, 64, 64).cuda()
    x = torch.randn(2, 256, 192, device="cuda")

    def grads(conv_impl: str, compiled: bool, projections: str = "fused") -> list[torch.Tensor]:
        layer.conv_impl, layer.projections = conv_impl, projections
        fn = torch.compile(layer, fullgraph=True) if compiled else layer
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = fn(x)
        return torch.autograd.grad(out.float().square().mean(), list(layer.parameters()))

    fast, ref = grads(conv, compiled=True, projections=projections), grads("torch", compiled=False)
    for (name, _), g, r in zip(layer.named_parameters(), fast, ref):
        assert torch.isfinite(g).all() and rel_err(g, r) < 3e-2, name


@pytest.mark.parametrize("backend", ["flash", "cudnn", "efficient"])
def test_compiled_causal_sdpa_on_one_backend_is_the_attention(backend):
    """The step's attention (SmolLM2's 9 query and 3 key-value heads, bf16, Hugging Face's transposed inputs)
    restricted to one SDPA backend inside torch.compile(fullgraph=True): SDPA's own choice's output and gradients
    within bf16 rounding; a backend without a kernel for these inputs is reported as a skip, not timed."""
    import torch._dynamo

    from kernels.ops import causal_sdpa
    from kernels.ops.attention import NO_KERNEL

    torch._dynamo.reset()
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (
        torch.randn(4, 256, h, 64, generator=gen, device="cuda").bfloat16().transpose(1, 2).requires_grad_()
        for h in (9, 3, 3)
    )

    def run(fn) -> list[torch.Tensor]:
        out = fn(q, k, v)
        return [out, *torch.autograd.grad(out.float().square().mean(), (q, k, v))]

    ref = run(causal_sdpa)
    try:
        got = run(torch.compile(lambda q, k, v: causal_sdpa(q, k, v, backend=backend), fullgraph=True))
    except RuntimeError as err:
        if not any(m in str(err) for m in NO_KERNEL):
            raise
        pytest.skip(f"SDPA has no {backend} kernel for these inputs")
    for name, g, r in zip(("out", "dq", "dk", "dv"), got, ref):
        assert rel_err(g, r) < 2e-2, name
