"""The fast path's equivalence checks (hybridlib.train.equivalence) driven to every outcome with loss curves shaped
like the H200's 200-step SmolLM2 curves (7.7 nats falling to ~0.6, run-to-run noise of a few per cent)."""

import json

import numpy as np
import pytest
import torch

from hybridlib.train.equivalence import (
    ALPHA,
    LOSS_TOL,
    PARAM_TOL,
    _rank_sum_p,
    curve_distances,
    judge_curves,
    rounding_check,
)

STEPS = 200


def _curve(rng: np.random.Generator, noise: float, offset: float = 0.0) -> np.ndarray:
    """A distillation loss curve: 7.7 -> ~0.6 nats, multiplicative noise, a relative ``offset`` over the tail."""
    t = np.arange(STEPS)
    base = 0.55 + 7.15 * np.exp(-t / 6.0) + 0.3 * np.exp(-t / 60.0)
    shift = 1 + offset * (t >= STEPS - 80)
    return base * shift * (1 + noise * rng.standard_normal(STEPS))


def _runs(seeds: int, repeats: int, fast_noise: float, fast_offset: float = 0.0, rng_seed: int = 0):
    rng = np.random.default_rng(rng_seed)
    eager = {s: [_curve(rng, 0.02) for _ in range(repeats)] for s in range(seeds)}
    fast = {s: _curve(rng, fast_noise, fast_offset) for s in range(seeds)}
    return fast, eager


def test_rounding_check_passes_within_both_tolerances_and_fails_beyond_either():
    assert rounding_check(3e-5, -2e-5)["outcome"] == "passed"
    assert rounding_check(PARAM_TOL, LOSS_TOL)["outcome"] == "passed"  # a tie with the tolerance passes
    assert rounding_check(1.2e-4, 0.0)["outcome"] == "failed"
    assert rounding_check(1e-6, 0.055)["outcome"] == "failed"  # the bf16 first-update gap, in float32
    assert rounding_check(1e-6, -0.055)["loss_gap"] == 0.055
    with pytest.raises(ValueError, match="params_rel_median and loss_gap must be finite"):
        rounding_check(float("nan"), 0.0)


def test_curve_distances_are_relative_symmetric_and_read_the_tail():
    a = np.full(STEPS, 1.0)
    b = a.copy()
    b[10] = 1.5  # one transient step, 40% of the pair's mean there
    b[-50:] = 1.02  # a tail offset of ~2%
    d = curve_distances(a, b)
    assert d == curve_distances(b, a)
    assert d["max_gap"] == pytest.approx(0.5 / 1.25)
    assert d["tail_offset"] == pytest.approx(0.02 / 1.01)
    with pytest.raises(ValueError, match="equal length >= tail=50"):
        curve_distances(a, b[:100])


def test_rank_sum_null_distribution_is_exact():
    # two seeds with 3 runs each: P(sum >= 6) = 1/9, P(sum >= 5) = 3/9, P(sum >= 2) = 1
    assert _rank_sum_p(6, [3, 3]) == pytest.approx(1 / 9)
    assert _rank_sum_p(5, [3, 3]) == pytest.approx(3 / 9)
    assert _rank_sum_p(2, [3, 3]) == pytest.approx(1.0)
    assert _rank_sum_p(12, [4, 4, 4]) == pytest.approx(1 / 64)


def test_a_fast_run_that_is_another_eager_run_passes():
    fast, eager = _runs(seeds=3, repeats=3, fast_noise=0.02)
    out = judge_curves(fast, eager)
    assert out["outcome"] == "passed" and out["min_p"] == pytest.approx(1 / 64)
    assert min(out["p"].values()) >= ALPHA / 2
    assert all(row["runs"] == 4 for row in out["seeds"].values())


def test_a_fast_run_off_by_a_systematic_tail_offset_fails():
    fast, eager = _runs(seeds=3, repeats=3, fast_noise=0.02, fast_offset=0.1)
    out = judge_curves(fast, eager)
    assert out["outcome"] == "failed"
    assert out["p"]["tail_offset"] == pytest.approx(1 / 64)  # the most distant run at every seed
    assert [row["tail_offset"]["rank"] for row in out["seeds"].values()] == [4, 4, 4]


def test_a_noisier_fast_run_fails_on_its_largest_gap():
    fast, eager = _runs(seeds=3, repeats=3, fast_noise=0.2)
    assert judge_curves(fast, eager)["outcome"] == "failed"


def test_a_design_that_cannot_fail_is_untested():
    """Two eager repeats at three seeds: the smallest p-value is 1/27 > ALPHA / 2, so even the most distant fast
    run at every seed cannot fail the check."""
    fast, eager = _runs(seeds=3, repeats=2, fast_noise=0.02, fast_offset=0.3)
    out = judge_curves(fast, eager)
    assert out["outcome"] == "untested" and out["min_p"] == pytest.approx(1 / 27)


def test_ties_count_for_the_fast_run():
    """A fast run identical to an eager repeat ties with it: the fast run takes the lower rank (conservative)."""
    rng = np.random.default_rng(3)
    eager = {s: [_curve(rng, 0.02) for _ in range(3)] for s in range(3)}
    fast = {s: eager[s][0].copy() for s in eager}
    out = judge_curves(fast, eager)
    assert out["outcome"] == "passed"
    for row in out["seeds"].values():
        assert row["max_gap"]["rank"] <= 2  # tied with its twin, never ranked above it


def test_bad_designs_are_refused_with_the_reason():
    fast, eager = _runs(seeds=3, repeats=3, fast_noise=0.02)
    with pytest.raises(ValueError, match="must name the same seeds"):
        judge_curves({0: fast[0]}, eager)
    with pytest.raises(ValueError, match=r"needs >= 2 eager repeats; eager repeats per seed: \{1: 1\}"):
        judge_curves(fast, {**eager, 1: eager[1][:1]})


def _bench_json(path, seed: int, losses: dict, **setting) -> None:
    curves = {"teacher": "smollm2-135m", "steps": STEPS, "batch_size": 32, "seq_len": 512, "lr": 2e-4}
    curves |= {"precision": "bf16", "conv_impl": "torch", "seed": seed, "perturb": 0.0} | setting
    path.write_text(json.dumps({"loss_curves": curves | {"losses": {k: list(v) for k, v in losses.items()}}}))


def test_judge_fast_path_pairs_the_bench_files_by_seed(tmp_path):
    """Each curve file of the fast variant carries eager's curve of its own process: one repeat; eager-only files
    add the others; eager runs from perturbed weights form the rounding null. The float32 first-step probe is
    judged by the rounding check."""
    from hybridlib.train.equivalence import BF16_ROUNDING, judge_fast_path

    fast, eager = _runs(seeds=3, repeats=3, fast_noise=0.02)
    for s in range(3):
        _bench_json(tmp_path / f"curve_s{s}.json", s, {"eager": eager[s][0], "fast": fast[s]})
        for r in (1, 2):
            _bench_json(tmp_path / f"eager_s{s}_r{r}.json", s, {"eager": eager[s][r]})
    probe = {"own": {}, "common": {"eager": 6.13, "fast": 6.13}, "precision": "fp32"}
    probe["agreement"] = {"fast": {"params_rel_median": 2e-5, "loss_gap": 3e-5}}
    probe["update"] = {"fast": {"MLP": {"rel_diff": 0.01, "sign_flips": 0.001}}}
    (tmp_path / "first_step_fp32.json").write_text(json.dumps({"first_step": probe, "loss_curves": None}))
    out = judge_fast_path(list(tmp_path.glob("*.json")))
    assert out["curves"]["p"] == judge_curves(fast, eager)["p"]
    assert out["curves"]["outcome"] == "passed" and out["setting"]["precision"] == "bf16"
    assert [f["file"] for f in out["files"]][:2] == ["curve_s0.json", "curve_s1.json"]
    assert out["first_step"]["fp32"]["rounding"]["fast"]["outcome"] == "passed"
    assert out["curves_vs_rounding"] is None  # no perturbed runs
    rng = np.random.default_rng(9)
    for s in range(3):
        for r in (1, 2):
            losses = {"eager": _curve(rng, 0.05)}
            _bench_json(
                tmp_path / f"perturbed_s{s}_r{r}.json", s, losses, perturb=BF16_ROUNDING, perturb_seed=r
            )
    out = judge_fast_path(list(tmp_path.glob("*.json")))
    perturbed = {s: [out["losses"][s]["perturbed"][i] for i in (0, 1)] for s in range(3)}
    assert out["curves_vs_rounding"]["p"] == judge_curves(fast, perturbed)["p"]
    assert out["curves"]["p"] == judge_curves(fast, eager)["p"]  # the perturbed runs are no eager repeats
    assert out["curves_vs_rounding"]["outcome"] == "untested"  # two perturbed runs a seed cannot fail it
    _bench_json(tmp_path / "perturbed_s0_r3.json", 0, {"eager": eager[0][0]}, perturb=0.01)
    with pytest.raises(ValueError, match="perturbed_s0_r3.json: a perturbed run must be eager alone"):
        judge_fast_path(list(tmp_path.glob("*.json")))
    (tmp_path / "perturbed_s0_r3.json").unlink()
    _bench_json(tmp_path / "eager_s0_r3.json", 0, {"eager": eager[0][0]}, lr=1e-3)
    with pytest.raises(ValueError, match="eager_s0_r3.json: curves of another setting"):
        judge_fast_path(list(tmp_path.glob("*.json")))


def test_an_earlier_judgement_rejudges_with_new_runs(tmp_path):
    """A judged file's runs count again beside new bench files: the same p-values as from the bench files."""
    from hybridlib.train.equivalence import BF16_ROUNDING, judge_fast_path

    fast, eager = _runs(seeds=3, repeats=3, fast_noise=0.02)
    for s in range(3):
        _bench_json(tmp_path / f"curve_s{s}.json", s, {"eager": eager[s][0], "fast": fast[s]})
        for r in (1, 2):
            _bench_json(tmp_path / f"eager_s{s}_r{r}.json", s, {"eager": eager[s][r]})
    (tmp_path / "judged.json").write_text(json.dumps(judge_fast_path(list(tmp_path.glob("*_s*.json")))))
    rng = np.random.default_rng(3)
    perturbed = {s: [_curve(rng, 0.05) for _ in range(3)] for s in range(3)}
    new = tmp_path / "new"
    new.mkdir()
    for s in range(3):
        for r in range(3):
            losses = {"eager": perturbed[s][r]}
            _bench_json(new / f"perturbed_s{s}_r{r}.json", s, losses, perturb=BF16_ROUNDING, perturb_seed=r)
    out = judge_fast_path([tmp_path / "judged.json", *new.glob("*.json")])
    assert out["curves"]["p"] == judge_curves(fast, eager)["p"]
    assert out["curves_vs_rounding"]["p"] == judge_curves(fast, perturbed)["p"]
    assert len(out["files"]) == 9 + 9
    with pytest.raises(ValueError, match="judged.json: a second fast curve for seed 0"):
        judge_fast_path([tmp_path / "judged.json", tmp_path / "curve_s0.json"])


def test_adamw_first_update_turns_gradient_rounding_into_full_size_changes():
    """Why the paths' first updates differ though their gradients agree to rounding: AdamW's first step moves each
    weight by ``lr * g / (|g| + eps)`` (bias-corrected moments ``g`` and ``g**2``), i.e. ``lr * sign(g)``: a
    rounding-level change of a small gradient component that flips its sign changes the update by ``2 lr``. The
    update's relative difference is then ``2 sqrt(share of flipped signs)``, far beyond the gradient's own (SGD
    would pass the gradient's difference on unchanged)."""
    from tests.tiny_models import tiny_causal_lm

    model = tiny_causal_lm(
        "llama",
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=256,
        # eager attention: torch's bf16 CPU SDPA kernel stops under ATEN_CPU_CAPABILITY=default on CPUs with AMX
        # ("pack_vnni2 is only supported when avx512 is supported"); the attention kernel plays no part here
        attn_implementation="eager",
    )
    ids = torch.randint(0, 256, (4, 64), generator=torch.Generator().manual_seed(0))

    def flat_grad(bf16: bool) -> torch.Tensor:
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            model(input_ids=ids, labels=ids).loss.backward()
        return torch.cat([p.grad.detach().flatten().clone() for p in model.parameters()])

    def first_update(g: torch.Tensor, lr: float = 2e-4, eps: float = 1e-8) -> torch.Tensor:
        w = torch.nn.Parameter(torch.zeros_like(g))
        w.grad = g.clone()
        torch.optim.AdamW([w], lr=lr, eps=eps, weight_decay=0.0).step()
        return w.detach()

    g32, g16 = flat_grad(False), flat_grad(True)
    u32, u16 = first_update(g32), first_update(g16)
    torch.testing.assert_close(u32, -2e-4 * g32 / (g32.abs() + 1e-8), rtol=1e-5, atol=1e-12)
    grad_rel = float((g16 - g32).norm() / g32.norm())
    adam_rel = float((u16 - u32).norm() / u32.norm())
    live = g32.abs() > 1e-6  # |g| >> eps: the update is lr * sign(g)
    flips = float((g16.sign() != g32.sign())[live].double().mean())
    assert 1e-4 < grad_rel < 0.1 and flips > 0
    assert adam_rel > 5 * grad_rel
    assert adam_rel == pytest.approx(2 * flips**0.5, rel=0.25)
