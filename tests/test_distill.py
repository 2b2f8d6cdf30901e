"""Layout distillation: KL falls, the student cache, resume wiring, and the chapter's analysis helpers."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from fake_runs import distill_run
from transformers import LlamaConfig, LlamaForCausalLM

from hybridlib.convert import is_recurrent_parameter
from hybridlib.findings import chapter
from hybridlib.findings.layout import report
from hybridlib.models.tiny import TinySpec, train_tokenizer
from hybridlib.train import distill

LANGS = ("eng", "fra")
ARGS = {
    "fa_fraction": 0.25,
    "train_tokens": 4 * 32 * 12,
    "seq_len": 32,
    "batch_size": 4,
    "lr_recurrent": 1e-2,
    "lr_rest": 3e-3,
    "eval_every_tokens": 4 * 32 * 4,
    "val_docs_per_language": 1,
    "languages": LANGS,
    "device": "cpu",
    "progress": False,
}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny matrices: one thread avoids the synchronisation cost that dominates on shared cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory):
    """A random 4-layer Llama with a 300-token BPE tokenizer trained on English and French chapters."""
    folder = tmp_path_factory.mktemp("teacher")
    tokenizer = train_tokenizer(TinySpec(vocab_size=300, tokenizer_chars_per_language=4000, languages=LANGS))
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            tie_word_embeddings=True,
        )
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def run(teacher_dir, layout="standard_periodic", **kw):
    return distill.distill_layout("tiny-teacher", layout, teacher_path=teacher_dir, **(ARGS | kw))


def forbid_training(monkeypatch):
    def fail(*a, **k):
        raise AssertionError("trained although the student is cached")

    monkeypatch.setattr(distill, "train", fail)


def test_distillation_lowers_validation_kl_and_caches(teacher_dir, cache, monkeypatch):
    runs = {name: run(teacher_dir, name) for name in ("standard_periodic", "reverse_periodic")}
    assert (
        runs["standard_periodic"].settings["fa_layers"] == [3] and runs["reverse_periodic"].pattern == "A..."
    )
    for r in runs.values():
        assert [e["tokens"] for e in r.evals] == [0, 512, 1024, 1536]
        assert r.final("kl") < 0.8 * r.evals[0]["kl"]
        assert set(r.evals[-1]["kl_by_lang"]) == set(LANGS)
        assert r.tokens_per_s > 0 and r.cpu_s_per_1m_tokens > 0 and r.mfu is None
    forbid_training(monkeypatch)
    again = run(teacher_dir, "reverse_periodic")
    assert again.key == runs["reverse_periodic"].key and again.evals == runs["reverse_periodic"].evals
    a, b = runs["reverse_periodic"].load_model(), again.load_model()
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    with pytest.raises(AssertionError, match="trained although"):
        run(teacher_dir, "reverse_periodic", data_seed=1)
    with pytest.raises(
        AssertionError, match="trained although"
    ):  # a replicate's init seed is another student
        run(teacher_dir, "reverse_periodic", init_seed=1)


def test_coinciding_layouts_share_one_student(teacher_dir, cache, monkeypatch):
    first = run(teacher_dir, "reverse_periodic", train_tokens=256)
    forbid_training(monkeypatch)
    same = run(teacher_dir, "sandwich", train_tokens=256)  # 4 layers, 1 FA layer: both are [0]
    assert same.key == first.key and same.layout_name == "sandwich"


def test_killed_run_resumes_to_identical_weights(teacher_dir, cache, tmp_path, monkeypatch):
    straight = run(teacher_dir).load_model()
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path / "other"))
    monkeypatch.setattr(distill, "CHECKPOINT_EVERY_S", 0.0)  # a checkpoint after every step
    real_train = distill.train

    def killed(*args, callbacks=(), **kw):
        def kill(step, history):
            if step == 5:  # 12 steps; callbacks run before the step's checkpoint: the last one is step 4's
                raise KeyboardInterrupt

        return real_train(*args, callbacks=[*callbacks, kill], **kw)

    monkeypatch.setattr(distill, "train", killed)
    with pytest.raises(KeyboardInterrupt):
        run(teacher_dir)
    steps = []
    monkeypatch.setattr(
        distill,
        "train",
        lambda *a, callbacks=(), **k: real_train(
            *a, callbacks=[*callbacks, lambda s, h: steps.append(s)], **k
        ),
    )
    resumed = run(teacher_dir)
    assert steps == list(range(5, 13))  # continued from the checkpoint at step 4, not from scratch
    for x, y in zip(straight.state_dict().values(), resumed.load_model().state_dict().values()):
        assert torch.equal(x, y)


def test_bad_arguments_name_the_parameter(teacher_dir, cache):
    with pytest.raises(ValueError, match="layout_name='ring'"):
        run(teacher_dir, "ring")
    with pytest.raises(ValueError, match="mixer='mamba'"):
        run(teacher_dir, mixer="mamba")
    with pytest.raises(ValueError, match="precision='fp8'"):
        run(teacher_dir, precision="fp8")
    with pytest.raises(ValueError, match="init_seed"):
        run(teacher_dir, init_seed=-1)
    with pytest.raises(ValueError, match="teacher_name='gpt2'"):
        distill.distill_layout("gpt2", "sandwich")
    with pytest.raises(ValueError, match="fa_fraction"):
        distill.fa_count(30, 1.5)


def test_fa_count_and_recurrent_group():
    assert [distill.fa_count(n, 0.25) for n in (6, 18, 30, 36, 40)] == [2, 5, 8, 9, 10]
    names = (
        "model.layers.3.self_attn.gdn.q_proj.weight",
        "model.layers.3.self_attn.q_proj.weight",
        "lm_head.weight",
        "model.layers.1.self_attn.gdn.A_log",
    )
    assert [is_recurrent_parameter(name) for name in names] == [True, False, False, True]


# --- analysis helpers on hand-made numbers ---------------------------------------------------------


def fake_run(label, ce, kl, mixer="gdn"):
    tokens = [0, 100, 200, 400, 800]
    evals = [{"tokens": t, "ce": c, "kl": k, "delta": c - 1.0} for t, c, k in zip(tokens, ce, kl)]
    return distill_run(label, label, evals, {"mixer": mixer})


def test_speedup_table():
    runs = {
        "standard_periodic": fake_run("standard_periodic", [9, 4, 3, 2.5, 2.0], [5, 3, 2, 1.5, 1.0]),
        "reverse_periodic": fake_run("reverse_periodic", [9, 3, 2.0, 1.8, 1.6], [5, 2, 1, 0.8, 0.6]),
        "sandwich": fake_run("sandwich", [9, 5, 4, 3, 2.5], [5, 4, 3, 2, 1.5]),
    }
    table = report.speedup_table(runs)
    assert table.loc["standard_periodic", "speedup"] == pytest.approx(1.0)
    assert table.loc["reverse_periodic", "tokens_to_baseline"] == pytest.approx(200.0)
    assert table.loc["reverse_periodic", "pct_of_training"] == pytest.approx(25.0)
    assert table.loc["reverse_periodic", "speedup"] == pytest.approx(4.0)
    # sandwich never reaches 2.0; the baseline reaches sandwich's final 2.5 at 400 of its 800 tokens: 0.5
    assert math.isnan(table.loc["sandwich", "tokens_to_baseline"])
    assert table.loc["sandwich", "speedup"] == pytest.approx(0.5)
    long = report.curves({label: [r, r] for label, r in runs.items()})
    assert len(long) == 24 and set(long.columns) == {"layout", "replicate", "tokens", "ce", "kl"}


def test_layout_plan_marks_coinciding_layouts():
    plan = report.layout_plan(6, 2, ["standard_periodic", "reverse_periodic", "sandwich", "endpoint_spread"])
    assert plan.loc["standard_periodic", "pattern"] == "..A..A"
    assert plan.loc["endpoint_spread", "same_as"] == "sandwich" and plan.loc["sandwich", "same_as"] == ""


def doc_frame(kl_scale, ce_shift, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for lang in ("eng", "rus", "hin"):
        for d in range(6):
            ce_t = 2 + rng.random()
            rows.append(
                (
                    lang,
                    f"d{d}",
                    50,
                    ce_t + ce_shift + 0.3 * kl_scale,
                    ce_t,
                    kl_scale * (1 + 0.1 * rng.random()),
                )
            )
    return pd.DataFrame(rows, columns=["lang", "doc_id", "tokens", "ce_student", "ce_teacher", "kl"])


def test_one_replicates_layout_table():
    scores = {
        "standard_periodic": doc_frame(1.0, 0.1),
        "reverse_periodic": doc_frame(0.7, 0.05),
        "sandwich": doc_frame(1.0, 0.1),
    }
    table = report.layout_table(scores)
    assert table.loc["standard_periodic", "R"] == pytest.approx(1.0)
    assert table.loc["reverse_periodic", "R"] == pytest.approx(0.7, rel=1e-6)
    assert table.loc["sandwich", "R"] == pytest.approx(1.0)
    assert table.loc["reverse_periodic", "delta_vs_base"] == pytest.approx(-0.05 - 0.3 * 0.3)


def test_perplexity_by_script_counts_improved_languages():
    base = doc_frame(1.0, 0.1)
    better = base.assign(ce_student=base["ce_student"] - np.where(base["lang"] == "hin", 0.1, -0.01))
    per_lang, summary = report.perplexity_by_script({"standard_periodic": base, "reverse_periodic": better})
    assert per_lang.loc[("reverse_periodic", "hin"), "ppl_change_pct"] == pytest.approx(
        100 * (math.exp(-0.1) - 1)
    )
    assert per_lang.loc[("reverse_periodic", "hin"), "script"] == "Deva"
    assert summary.loc["reverse_periodic", "improved"] == "1/3"


def test_chapter_defaults_are_the_recipes_of_each_presets_teacher():
    """One definition: each preset's defaults are read from its teacher's recipe (here against hand-typed values)."""
    values = chapter("layout_distillation").resolve("gpu")
    assert (values["teacher"], values["train_tokens"], values["lr_recurrent"], values["swa_window"]) == (
        "smollm2-135m",
        1_048_576,
        7e-4,
        32,
    )
    assert (
        distill.recipe("tiny-teacher").batch_size
        == chapter("layout_distillation").resolve("seminar")["batch_size"]
    )


def _committed(base_ce: float, base_delta: tuple[float, float, float], verdict: str) -> dict:
    lo, mid, hi = base_delta
    return {
        "speedup": {
            "standard_periodic": {"final_ce": base_ce, "speedup": 1.0},
            "sandwich": {"final_ce": 3.5, "speedup": 5.0},
        },
        "test": {
            "standard_periodic": {
                "delta": mid,
                "delta_low": lo,
                "delta_high": hi,
                "R": 1.0,
                "R_low": 1.0,
                "R_high": 1.0,
            },
            "sandwich": {
                "delta": 0.23,
                "delta_low": 0.21,
                "delta_high": 0.25,
                "R": 0.5,
                "R_low": 0.48,
                "R_high": 0.52,
            },
        },
        "curves": {"sandwich": [{"tokens": 0, "ce": 9.0}, {"tokens": 65536, "ce": 4.0}]},
        "verdict": {"status": verdict},
    }


def test_run_to_run_spread_of_committed_runs():
    history = [
        ("run-a", _committed(3.89, (0.59, 0.61, 0.64), "partly reproduced")),
        ("run-b", _committed(4.16, (0.86, 0.88, 0.91), "reproduced")),
    ]
    between = report.run_to_run(history)
    assert len(between) == 4 and set(between["verdict"]) == {"partly reproduced", "reproduced"}
    spread = report.run_spread(between)
    assert spread.loc["standard_periodic", "final_ce range"] == pytest.approx(0.27)
    assert spread.loc["standard_periodic", "delta range"] == pytest.approx(0.27)
    assert spread.loc["sandwich", "final_ce range"] == 0 and spread.loc["sandwich", "runs"] == 2
    curves = report.curves_by_run(history)
    assert curves[["run", "tokens", "ce"]].values.tolist() == [["run-a", 65536, 4.0], ["run-b", 65536, 4.0]]


def _distill_rank(rank: int, port: int, teacher_dir: str, cache: str, out: str) -> None:
    """One torchrun-like rank (gloo on the CPU) of the chapter's distillation, into its own cache."""
    import os

    import torch.distributed as dist

    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE="2",
        HYBRIDLIB_CACHE=cache,
    )
    torch.set_num_threads(1)
    r = run(teacher_dir)
    if rank == 0:
        torch.save({"run": r, "state": r.load_model().state_dict()}, out)
    dist.destroy_process_group()


@pytest.mark.slow
def test_distillation_on_two_processes_trains_the_one_process_student(teacher_dir, tmp_path, monkeypatch):
    """``torchrun --nproc-per-node 2`` on the chapter's own entry point (two gloo ranks here): DDP at the same
    global batch (each rank its half of every batch) reaches the one-process student under the same cache key,
    written once. 12 Adam steps at lr 3e-3 / 1e-2 turn summation-order differences into at most 3e-5 in nearly every
    weight; Adam's normalisation makes a rarely seen token's embedding row the exception (1.4e-4 in 2 of 9,600
    entries under ATen's portable kernels on an Intel Xeon, 2026-12-02). A rank training on the wrong shard or
    skipping the all-reduce moves most weights by ~lr: so at most 0.1% of a tensor beyond 1e-4, none beyond 1e-3."""
    import socket

    import torch.multiprocessing as mp

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path / "one"))
    one = run(teacher_dir)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "rank0.pt"
    mp.spawn(
        _distill_rank, args=(port, str(teacher_dir), str(tmp_path / "two"), str(out)), nprocs=2, join=True
    )
    two = torch.load(out, weights_only=False)
    assert two["run"].key == one.key and len(two["run"].train_loss) == len(one.train_loss)
    assert [loss for _, loss in two["run"].train_loss] == pytest.approx(
        [x for _, x in one.train_loss], rel=1e-4
    )
    for name, value in one.load_model().state_dict().items():
        gap = (two["state"][name] - value).abs()
        assert (gap > 1e-4).float().mean() <= 1e-3 and gap.max() <= 1e-3, (name, float(gap.max()))
    assert not (tmp_path / "two" / "students" / one.key / "train").exists()  # checkpoint removed once


def test_log_spaced_validations_and_the_corpus_use(teacher_dir, cache):
    """12 steps of 128 tokens, 4 points: steps 12^(i/3) = 1, 2.3, 5.2, 12 -> validations after steps 1, 2, 5, 12
    (the last by the trainer), beside the untrained student's at 0."""
    r = run(teacher_dir, eval_points=4)
    assert [e["tokens"] for e in r.evals] == [0, 128, 256, 640, 1536]
    assert r.settings["eval_points"] == 4 and r.key != run(teacher_dir).key
    assert set(r.corpus) == set(LANGS) and all(u["passes"] > 0 for u in r.corpus.values())
    assert sum(u["tokens"] for u in r.corpus.values()) == 12 * 4 * 31  # 31 text tokens a row (BOS excluded)


def test_a_student_carried_as_its_record_is_read_not_trained(teacher_dir, cache, tmp_path, monkeypatch):
    """On another machine, a student packed by hybridlib.carry returns the same run and held-out scores without
    training, and a call that needs its weights fails naming its folder."""
    from hybridlib import carry

    trained = run(teacher_dir, train_tokens=256)
    scores = distill.heldout_scores(trained, 1, "validation", teacher_path=teacher_dir)
    carry.pack(tmp_path / "records.tgz", cache)
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path / "elsewhere"))
    carry.unpack(tmp_path / "records.tgz", tmp_path / "elsewhere")
    forbid_training(monkeypatch)
    carried = run(teacher_dir, train_tokens=256)
    assert carried.key == trained.key and carried.evals == trained.evals
    assert carried.path == str(tmp_path / "elsewhere" / "students" / trained.key)  # where it is now
    again = distill.heldout_scores(carried, 1, "validation", teacher_path=teacher_dir)
    pd.testing.assert_frame_equal(again, scores, check_dtype=False, check_like=True)
    with pytest.raises(FileNotFoundError, match=trained.key):
        carried.load_model()
    with pytest.raises(FileNotFoundError, match=trained.key):  # a score never computed needs the weights
        distill.heldout_scores(carried, 1, "test", teacher_path=teacher_dir)
    assert run(teacher_dir, train_tokens=256, train=False).key == trained.key  # found, never trained
    with pytest.raises(
        FileNotFoundError, match=r"student standard_periodic \(gdn, 512 tokens, data_seed=0, "
    ):
        run(teacher_dir, train_tokens=512, train=False)  # not here: an error naming it, not a training run
    others = [
        p for p in (tmp_path / "elsewhere" / "students").iterdir() if p.is_dir() and p.name != trained.key
    ]
    assert not [f for p in others for f in p.iterdir()]  # nothing written for it
