"""The generated distillation-speed page (hybridlib.pages.speed): its targets driven into every
outcome on synthetic runs, and the committed page current with the committed benchmark files."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from hybridlib.pages import equivalence as judging
from hybridlib.pages import speed
from hybridlib.paths import REPO_ROOT
from hybridlib.train import equivalence

PHASES = {"teacher_forward": 10.0, "student_forward": 20.0, "kl": 5.0, "backward": 40.0, "optimizer": 1.0}


def step(mfu: float, tokens_per_s: float, step_ms: float, **extra) -> dict:
    row = {"teacher": "smollm2-135m", "variant": "fast", "step_ms": step_ms, "tokens_per_s": tokens_per_s}
    return row | {"mfu": mfu, "warmup_s": 100.0, "phase_ms": PHASES, "cuda_graphs": True} | extra


def train(world: int, tokens_per_s: float, losses: list[float], first_step: int = 1) -> dict:
    row = {"world_size": world, "strategy": "ddp" if world > 1 else None, "tokens_per_s": tokens_per_s}
    return {"rows": [row | {"cuda_graphs": False, "first_step": first_step, "mfu": 0.2, "losses": losses}]}


def by_target(runs: dict) -> dict[str, dict]:
    return {c["target"]: c for c in speed.checks(runs)}


ONE = "one H200, smollm2-135m: MFU >= 35% and >= 150,000 tokens/s"
GEMMA = "one H200, gemma3-270m: MFU >= 35%"
TWO = "two H200s (DDP): tokens/s >= 1.8x one"
DDP = "loss curve, DDP, within the one-GPU noise"
FSDP = "loss curve, FSDP, within the one-GPU noise"


def test_nothing_measured():
    assert [c["status"] for c in speed.checks({})] == ["not measured"] * 4


@pytest.mark.parametrize(
    ("mfu", "tokens", "status"),
    [(0.36, 200_000.0, "met"), (0.30, 176_000.0, "not met"), (0.36, 140_000.0, "not met")],
)
def test_one_gpu_target(mfu, tokens, status):
    check = by_target({"a": {"rows": [step(mfu, tokens, 90.0)]}})[ONE]
    assert check["status"] == status
    assert f"35% needs {90.0 * mfu / 0.35:.1f} ms" in check["figures"]


@pytest.mark.parametrize(("mfu", "status"), [(0.42, "met"), (0.34, "not met")])
def test_gemma_target_is_mfu_alone(mfu, status):
    runs = {"g": {"rows": [step(mfu, 120_000.0, 130.0, teacher="gemma3-270m")]}}
    checks = by_target(runs)
    assert checks[GEMMA]["status"] == status and checks[ONE]["status"] == "not measured"
    assert "best step 130.0 ms (g, fast)" in checks[GEMMA]["figures"]


def test_one_gpu_target_takes_the_best_fast_step_of_the_pretrained_teacher():
    runs = {
        "r": {"rows": [step(0.40, 300_000.0, 50.0, random_weights=True)]},
        "x": {"rows": [step(0.40, 300_000.0, 50.0, variant="regional")]},  # not the chapters' path
        "a": {"rows": [step(0.29, 170_000.0, 96.0), step(0.30, 176_000.0, 93.0)]},
    }
    check = by_target(runs)[ONE]
    assert check["status"] == "not met" and "best step 93.0 ms (a, fast)" in check["figures"]
    assert check["figures"].endswith("(2 timings of this variant: 93.0-96.0 ms)")


def scaling(speed2: float, ddp: list[float], fsdp: list[float] | None = None) -> dict:
    runs = {
        "train1": train(1, 100.0, [4.0, 3.0, 2.0, 1.0]),
        "train1_repeat": train(1, 110.0, [4.0, 3.0, 2.0, 1.01]),  # noise: 1%
        "train2": train(2, speed2, ddp),
    }
    if fsdp is not None:
        runs["train2_fsdp"] = train(2, speed2, fsdp)
    return runs


def test_two_gpu_speedup_met_and_not_met():
    assert by_target(scaling(199.5, [4.0, 3.0, 2.0, 1.0]))[TWO]["status"] == "met"  # 199.5 / 105 = 1.9x
    check = by_target(scaling(150.0, [4.0, 3.0, 2.0, 1.0]))[TWO]
    assert check["status"] == "not met" and "1.43x" in check["figures"]


def test_curves_within_twice_the_noise_met_beyond_not_met_missing_not_measured():
    checks = by_target(scaling(200.0, [4.0, 3.0, 2.0, 1.015], fsdp=[4.0, 3.0, 2.0, 1.03]))
    assert checks[DDP]["status"] == "met"  # 1.5% <= 2 x 1%
    assert checks[FSDP]["status"] == "not met"  # 3% > 2%
    assert "bound 2.00%" in checks[FSDP]["figures"]
    assert by_target(scaling(200.0, [4.0, 3.0, 2.0, 1.0]))[FSDP]["status"] == "not measured"


def test_identical_one_gpu_runs_leave_the_bf16_floor():
    runs = scaling(200.0, [4.0, 3.0, 2.0, 1.004])
    runs["train1_repeat"] = train(1, 100.0, [4.0, 3.0, 2.0, 1.0])  # no noise at all
    assert by_target(runs)[DDP]["status"] == "met"  # 0.4% <= the 0.5% floor


def test_a_resumed_run_is_compared_over_its_steps():
    runs = scaling(200.0, [4.0, 3.0, 2.0, 1.0])
    runs["train2to1"] = train(1, 100.0, [2.0, 1.5], first_step=3)  # steps 3-4: 1.5 vs 1.0 is 50% off
    check = by_target(runs)["loss curve, written on 2, resumed on 1, within the one-GPU noise"]
    assert check["status"] == "not met" and "largest gap 50.00%" in check["figures"]


def test_command_from_recorded_arguments():
    params = {"teacher": "smollm2-135m", "variants": ["fast", "regional"], "no_cuda_graphs": True}
    params |= {"random_weights": False, "teacher_path": None, "train_steps": 0, "steps": 10, "layouts": []}
    assert speed.command(params) == (
        "python -m benchmarks.distill_step --teacher smollm2-135m --variants fast regional "
        "--no-cuda-graphs --steps 10"
    )
    rows = [
        {
            "inductor_env": {
                "TORCHINDUCTOR_CACHE_DIR": "/tmp/x",
                "TORCHINDUCTOR_COORDINATE_DESCENT_TUNING": "1",
            }
        }
    ]
    assert speed.command({"steps": 10}, rows + [{"fla_env": {"FLA_CONV_GLUON": "1"}}]) == (
        "FLA_CONV_GLUON=1 TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 python -m benchmarks.distill_step "
        "--steps 10"
    )  # settings that change the measurement, not where caches live


def test_a_file_s_provenance_note_is_shown_beside_its_command():
    """A JSON rebuilt from a run's printed rows says so in its provenance; the page repeats it."""
    prov = {"date_utc": "2026-12-01T15:35:00+00:00", "git_commit": "42aa76d", "params": {"teacher": "t"}}
    runs = {
        "x": {"rows": [], "provenance": prov | {"note": "rebuilt from the printed row"}},
        "y": {"rows": []},
    }
    page = speed.render(runs, "src", drawn=False)
    assert "`python -m benchmarks.distill_step --teacher t` (rebuilt from the printed row)" in page
    assert "`step_profile_cuda_y.json` (, commit ): `python -m benchmarks.distill_step`\n" in page


def test_family_frame_largest_families_first_totals_last():
    prof = {"gpu_ms_by_family": {"gemm": 30.0, "conv": 0.2, "inductor_fused": 40.0}}
    prof |= {"gpu_ms_per_step": 70.2, "host_ms_per_step": 40.0, "kernels_per_step": 3000}
    frame = speed.family_frame({"a": {"rows": [step(0.3, 1.0, 1.0, profile=prof)]}})
    assert list(frame.index) == ["inductor_fused", "gemm", "conv", *speed.FAMILY_TOTALS]
    assert frame.loc["gemm", "a: fast"] == 30.0


def test_committed_page_is_current():
    """`python -m hybridlib.pages.speed` was run after the last benchmark file was committed."""
    runs = speed.load()
    drawn = (REPO_ROOT / speed.FIGURE).exists()
    expected = speed.render(runs, speed.SOURCE, drawn)
    assert (REPO_ROOT / speed.PAGE).read_text() == expected


def test_committed_one_gpu_figures():
    """The best committed fast SmolLM2 step is 78.2 ms at 35.6% MFU (209.5k tokens/s), with fla's short convolution
    forward and our one-pass backward, inductor's coordinate-descent tuning and the split-backward GDN projections,
    the GPU to itself (78.5 and 79.2 ms in two more timings; fla's own backward 81.4 ms on that machine): 35% needs
    79.6 ms. Gemma 3 270M's fast step: 129.2 ms, 41.5% MFU."""
    checks = by_target(speed.load())
    assert checks[ONE]["status"] == "met"
    assert (
        "best step 78.2 ms (final fla alone, fast (fla conv, one-pass backward, tuned kernels, split backward GDN "
        "projections)): 209,531 tokens/s, MFU 35.6%; 35% needs 79.6 ms"
        in checks[ONE]["figures"]
        and "(3 timings of this variant: 78.2-79.2 ms)" in checks[ONE]["figures"]
    )
    assert checks[GEMMA]["status"] == "met" and "129.2 ms" in checks[GEMMA]["figures"]
    assert "MFU 41.5%" in checks[GEMMA]["figures"]


def test_committed_earlier_curves_eager_s_noise_and_first_steps():
    """The earlier 200-step curves (pretrained SmolLM2-135M, batch seeds 0-3), described on the page and judged by no
    test since the equivalence test replaced the curve check. Eager's largest gaps to its repeats and runs from
    weights perturbed at bf16 rounding, per seed: 12.4%, 24.3%, 28.6% and 10.5%. After one update the compiled
    backbones sit above eager at seeds 0 and 3 (6.237-6.255 against 6.174-6.195; 6.216 against 6.144-6.152) but
    below it at seeds 1 and 2 (6.173-6.175 against 6.253-6.261; 6.065-6.069 against 6.126-6.129), and the perturbed
    eager run of seed 0 above them all (6.281)."""
    runs = speed.load()
    noise: dict[int, float] = {}
    for r in speed.eager_repeats(runs):
        noise[r["seed"]] = max(noise.get(r["seed"], 0.0), r["gap"])
    assert noise == pytest.approx({0: 0.1241, 1: 0.2430, 2: 0.2860, 3: 0.1051}, abs=5e-4)
    first = speed.first_steps_frame(runs)
    bf16 = first[(first["precision"] == "bf16") & (first["perturbed"] == "no")]
    step1 = lambda seed, variants: bf16[(bf16["seed"] == seed) & bf16["variant"].isin(variants)]["step 1"]
    compiled, eager = ["compiled", "fast", "regional"], ["eager", "fused"]
    assert step1(0, compiled).min() == pytest.approx(6.237, abs=5e-4)
    assert step1(0, eager).max() == pytest.approx(6.195, abs=5e-4)
    for seed in (1, 2):
        assert step1(seed, compiled).max() < step1(seed, eager).min()
    assert step1(3, compiled).min() > step1(3, eager).max()
    perturbed = first[(first["perturbed"] == "yes") & (first["seed"] == 0)]["step 1"]
    assert perturbed.item() == pytest.approx(6.281, abs=5e-4) and perturbed.item() > step1(0, compiled).max()


def test_variant_names_what_sets_a_step_apart():
    gluon = {"variant": "fast", "conv_impl": "fla", "fla_env": {"FLA_CONV_GLUON": "1"}, "cuda_graphs": True}
    assert speed._variant(gluon, {}) == "fast (fla conv, Gluon)"
    assert speed._variant({"variant": "fast", "conv_impl": "fla", "cuda_graphs": False}, {}) == (
        "fast (fla conv, no CUDA graphs)"
    )
    assert speed._variant({"variant": "regional"}, {"no_cuda_graphs": False}) == "regional"
    split = {"variant": "fast", "conv_impl": "fla", "gdn_projections": "separate", "cuda_graphs": True}
    assert speed._variant(split, {}) == "fast (fla conv, separate GDN projections)"
    split_bwd = split | {"gdn_projections": "split_backward"}
    assert speed._variant(split_bwd, {}) == "fast (fla conv, split backward GDN projections)"
    onepass = split_bwd | {"conv_impl": "fla_onepass"}
    assert speed._variant(onepass, {}) == (
        "fast (fla conv, one-pass backward, split backward GDN projections)"
    )
    env = {"TORCHINDUCTOR_COORDINATE_DESCENT_TUNING": "1", "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM": "1"}
    assert (
        speed._variant(split_bwd | {"inductor_env": env}, {})
        == "fast (fla conv, tuned kernels, autotuned GEMMs, split backward GDN projections)"
    )
    assert speed._variant(split_bwd | {"inductor_env": {"TORCHINDUCTOR_MAX_AUTOTUNE_GEMM": "0"}}, {}) == (
        "fast (fla conv, split backward GDN projections)"
    )
    flash = {"variant": "fast", "sdpa_backend": "flash", "cuda_graphs": True}
    assert speed._variant(flash, {}) == "fast (SDPA on flash)"
    assert speed._variant({"variant": "fast"}, {}) == "fast (graphs not recorded)"
    assert speed._variant({"compile_student": False}, {}) == "eager"
    tuned = {"variant": "fast", "conv_impl": "fla", "cuda_graphs": True}
    tuned["inductor_env"] = {"TORCHINDUCTOR_COORDINATE_DESCENT_TUNING": "1"}
    assert speed._variant(tuned, {}) == "fast (fla conv, tuned kernels)"


def curves(
    gap: float,
    steps: int = 200,
    variant: str = "fast",
    random: bool = False,
    conv: str = "torch",
    losses: dict | None = None,
    commit: str = "abc",
    seed: int | None = None,
) -> dict:
    curve = {"steps": steps, "conv_impl": conv, "max_rel_gap_to_first": {"eager": 0.0, variant: gap}}
    curve |= {} if seed is None else {"seed": seed}
    prov = {"params": {"random_weights": random}, "git_commit": commit}
    return {"loss_curves": curve | ({"losses": losses} if losses else {}), "provenance": prov}


def seeded_runs(fast_gaps: dict[int, float], repeat_gap: float = 0.04) -> dict:
    """Per seed: a file with eager's and fast's curves (fast's largest gap as given) and one repeating its eager
    curve with ``repeat_gap`` at one step."""
    runs = {}
    for seed, gap in fast_gaps.items():
        eager = [4.0, 3.0, 2.0]
        runs[f"s{seed}"] = curves(gap, losses={"eager": eager, "fast": eager}, seed=seed)
        repeat = [4.0, 3.0 * (1 + repeat_gap), 2.0]
        runs[f"s{seed}_repeat"] = curves(0.0, variant="eager", losses={"eager": repeat}, seed=seed)
    return runs


def test_noise_bound_is_twice_the_repeat_gap_or_bf16_rounding():
    assert speed.noise_bound(0.04) == pytest.approx(0.08)
    assert speed.noise_bound(0.001) == speed.CURVE_FLOOR


def test_a_perturbed_eager_curve_pairs_with_the_runs_of_its_seed():
    runs = seeded_runs({0: 0.05, 1: 0.05, 2: 0.19})
    perturbed = curves(0.0, variant="eager", losses={"eager": [4.0, 3.3, 2.0]}, seed=2)
    perturbed["loss_curves"]["perturb"] = 2.0**-9
    runs["s2_perturbed"] = perturbed
    reps = [r for r in speed.eager_repeats(runs) if r["seed"] == 2]
    assert [(r["kind"], r["files"]) for r in reps] == [
        ("repeated", ("s2", "s2 repeat")),
        ("perturbed", ("s2", "s2 perturbed")),
        ("perturbed", ("s2 repeat", "s2 perturbed")),
    ]
    frame = speed.curve_frame(runs)
    assert set(frame["variant"]) == {"fast", "eager, repeated", "eager, perturbed"}
    double = curves(0.0, variant="eager", losses={"eager": [4.0, 3.6, 2.0]}, seed=2)
    double["loss_curves"]["perturb"] = 2.0**-8  # two different perturbations do not pair
    assert len(speed.eager_repeats(runs | {"s2_more": double})) == len(speed.eager_repeats(runs)) + 2


def test_first_step_ranges_keep_seeds_and_perturbed_runs_apart():
    frame = pd.DataFrame(
        [
            {
                "variant": "eager",
                "seed": 1,
                "perturbed": "no",
                "conv": "torch",
                "precision": "bf16",
                "step 1": 6.25,
            },
            {
                "variant": "fast",
                "seed": 1,
                "perturbed": "no",
                "conv": "torch",
                "precision": "bf16",
                "step 1": 6.17,
            },
            {
                "variant": "eager",
                "seed": 0,
                "perturbed": "no",
                "conv": "torch",
                "precision": "bf16",
                "step 1": 6.19,
            },
            {
                "variant": "eager",
                "seed": 0,
                "perturbed": "no",
                "conv": "torch",
                "precision": "bf16",
                "step 1": 6.18,
            },
            {
                "variant": "eager",
                "seed": 0,
                "perturbed": "yes",
                "conv": "torch",
                "precision": "bf16",
                "step 1": 6.28,
            },
        ]
    )
    assert speed.first_step_ranges(frame) == (
        "seed 0: eager (torch conv, bf16) 6.180-6.190 over 2 runs, eager, perturbed (torch conv, bf16) 6.280 over 1 "
        "run; seed 1: eager (torch conv, bf16) 6.250 over 1 run, fast (torch conv, bf16) 6.170 over 1 run"
    )


def test_offset_is_the_signed_mean_over_the_tail():
    eager = [4.0] * 10 + [2.0] * 50
    assert speed._offset([x * 1.03 for x in eager], eager) == pytest.approx(0.03)
    assert speed._offset([x * 0.98 for x in eager], eager) == pytest.approx(-0.02)
    # only the last CURVE_TAIL steps count: an early jump does not move it
    assert speed._offset([8.0] * 10 + [2.0] * 50, eager) == pytest.approx(0.0)


def test_eager_repeats_pair_files_of_one_setup_and_commit_only():
    a = [4.0, 3.0, 2.0, 1.0]
    b = [4.0, 3.3, 2.0, 1.02]  # 10% at step 2, +2% at the last
    runs = {
        "x": curves(0.1, steps=4, losses={"eager": a, "fast": a}),
        "y": curves(0.1, steps=4, losses={"eager": b, "fast": b}),
        "z": curves(0.1, steps=4, losses={"eager": b, "fast": b}, commit="def"),  # other code
        "r": curves(0.1, steps=4, losses={"eager": b, "fast": b}, random=True),  # random teacher
        "s": curves(0.1, steps=3, losses={"eager": b[:3], "fast": b[:3]}),  # other setup
        "t": curves(0.1, steps=4, losses={"eager": b, "fast": b}, seed=1),  # other batches
        "u": curves(0.1, steps=4, losses={"eager": b, "fast": b}, seed=0),  # seed 0 recorded: pairs with x, y
    }
    reps = speed.eager_repeats(runs)
    assert [r["files"] for r in reps] == [("x", "y"), ("x", "u"), ("y", "u")]
    rep = reps[0]
    assert rep["seed"] == 0 and rep["gap"] == pytest.approx(0.1)
    assert rep["gaps"] == pytest.approx([0.0, 0.1, 0.0, 0.02])
    assert rep["offset"] == pytest.approx((0.1 + 0.02) / 4)
    frame = speed.curve_frame({k: runs[k] for k in "xy"})
    assert frame["variant"].tolist() == ["fast", "fast", "eager, repeated"]
    assert frame["file"].iloc[-1] == "x / y"


def test_probe_tables_show_own_and_common_scores_and_each_kind_swapped():
    probe = {
        "precision": "bf16",
        "own": {"eager": 6.19, "fast": 6.25},
        "common": {"eager": 6.19, "fast": 6.24},
        "swap": {"fast": {"embedding": 6.23, "MLP": 6.2}},
        "update": {
            "fast": {
                "embedding": {"rel_diff": 0.5, "sign_flips": 0.2},
                "MLP": {"rel_diff": 0.1, "sign_flips": 0.01},
            }
        },
        "kinds": {"embedding": 100, "MLP": 50},
    }
    runs = {"probe": {"first_step": probe}, "other": curves(0.1)}
    scores, kinds = speed.probe_frames(runs)
    assert scores.to_dict("records") == [
        {"file": "probe", "variant": v, "precision": "bf16", "own step": o, "common evaluator": c}
        for v, o, c in (("eager", 6.19, 6.19), ("fast", 6.25, 6.24))
    ]
    embedding = kinds.set_index("kind").loc["embedding"]
    assert embedding["eager's weights, this kind the variant's"] == 6.23 and embedding["parameters"] == 100
    assert embedding["update vs eager's %"] == 50.0 and embedding["signs flipped %"] == 20.0
    page = speed.render(runs, "src", drawn=False)
    assert "| probe | fast | bf16 | 6.2500 | 6.2400 |" in page
    assert "| probe | fast | embedding | 100 | 6.2300 | 50.0000 | 20.0000 |" in page
    assert "scored by one evaluator" not in speed.render({"x": curves(0.1)}, "src", drawn=False)


def test_grad_probe_tables_by_kind_and_by_layer():
    probe = {
        "precision": "bf16",
        "seed": 2,
        "mixers": ["GatedDeltaNetAttention", "LlamaAttention", "GatedDeltaNetAttention"],
        "by_kind": {
            "fused": {"MLP": {"rel_err": 0.01, "cos": 0.9999}},
            "compiled": {"MLP": {"rel_err": 0.2, "cos": 0.98}},
        },
        "by_layer": {"fused": [0.4, 0.02, 0.01], "compiled": [0.3, 0.04, 0.03]},
        "overall": {"fused": {"signs_flipped": 0.05}, "compiled": {"signs_flipped": 0.25}},
    }
    runs = {"grad_probe_s2": {"grad_probe": probe}, "other": {"rows": []}}
    kinds, layers = speed.grad_probe_frames(runs)
    assert kinds.set_index("variant").loc["compiled", "MLP"] == pytest.approx(20.0)
    assert list(layers.columns) == ["file", "variant", "seed", "0 GDN", "1 FA", "2 GDN"]
    assert layers.set_index("variant").loc["compiled", "0 GDN"] == pytest.approx(30.0)
    summary = speed.grad_probe_summary(runs).iloc[0]
    # compiled is further than fused in layers 1 and 2 (0.04 > 0.02, 0.03 > 0.01), nearer in layer 0 (0.3 < 0.4);
    # the ratios 0.75, 2 and 3 have the median 2
    assert (summary["variant"], summary["seed"], summary["layers"], summary["further than fused"]) == (
        "compiled",
        2,
        3,
        2,
    )
    assert summary["median ratio to fused"] == pytest.approx(2.0)
    assert (summary["first layer %"], summary["first layer, fused %"]) == pytest.approx((30.0, 40.0))
    assert (summary["last layer %"], summary["last layer, fused %"]) == pytest.approx((3.0, 1.0))
    assert (summary["signs flipped %"], summary["signs flipped, fused %"]) == pytest.approx((25.0, 5.0))
    del probe["overall"]  # a probe from before signs_flipped: blank cells
    assert speed.grad_probe_summary(runs)[["signs flipped %", "signs flipped, fused %"]].isna().all(None)
    probe["overall"] = {"fused": {"signs_flipped": 0.05}, "compiled": {"signs_flipped": 0.25}}
    section = "\n".join(speed._grad_probe_section(runs))
    assert "in 2 of 3 layers (median ratio of the errors 2.00-2.00)" in section
    assert (
        "| grad probe s2 | compiled | 2 | 3 | 2 | 2.00 | 30.00 | 40.00 | 3.00 | 1.00 | 25.00 | 5.00 |"
        in section
    )
    assert "| grad probe s2 | compiled | 2 | 20.0 |" in section.split("by kind of parameter:")[1]
    assert speed._grad_probe_section({"other": {"rows": []}}) == []


def test_sdpa_layout_section_reads_the_microbenchmark_and_the_steps_with_another_layout(tmp_path):
    path = tmp_path / "sdpa.json"
    rows = [
        {"layout": x, "mode": m, "ms": ms}
        for x, m, ms in (("hf", "fwd", 0.08), ("hf", "fwd_bwd", 0.97), ("contiguous", "fwd", 0.07))
    ]
    path.write_text(
        json.dumps({"sdpa_layouts": rows, "provenance": {"git_commit": "abcdef123", "date": "2026"}})
    )
    frame = speed.sdpa_layout_frame(path)
    assert frame.loc["hf", "forward + backward ms"] == 0.97 and frame.loc["contiguous", "forward ms"] == 0.07
    assert list(frame.index) == ["hf", "contiguous"]
    row = {
        "variant": "fast",
        "teacher": "t",
        "step_ms": 80.0,
        "tokens_per_s": 2e5,
        "mfu": 0.3,
        "cuda_graphs": True,
        "phase_ms": {},
    }
    steps = speed.step_frame({"a": {"rows": [row | {"sdpa_layout": "contiguous"}]}, "b": {"rows": [row]}})
    section = "\n".join(speed._sdpa_layout_section(steps, path))
    assert "| hf | 0.080 | 0.970 |" in section and "commit abcdef12" in section
    assert "| a | t | fast (SDPA inputs contiguous) | 80 | 200,000 | 30 |" in section
    assert "| b |" not in section
    assert speed._sdpa_layout_section(steps, tmp_path / "missing.json") == []


def test_sdpa_section_with_backends_shows_each_and_the_unsupported(tmp_path):
    path = tmp_path / "sdpa.json"
    rows = [
        {"backend": b, "layout": "hf", "mode": m, "ms": ms}
        for b, m, ms in (
            ("auto", "fwd", 0.08),
            ("auto", "fwd_bwd", 0.97),
            ("efficient", "fwd", "unsupported"),
        )
    ] + [{"backend": "efficient", "layout": "hf", "mode": "fwd_bwd", "ms": "unsupported"}]
    path.write_text(json.dumps({"sdpa_layouts": rows, "provenance": {}}))
    frame = speed.sdpa_layout_frame(path)
    assert list(frame.index) == [("auto", "hf"), ("efficient", "hf")]
    assert frame.loc[("auto", "hf"), "forward ms"] == 0.08 and frame.loc[("efficient", "hf")].isna().all()
    section = "\n".join(speed._sdpa_layout_section(pd.DataFrame(), path))
    assert "## Attention inputs' layout and SDPA's kernels" in section
    assert (
        "| auto | hf | 0.080 | 0.970 |" in section
        and "| efficient | hf | unsupported | unsupported |" in section
    )


def test_conv_chunk_section_names_the_fastest_chunk_and_the_one_the_step_uses(tmp_path, monkeypatch):
    path = tmp_path / "chunks.json"
    rows = [
        {"chunk": c, "mode": m, "ms": ms, "batch": 32, "T": 512, "C": 576}
        for c, m, ms in ((128, "fwd", 0.03), (128, "fwd_bwd", 0.10), (64, "fwd", 0.02), (64, "fwd_bwd", 0.12))
    ]
    path.write_text(json.dumps({"conv_chunks": rows, "provenance": {"git_commit": "abcdef123"}}))
    frame = speed.conv_chunk_frame(path)
    assert list(frame.index) == [64, 128] and frame.loc[128, "forward + backward ms"] == 0.10
    monkeypatch.setattr(speed.short_conv, "FLA_CONV_CHUNK", 64)
    section = "\n".join(speed._conv_chunk_section(path))
    assert "Fastest forward + backward: chunk 128; the step uses 64." in section
    assert "| 64 | 0.020 | 0.120 |" in section and "batch 32 x 512, 576 channels" in section
    assert speed._conv_chunk_section(tmp_path / "missing.json") == []


EQUIVALENT = judging.EQUIVALENCE_TARGET
BASE = [
    4.0 * 0.97**i for i in range(60)
]  # a 60-step loss curve (the tail the offset averages over: 50 steps)


def judged(
    early: float = 0.0,
    seeds: tuple[int, ...] = (0, 1, 2),
    repeats: int = 3,
    rounding: dict[str, tuple[float, float]] | None = None,
) -> dict:
    """A judged file as ``bench --judge`` writes it. Per seed the eager repeats are the base curve scaled by 1 + d, d
    spread over +-2%; the fast run is the middle repeat's curve, ``early`` higher at step 5. The
    float32 probe: per variant (params_rel_median, loss_gap) through the rounding check (None: fast within 1e-5)."""
    spread = [-0.02 + 0.04 * k / (repeats - 1) for k in range(repeats)]
    eager = {s: [[x * (1 + d) for x in BASE] for d in spread] for s in seeds}
    fast = {s: [x * (1 + (early if i == 5 else 0.0)) for i, x in enumerate(BASE)] for s in seeds}
    probe = {"fast": (1e-5, 1e-5)} if rounding is None else rounding
    agreement = {v: {"params_rel_median": p, "loss_gap": g} for v, (p, g) in probe.items()}
    update = {
        v: {"MLP": {"rel_diff": 0.1, "sign_flips": 0.002}, "norms": {"rel_diff": 0.2, "sign_flips": 0.01}}
        for v in probe
    }
    fp32 = {
        "own": {},
        "common": {},
        "agreement": agreement,
        "update": update,
        "rounding": {v: equivalence.rounding_check(**a) for v, a in agreement.items()},
    }
    return {
        "curves": equivalence.judge_curves(fast, eager),
        "setting": {"steps": len(BASE), "precision": "bf16"},
        "losses": {s: {"fast": fast[s], "eager": eager[s]} for s in seeds},
        "first_step": {"fp32": fp32} if probe else {},
        "files": [{"file": "step_profile_cuda_curve_s0.json", "git_commit": "abc1234", "device": "GPU x1"}],
        "provenance": {"git_commit": "def5678", "params": {"tag": "equivalence"}},
    }


def write_step_file(folder) -> None:
    """One timing file, ``step_profile_cuda_a.json``, as the folder's curated step file."""
    sources = {"step_profile_cuda_a.json": {"rows": [step(0.36, 200_000.0, 80.0)]}}
    (folder / speed.STEP_FILE).write_text(json.dumps({"sources": sources}))


def write_judged(folder, data: dict) -> dict:
    """``data`` as the folder's curated judged file beside a curated timing file; the folder's runs, loaded."""
    (folder / judging.JUDGED_FILE).write_text(json.dumps(data))
    write_step_file(folder)
    return speed.load(folder)


def test_load_names_each_curated_source_by_its_tag_in_file_name_order(tmp_path):
    names = ["step_profile_cuda_b.json", "step_profile_cuda.json", "step_profile_cuda_a_2.json"]
    sources = {name: {"rows": [], "provenance": {"note": name}} for name in names}
    (tmp_path / speed.STEP_FILE).write_text(json.dumps({"sources": sources}))
    (tmp_path / judging.JUDGED_FILE).write_text(json.dumps({"curves": None, "files": []}))
    runs = speed.load(tmp_path)
    assert list(runs) == ["", "a_2", "b", "equivalence"]
    assert runs["a_2"]["provenance"]["note"] == "step_profile_cuda_a_2.json"
    assert runs["equivalence"] == {"curves": None, "files": []}


@pytest.mark.parametrize(
    ("early", "rounding", "status"),
    [
        (
            0.0,
            None,
            "met",
        ),  # the fast run in the middle of eager's repeats at every seed, its update within 1e-4
        (0.3, None, "not met"),  # the most distant run at all three seeds by its largest gap: p = 1/64
        (0.0, {"fast": (3e-4, 1e-5)}, "not met"),  # the curves pass, one float32 update does not
        (0.0, {}, "not measured"),  # no float32 probe
        (0.0, {"compiled": (1e-5, 1e-5)}, "not measured"),  # a probe without the fast path
    ],
)
def test_equivalence_check_from_a_judged_file(tmp_path, early, rounding, status):
    runs = write_judged(tmp_path, judged(early, rounding=rounding))
    row = by_target(runs)[EQUIVALENT]
    assert row["status"] == status
    curves = runs["equivalence"]["curves"]
    assert f"largest gap p = {curves['p']['max_gap']:.4f} (fast vs eager: seed 0 " in row["figures"]
    assert row["figures"].startswith(
        f"curves (3 seeds x 3 eager repeats, 60 steps, bf16): {curves['outcome']}"
    )
    assert ("fast failed" in row["figures"]) == (rounding == {"fast": (3e-4, 1e-5)})
    assert speed.step_frame(runs)["file"].tolist() == ["a"]  # the judged file has no timings


def test_equivalence_check_untested_designs_and_too_few_seeds_are_not_measured(tmp_path):
    untested = judged(0.3, seeds=(0, 1), repeats=2)  # smallest p (1/3)^2: no result could fail it
    assert untested["curves"]["outcome"] == "untested"
    assert by_target(write_judged(tmp_path, untested))[EQUIVALENT]["status"] == "not measured"
    two_seeds = judged(0.0, seeds=(0, 1), repeats=7)  # a pass over two seeds: the target asks for three
    assert two_seeds["curves"]["outcome"] == "passed"
    row = speed.equivalence_check(two_seeds)
    assert (
        row["status"] == "not measured"
        and "smallest attainable p 0.0156), over fewer than 3 seeds" in row["figures"]
    )
    failed = judged(0.3, seeds=(0, 1), repeats=7)  # a failure stands with any number of seeds
    assert failed["curves"]["outcome"] == "failed"
    assert speed.equivalence_check(failed)["status"] == "not met"


def test_equivalence_check_without_the_judged_file_is_not_measured(tmp_path):
    write_step_file(tmp_path)
    assert judging.load_judged(tmp_path) is None
    row = by_target(speed.load(tmp_path))[EQUIVALENT]
    assert (row["status"], row["figures"]) == ("not measured", "")
    assert judging.equivalence_summary(None) == ""
    assert speed._equivalence_section(None, {}) == []
    assert speed.figure({}, tmp_path / "f.png") is False and not (tmp_path / "f.png").exists()


def test_equivalence_section_tables_reading_and_figure(tmp_path):
    probe = {"fast": (2e-4, 1.5e-3), "fused": (5e-6, -9e-4)}
    runs = write_judged(tmp_path, judged(0.3, rounding=probe))
    bf16 = {
        "precision": "bf16",
        "own": {},
        "common": {"eager": 6.18, "compiled": 6.24},
        "swap": {},
        "update": {},
    }
    runs["first_step"] = {
        "first_step": bf16,
        "provenance": {"git_commit": "7310000"},
    }  # the bf16 probe's file
    page = speed.render(runs, "src", drawn=True)
    section = page.split("## The fast path against eager: the equivalence test")[1].split("\n## ")[0]
    assert "| 0 | 4 |" in section and "| 4 of 4 |" in section  # the fast run the most distant at seed 0
    assert "| fast | 1.5e-3 | 2.0e-4 | 0.200-1.000 | failed |" in section
    assert "| fused | -9.0e-4 | 5.0e-6 | 0.200-1.000 | failed |" in section
    assert "departs from eager in the early steps by more than eager's repeats" in section
    assert "falls at steps 5, 5 and 5 of 60 at seeds 0, 1 and 2)" in section
    assert "40x closer to eager's loss than the compiled path's bf16 update" in section  # 0.06 / 1.5e-3
    assert "fused on its loss (9.0e-4 nats), parameters within (5.0e-6)" in section
    assert "figures/distill_speed_curves.png" in section
    assert speed.figure(runs, tmp_path / "f.png") and (tmp_path / "f.png").stat().st_size > 0
    passed = speed._equivalence_reading(judged(0.0), {})
    assert passed.startswith(
        "By the largest gap the test cannot tell the fast run from eager's repeats (p = 1.00)"
    )
    assert "every variant is within 1e-4" in passed


def test_equivalence_summary_is_one_line():
    line = judging.equivalence_summary(judged(0.3))
    assert "\n" not in line
    assert line.startswith(
        "loss curves, 3 seeds x 3 eager repeats, 60 steps, bf16: failed, the fast run the most "
    )
    assert "largest gap at 3 of 3 seeds (p = 0.016)" in line
    assert line.endswith(
        "one float32 update of the fast path: passed, loss 1.0e-5 nats and median parameter 1.0e-5 "
        "from eager's, against 1e-4"
    )


def test_the_rounding_null_is_reported_beside_the_target_without_changing_it():
    """The fast run against eager runs perturbed at rounding: its outcome and p-values reach the summary, the check's
    figures and the page's section, while the target's status stays the curve test's."""
    base = judged(0.3)
    perturbed = {s: [[x * (1 + d) for x in BASE] for d in (-0.4, 0.0, 0.4)] for s in (0, 1, 2)}
    fast = {s: base["losses"][s]["fast"] for s in (0, 1, 2)}
    null = equivalence.judge_curves(fast, perturbed)
    assert null["outcome"] == "passed" and base["curves"]["outcome"] == "failed"
    with_null = base | {"curves_vs_rounding": null}
    line = judging.equivalence_summary(with_null)
    expected = (
        f"against eager runs from weights perturbed at bf16's rounding (3 runs a seed): passed (largest gap p = "
        f"{null['p']['max_gap']:.2f}, tail p = {null['p']['tail_offset']:.2f})"
    )
    assert expected in line and expected not in judging.equivalence_summary(base)
    check = speed.equivalence_check(with_null)
    assert check["status"] == "not met" == speed.equivalence_check(base)["status"]
    assert (
        "rounding null (eager from weights perturbed at bf16's rounding, 3 runs a seed; " in check["figures"]
    )
    section = "\n".join(speed._equivalence_section(with_null, {}))
    assert "**passed**" in section and "flips 0.20-1.00% of the signs" in section
    assert "Against a rounding-level change" not in "\n".join(speed._equivalence_section(base, {}))
