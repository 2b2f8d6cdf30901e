"""Step profile of distillation: phases add up, speed follows from them, bad arguments are refused."""

from __future__ import annotations

import pytest
import torch

from benchmarks.distill_setup import PHASES
from benchmarks.distill_step import CACHE_COUNTERS, kernel_family, profile_step
from hybridlib.models import flops, load
from hybridlib.train import distill
from kernels.layers import GatedDeltaNet


@pytest.mark.slow
def test_profile_phases_add_up_to_the_step_and_give_the_speed():
    row = profile_step("tiny-teacher", batch_size=2, seq_len=32, steps=2, warmup=1, device="cpu")
    assert set(row["phase_ms"]) == set(PHASES) and all(v > 0 for v in row["phase_ms"].values())
    assert row["step_ms"] == pytest.approx(sum(row["phase_ms"].values()), abs=1e-2)
    # the row keeps tokens/s to 0.1 (and step_ms to 0.001 ms): a slow machine (7.5 tok/s, 8.5 s a step) is off
    # by up to 0.05 from rounding alone, more than rel=1e-3
    assert row["tokens_per_s"] == pytest.approx(2 * 32 / (row["step_ms"] / 1e3), rel=1e-3, abs=0.05)
    assert row["mfu"] is None and row["precision"] == "fp32" and not row["teacher_compiled"]
    assert row["conv_impl"] == "torch" and row["gdn_projections"] == "fused"  # eager is the reference
    # nothing compiles on the CPU's eager step: every compile-cache counter of the warm-up stays 0
    assert row["cache_counts"] == {key: 0 for _, key in CACHE_COUNTERS}
    teacher, _ = load("tiny-teacher")
    embed = teacher.get_input_embeddings().weight.numel()
    n_teacher = (
        sum(p.numel() for p in teacher.parameters())
        - embed
        + (embed if teacher.config.tie_word_embeddings else 0)
    )
    # the student keeps every teacher matmul (GDN layers inherit W_Q, W_O and add their own): at least 8 N_teacher
    assert row["flops_per_token"] >= 8 * n_teacher


def test_bad_step_counts_and_convolutions_are_refused():
    with pytest.raises(ValueError, match="steps must be >= 1"):
        profile_step("tiny-teacher", steps=0, device="cpu")
    with pytest.raises(
        ValueError, match=r"conv_impl='cudnn' is not allowed; choose one of \('torch', 'fla', 'fla_onepass'\)"
    ):
        profile_step("tiny-teacher", variant="fused", conv_impl="cudnn", device="cpu")
    with pytest.raises(ValueError, match="conv_impl='fla' needs CUDA"):
        profile_step("tiny-teacher", variant="fused", conv_impl="fla", device="cpu")
    with pytest.raises(
        ValueError,
        match=r"gdn_projections='split' is not allowed; choose one of \('fused', 'separate', 'split_backward'\)",
    ):
        profile_step("tiny-teacher", variant="fused", gdn_projections="split", device="cpu")
    with pytest.raises(
        ValueError, match=r"sdpa_backend='fa3' is not allowed; choose one of \('auto', 'cudnn', 'flash'"
    ):
        profile_step("tiny-teacher", variant="fused", sdpa_backend="fa3", device="cpu")
    assert flops.PEAK_BF16_FLOPS == 694e12


@pytest.mark.parametrize(
    "name,family",
    [
        (
            "triton_poi_fused__to_copy_add_mul_select_silu_slice_7",
            "inductor_fused",
        ),  # inductor, whatever it fuses
        ("nvjet_sm90_tst_192x192_64x4_1x2_h_bz_coopB_TNN", "gemm"),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64", "attention"),
        ("chunk_gated_delta_rule_bwd_kernel_dhu_blockdim64", "fla_gdn"),
        ("causal_conv1d_bwd_kernel", "fla_conv"),
        (
            "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)",
            "dtype_copy",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
            "elementwise",
        ),
        (
            "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedOptimizerTensorListMetadata>",
            "optimizer",
        ),
        ("Memset (Device)", "memcpy_memset"),
        ("some_new_kernel", "other"),
    ],
)
def test_kernel_families_of_names_seen_on_the_h200(name, family):
    assert kernel_family(name) == family


def test_bench_refuses_an_unknown_layout_before_any_work(capsys):
    from benchmarks import distill_step

    with pytest.raises(SystemExit):
        distill_step.main(["--teacher", "tiny-teacher", "--layouts", "standard_periodic", "nope"])
    assert "--layouts: invalid choice: 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_profile_times_the_student_of_the_requested_layout(monkeypatch):
    from benchmarks import distill_setup

    built = []
    real = distill_setup.convert_to_hybrid
    monkeypatch.setattr(
        distill_setup,
        "convert_to_hybrid",
        lambda t, layout, *a, **k: built.append(layout) or real(t, layout, *a, **k),
    )
    row = profile_step(
        "tiny-teacher", batch_size=1, seq_len=16, steps=1, warmup=0, device="cpu", layout="sandwich"
    )
    teacher, _ = load("tiny-teacher")
    assert row["layout"] == "sandwich" and row["sdpa_layout"] == "hf"  # eager is the reference: HF's layout
    assert built == [distill._layout(teacher, "sandwich", distill.recipe("tiny-teacher").fa_fraction)]


def test_both_models_take_the_requested_attention_layout_and_keep_their_outputs():
    from benchmarks.distill_setup import build_models

    ids = torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(0))
    setup = ("tiny-teacher", torch.device("cpu"), "fp32", False, None, 0)
    student, teacher = build_models(*setup)
    with torch.no_grad():
        reference = [m(input_ids=ids, use_cache=False).logits for m in (student, teacher)]
    student, teacher = build_models(*setup, sdpa_layout="repeated_kv")
    assert {student.config._attn_implementation, teacher.config._attn_implementation} == {"sdpa_repeated_kv"}
    with torch.no_grad():
        for model, ref in zip((student, teacher), reference, strict=True):
            torch.testing.assert_close(
                model(input_ids=ids, use_cache=False).logits, ref, rtol=1e-4, atol=1e-5
            )
    with pytest.raises(ValueError, match=r"sdpa_layout='bshd' is not allowed; choose one of \('hf', 'contig"):
        profile_step("tiny-teacher", variant="fused", sdpa_layout="bshd", device="cpu")


@pytest.mark.slow
def test_loss_curves_of_the_fused_step_follow_the_eager_one():
    """Three AdamW steps of the same student on the same batches: the fused KL from hidden states and the chunked
    KL of full logits are the same function in float32 on the CPU, so the curves agree to rounding (observed
    1.1e-7; a wrong scale or a skipped update moves the second step's loss by far more than 1e-3)."""
    from benchmarks.distill_probes import loss_curves

    out = loss_curves("tiny-teacher", ["eager", "fused"], steps=3, batch_size=2, seq_len=32, device="cpu")
    eager, fused = out["losses"]["eager"], out["losses"]["fused"]
    assert len(eager) == len(fused) == 3 and eager[2] < eager[0]  # it trains
    assert out["max_rel_gap_to_first"]["eager"] == 0.0
    assert out["max_rel_gap_to_first"]["fused"] < 1e-3 and out["cuda_graphs"] is True


@pytest.mark.slow
def test_loss_curves_from_perturbed_weights_start_within_the_perturbation():
    """A perturbation at bf16 rounding moves the first loss, before any update, by about as much and no more
    (a loss computed from the same weights would not move; one from other weights would move by far more)."""
    from benchmarks.distill_probes import loss_curves
    from hybridlib.train.equivalence import BF16_ROUNDING

    setup = dict(steps=2, batch_size=2, seq_len=32, device="cpu")
    plain = loss_curves("tiny-teacher", ["eager"], **setup)["losses"]["eager"]
    out = loss_curves("tiny-teacher", ["eager"], perturb=BF16_ROUNDING, **setup)
    moved = abs(out["losses"]["eager"][0] / plain[0] - 1)
    assert out["perturb"] == BF16_ROUNDING and 1e-6 < moved < 1e-2
    # the perturbation's own seed: the default is the batch seed + 1, another draws other weights
    same = loss_curves("tiny-teacher", ["eager"], perturb=BF16_ROUNDING, perturb_seed=1, **setup)
    other = loss_curves("tiny-teacher", ["eager"], perturb=BF16_ROUNDING, perturb_seed=7, **setup)
    assert same["losses"] == out["losses"] and other["losses"]["eager"][0] != out["losses"]["eager"][0]
    assert other["perturb_seed"] == 7
    with pytest.raises(ValueError, match=r"perturb must be in \[0, 1\), got -0.1"):
        loss_curves("tiny-teacher", ["eager"], perturb=-0.1, **setup)


@pytest.mark.slow
def test_bench_with_no_timed_steps_writes_only_the_loss_curves(tmp_path, monkeypatch, capsys):
    import json

    from benchmarks import distill_step

    with pytest.raises(SystemExit):  # nothing to do
        distill_step.main(["--teacher", "tiny-teacher", "--steps", "0"])
    assert (
        "--steps must be >= 1, or 0 with --curve-steps >= 1, --first-step or --grad-probe; got 0"
        in capsys.readouterr().err
    )
    with pytest.raises(SystemExit):  # a precision the step does not have, refused before any work
        distill_step.main(["--teacher", "tiny-teacher", "--precision", "fp16"])
    assert "--precision: invalid choice: 'fp16'" in capsys.readouterr().err
    monkeypatch.setattr(distill_step, "OUT_DIR", tmp_path)
    timed = []
    monkeypatch.setattr(distill_step, "profile_step", lambda *a, **k: timed.append(k))
    args = [
        "--teacher",
        "tiny-teacher",
        "--steps",
        "0",
        "--curve-steps",
        "2",
        "--variants",
        "fused",
        "--first-step",
    ]
    distill_step.main(
        [*args, "--batch-size", "2", "--seq-len", "32", "--tag", "curves", "--precision", "fp32"]
    )
    out = json.loads((tmp_path / "step_profile_cpu_curves.json").read_text())
    assert timed == [] and out["rows"] == [] and out["loss_curves"]["precision"] == "fp32"
    assert sorted(out["loss_curves"]["losses"]) == ["eager", "fused"]
    assert all(len(v) == 2 for v in out["loss_curves"]["losses"].values())
    assert sorted(out["first_step"]["common"]) == ["eager", "fused"]  # the probe's scores, beside the curves
    probe = ["--grad-probe", "fused", "--seed", "1", "--batch-size", "2", "--seq-len", "32", "--tag", "grads"]
    distill_step.main(
        [*args[:4], *probe, "--results-dir", str(tmp_path / "elsewhere")]
    )  # a folder outside the results
    grads = json.loads((tmp_path / "elsewhere" / "step_profile_cpu_grads.json").read_text())
    assert grads["rows"] == [] and list(grads["grad_probe"]["loss"]) == ["fused"]
    assert grads["grad_probe"]["seed"] == 1 and out["first_step"]["seed"] == 0  # other batches


def test_every_student_parameter_has_one_kind():
    """Llama and Gemma 3 hybrids (FA and GDN layers): each parameter falls into a kind, GDN pieces apart from
    attention's; an unknown name is refused with the kinds listed."""
    from tiny_models import tiny_causal_lm

    from benchmarks.distill_probes import param_kind
    from hybridlib.convert import convert_to_hybrid

    small = {"vocab_size": 97, "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4}
    small |= {"num_key_value_heads": 2, "head_dim": 8}
    for family, extra in (("llama", {}), ("gemma3", {"sliding_window": 4, "query_pre_attn_scalar": 8})):
        student = convert_to_hybrid(
            tiny_causal_lm(family, num_hidden_layers=4, **small, **extra), [1, 3], "gdn"
        )
        kinds = {n: param_kind(n) for n, _ in student.named_parameters()}
        assert kinds["model.layers.0.self_attn.gdn.A_log"] == "GDN gates (A_log, dt_bias, a, b)"
        assert kinds["model.layers.0.self_attn.gdn.a_proj.weight"] == "GDN gates (A_log, dt_bias, a, b)"
        assert kinds["model.layers.0.self_attn.gdn.q_conv.weight"] == "GDN convolutions"
        assert kinds["model.layers.0.self_attn.gdn.o_proj.weight"] == "GDN projections (q, k, v, g, o)"
        assert kinds["model.layers.0.self_attn.gdn.o_norm.weight"] == "GDN output norm"
        assert kinds["model.layers.1.self_attn.o_proj.weight"] == "attention"
        assert kinds["model.layers.1.mlp.down_proj.weight"] == "MLP"
        assert kinds["model.norm.weight"] == kinds["model.layers.1.input_layernorm.weight"] == "norms"
        assert kinds["model.embed_tokens.weight"] == "embedding"
    with pytest.raises(
        ValueError, match=r"parameter 'model.extra' matches no kind of PARAM_KINDS \['embedding'"
    ):
        param_kind("model.extra")


@pytest.mark.slow
def test_first_step_probe_scores_every_variant_with_eager_s_evaluator():
    """On the CPU in float32 the fused step computes eager's function: against the independent reference, the
    second loss of eager's own loss curve (same seeds), eager's own and common scores agree exactly, fused's to
    rounding; its update matches eager's and no swapped kind moves the score beyond rounding."""
    from benchmarks.distill_probes import PARAM_KINDS, first_step_probe, loss_curves
    from hybridlib.train.equivalence import rounding_check

    kw = {"batch_size": 2, "seq_len": 32, "device": "cpu"}
    out = first_step_probe("tiny-teacher", ["fused"], **kw)
    curve = loss_curves("tiny-teacher", ["eager"], steps=2, **kw)["losses"]["eager"]
    assert out["own"]["eager"] == pytest.approx(curve[1], rel=1e-6)
    assert out["common"]["eager"] == pytest.approx(out["own"]["eager"], rel=1e-6)
    assert out["common"]["fused"] == pytest.approx(out["own"]["eager"], rel=1e-4)
    assert out["own"]["fused"] == pytest.approx(out["common"]["fused"], rel=1e-4)
    assert set(out["swap"]["fused"]) == set(out["update"]["fused"]) == set(out["kinds"])
    assert set(out["kinds"]) <= {k for k, _ in PARAM_KINDS} and out["precision"] == "fp32"
    for kind, loss in out["swap"]["fused"].items():
        assert loss == pytest.approx(out["common"]["eager"], rel=1e-4), kind
        assert out["update"]["fused"][kind]["rel_diff"] < 1e-2, kind
    agree = out["agreement"]["fused"]
    assert agree["loss_gap"] == out["common"]["fused"] - out["common"]["eager"]
    assert rounding_check(**agree)["outcome"] == "passed" and 0.0 <= agree["params_rel_median"] < 1e-6


@pytest.mark.slow
def test_gradient_probe_measures_each_variant_against_the_float32_reference(inductor_at_capability):
    """The reference is eager backbones' fused step in float32; against it, on the CPU: the same step in float32
    has exactly its gradient, eager's chunked KL of full logits and the compiled backbones theirs to float32
    rounding, and bf16 autocast a gradient off by bf16 rounding (more than 1e-3, less than 10%). The reference loss
    is the first loss of the fused step's own loss curve (same seeds: an independent check of the set-up)."""
    from benchmarks.distill_probes import gradient_probe, loss_curves

    kw = {"batch_size": 2, "seq_len": 32, "device": "cpu"}
    with pytest.raises(
        ValueError, match=r"variants=\['fast'\]: choose one or more of \('eager', 'fused', 'compiled'\)"
    ):
        gradient_probe("tiny-teacher", ["fast"], **kw)
    out = gradient_probe("tiny-teacher", ["fused", "eager", "compiled"], precision="fp32", **kw)
    curve = loss_curves("tiny-teacher", ["fused"], steps=1, precision="fp32", **kw)["losses"]["fused"]
    assert out["reference_loss"] == pytest.approx(curve[0], rel=1e-6)
    assert out["loss"]["fused"] == out["reference_loss"]
    for kind, err in out["by_kind"]["fused"].items():
        assert err["rel_err"] == 0.0 and err["cos"] == pytest.approx(1.0), kind
        assert err["signs_flipped"] == 0.0, kind
    assert out["overall"]["fused"]["signs_flipped"] == 0.0 and out["overall"]["eager"]["rel_err"] < 1e-3
    for variant in ("eager", "compiled"):
        for kind, err in out["by_kind"][variant].items():
            assert err["rel_err"] < 1e-3 and err["cos"] > 0.9999, (variant, kind)
    assert (
        len(out["by_layer"]["compiled"]) == len(out["mixers"]) and "GatedDeltaNetAttention" in out["mixers"]
    )
    bf16 = gradient_probe("tiny-teacher", ["fused"], precision="bf16", **kw)
    assert bf16["reference_loss"] == out["reference_loss"]
    assert 1e-3 < max(e["rel_err"] for e in bf16["by_kind"]["fused"].values()) < 0.1
    assert 0 < bf16["overall"]["fused"]["signs_flipped"] < 0.5


def test_gradient_distance_by_hand():
    from benchmarks.distill_probes import gradient_distance

    ref = torch.tensor([3.0, -4.0, 0.0, 1.0])
    g = torch.tensor([3.0, 4.0, 5.0, -1.0])
    d = gradient_distance(g, ref)
    # |g - ref| = |(0, 8, 5, -2)| = sqrt(93), |ref| = sqrt(26); g . ref = 9 - 16 + 0 - 1 = -8, |g| = sqrt(51);
    # of ref's three non-zero components, g flips the signs of two
    assert d["rel_err"] == pytest.approx((93 / 26) ** 0.5)
    assert d["cos"] == pytest.approx(-8 / (51 * 26) ** 0.5)
    assert d["signs_flipped"] == pytest.approx(2 / 3)
    assert gradient_distance(ref, ref) == {"rel_err": 0.0, "cos": pytest.approx(1.0), "signs_flipped": 0.0}


def test_separate_gdn_projections_reach_every_gdn_layer_of_the_timed_student(monkeypatch):
    """``gdn_projections`` is set on the student's GDN layers (not eager's, the reference) and recorded."""
    from benchmarks import distill_step

    seen = []
    models = distill_step.build_models

    def spy(*args, **kwargs):
        student, teacher = models(*args, **kwargs)
        seen.append({m.projections for m in student.modules() if isinstance(m, GatedDeltaNet)})
        return student, teacher

    monkeypatch.setattr(distill_step, "build_models", spy)
    args = {"batch_size": 1, "seq_len": 16, "steps": 1, "warmup": 0, "device": "cpu", "profile_steps": 0}
    rows = [
        profile_step("tiny-teacher", variant=v, gdn_projections="separate", **args)
        for v in ("fused", "eager")
    ]
    assert [r["gdn_projections"] for r in rows] == ["separate", "fused"] and seen == [{"separate"}, {"fused"}]


def test_sdpa_backend_reaches_both_models_of_the_timed_step(monkeypatch):
    """``sdpa_backend`` routes the student's and the teacher's attention through SDPA on that backend (not eager's,
    the reference) and is recorded."""
    from benchmarks import distill_step

    seen = []
    models = distill_step.build_models

    def spy(*args, **kwargs):
        student, teacher = models(*args, **kwargs)
        seen.append((student.config._attn_implementation, teacher.config._attn_implementation))
        return student, teacher

    monkeypatch.setattr(distill_step, "build_models", spy)
    args = {"batch_size": 1, "seq_len": 16, "steps": 1, "warmup": 0, "device": "cpu", "profile_steps": 0}
    rows = [profile_step("tiny-teacher", variant=v, sdpa_backend="math", **args) for v in ("fused", "eager")]
    assert [r["sdpa_backend"] for r in rows] == ["math", "auto"]
    assert seen[0] == ("sdpa_math", "sdpa_math") and "sdpa_math" not in seen[1]
