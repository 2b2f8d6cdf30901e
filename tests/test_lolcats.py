"""LoLCATs: linearised attention, attention transfer, LoRA, passkey and cloze evaluations (tiny random models)."""

import math
from dataclasses import replace

import pytest
import torch
from tiny_models import tiny_causal_lm

from hybridlib.findings.lolcats.ablation import Budget, Evaluation, ablation, adapted, converted, transferred
from hybridlib.findings.lolcats.evals import (
    ClozeItem,
    cloze_accuracy,
    cloze_hits,
    cloze_items,
    perplexity,
    sequence_nll,
)
from hybridlib.findings.lolcats.linearize import (
    alternate_layers,
    attention_parameters,
    linearize,
    linearized_modules,
)
from hybridlib.findings.lolcats.lora import lora_finetune
from hybridlib.findings.lolcats.passkey import passkey_item
from hybridlib.findings.lolcats.throughput import (
    cache_nbytes,
    decode,
    decode_steps,
    generation_throughput,
    prefill,
    throughput_comparison,
)
from hybridlib.findings.lolcats.transfer import (
    attention_transfer,
    layer_mse,
    layer_window_share,
    mse_by_layer,
)
from hybridlib.models.linearized import LinearizedAttention
from hybridlib.train import PackedBatches, TrainConfig


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run fastest on one thread (and do not fight other processes for cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


SMALL = {
    "vocab_size": 97,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 256,
}


def _model(kind: str, attn: str = "eager", init: float = 0.02):
    gemma = {"query_pre_attn_scalar": 24, "sliding_window": 512} if kind == "gemma3" else {}
    model = tiny_causal_lm(kind, **SMALL, initializer_range=init, attn_implementation=attn, **gemma)
    if kind == "gemma3":
        with torch.no_grad():  # non-trivial q/k norm gains, so a missing norm would show
            for layer in model.model.layers:
                layer.self_attn.q_norm.weight.normal_(0, 0.5)
                layer.self_attn.k_norm.weight.normal_(0, 0.5)
    return model


@pytest.mark.parametrize(
    "kind,attn", [("llama", "eager"), ("llama", "sdpa"), ("qwen3", "sdpa"), ("gemma3", "eager")]
)
@pytest.mark.parametrize("feature_map", ["hedgehog", "t2r"])
def test_window_covering_the_sequence_reproduces_the_teachers_softmax_attention(kind, attn, feature_map):
    teacher = _model(kind, attn, init=0.2)
    ids = torch.randint(97, (2, 24))
    student = linearize(teacher, feature_map=feature_map, window=24)
    layer = student.model.layers[1].self_attn
    assert isinstance(layer, LinearizedAttention)
    h = torch.randn(2, 24, 64)
    rope_kw = {"layer_type": teacher.config.layer_types[1]} if kind == "gemma3" else {}
    pe = teacher.model.rotary_emb(h, torch.arange(24)[None], **rope_kw)
    mask = torch.full((24, 24), float("-inf")).triu(1)[None, None]
    expected = teacher.model.layers[1].self_attn(h, position_embeddings=pe, attention_mask=mask)[0]
    got = layer(h, position_embeddings=pe, attention_mask=mask)[0]
    torch.testing.assert_close(got, expected, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(
        student(input_ids=ids).logits, teacher(input_ids=ids).logits, atol=2e-4, rtol=1e-4
    )
    # a window shorter than the sequence is not softmax attention any more
    short = linearize(teacher, feature_map=feature_map, window=4)
    assert (short(input_ids=ids).logits - teacher(input_ids=ids).logits).abs().max() > 1e-3


def test_conversion_variants_and_bad_input():
    teacher = _model("llama")
    hybrid = linearize(teacher, feature_map="t2r", softmax_layers=alternate_layers(2))
    assert [type(layer.self_attn).__name__ for layer in hybrid.model.layers] == [
        "LlamaAttention",
        "LinearizedAttention",
    ]
    assert alternate_layers(5) == (0, 2, 4)
    trainable = {
        n for n, p in linearize(teacher, window=8, terraced=True).named_parameters() if p.requires_grad
    }
    assert trainable == set(attention_parameters(linearize(teacher, window=8)))
    assert trainable and all("phi_" in n or "window_factors" in n for n in trainable)
    with pytest.raises(ValueError, match="feature_map='elu'"):
        linearize(teacher, feature_map="elu")
    with pytest.raises(ValueError, match="window must be"):
        linearize(teacher, window=-1)
    with pytest.raises(ValueError, match="terraced=True needs a window"):
        linearize(teacher, terraced=True)
    with pytest.raises(ValueError, match="softmax_layers"):
        linearize(teacher, softmax_layers=(7,))


def test_window_share_is_one_inside_the_window_and_zero_without_one():
    teacher = _model("llama", init=0.2)
    ids = torch.randint(97, (2, 24))
    assert layer_window_share(linearize(teacher, window=24), ids).tolist() == [1.0, 1.0]
    assert layer_window_share(linearize(teacher, window=0), ids).tolist() == [0.0, 0.0]
    partial = layer_window_share(linearize(teacher, feature_map="t2r", window=4), ids)
    assert ((partial > 0) & (partial < 1)).all()


@pytest.mark.parametrize("window,terraced", [(0, False), (8, False), (8, True)])
def test_cached_decoding_matches_full_recomputation(window, terraced):
    student = linearize(_model("llama", init=0.2), window=window, terraced=terraced)
    ids = torch.randint(97, (2, 19))
    out = decode(student, ids, 6)
    full = ids
    for _ in range(6):
        full = torch.cat([full, student(input_ids=full).logits[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(out, full[:, 19:])


def test_cache_bytes_grow_per_token_for_softmax_and_stay_constant_for_window_linear():
    teacher = _model("llama")
    student = linearize(teacher, window=8)
    ids = torch.randint(97, (2, 19))
    for n in (3, 9):
        t_cache, _ = prefill(teacher, torch.cat([ids, ids[:, :n]], 1))
        s_cache, _ = prefill(student, torch.cat([ids, ids[:, :n]], 1))
        # fp32 keys and values: 2 layers x 2 sequences x 2 KV heads x (19 + n) tokens x 16 dims x 2 (k, v) x 4 bytes
        assert cache_nbytes(t_cache) == 2 * 2 * 2 * (19 + n) * 16 * 2 * 4
        # per layer and sequence, fp32, K/V repeated to the 4 query heads: the 7 tokens still in the next query's
        # window (k 16 + v 16 + Hedgehog features 2 x 8 dims each) + the linear state (16 x 16 kv + 16 z)
        assert cache_nbytes(s_cache) == 2 * 2 * 4 * (7 * (16 + 16 + 16) + 16 * 16 + 16) * 4


@pytest.mark.parametrize("window", [0, 8])
def test_chunked_prefill_gives_the_same_logits_and_cache(window):
    teacher = _model("llama", init=0.2)
    ids = torch.randint(97, (2, 21))
    for model in (teacher, linearize(teacher, window=window)):
        whole_cache, whole = prefill(model, ids)
        chunked_cache, chunked = prefill(model, ids, chunk=5)  # 5 + 5 + 5 + 5 + 1 tokens
        torch.testing.assert_close(chunked, whole, atol=1e-5, rtol=1e-5)
        assert cache_nbytes(chunked_cache) == cache_nbytes(whole_cache)
        assert torch.equal(
            decode_steps(model, chunked_cache, chunked, 4), decode_steps(model, whole_cache, whole, 4)
        )
    with pytest.raises(ValueError, match="chunk must be a positive int"):
        prefill(teacher, ids, chunk=0)


class _RunsOutOfMemory(torch.nn.Module):
    """A model that runs out of memory once a batch holds ``limit`` or more sequences in ``phase``."""

    def __init__(self, model, limit: int, phase: str):
        super().__init__()
        self.model, self.limit, self.phase, self.config = model, limit, phase, model.config

    def forward(self, input_ids, cache=None, **kw):
        if input_ids.shape[0] >= self.limit and (input_ids.shape[1] == 1) == (self.phase == "decode"):
            raise torch.OutOfMemoryError("simulated")
        return self.model(input_ids=input_ids, cache=cache, **kw)


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_generation_throughput_separates_phases_and_records_oom_without_numbers(phase):
    teacher = _model("llama")
    rows = generation_throughput(
        _RunsOutOfMemory(teacher, 3, phase), [1, 2, 4], prompt_len=12, new_tokens=5, prefill_chunk=5
    )
    ok, oom = rows[:2], rows[2]
    for row in ok:
        assert (
            row["status"] == "ok" and row["oom_in"] is None and row["prefill_peak_gib"] is None
        )  # CPU: no peak
        assert row["tokens_per_s"] == pytest.approx(row["batch"] * 5 / row["decode_s"])
        assert (
            row["cache_gib"] * 2**30 == 2 * row["batch"] * 2 * (12 + 5) * 16 * 2 * 4
        )  # as in the test above
    assert oom["status"] == "oom" and oom["oom_in"] == phase
    assert "tokens_per_s" not in oom and "cache_gib" not in oom
    assert ("prefill_s" in oom) == (phase == "decode")


def _rows(points):
    """generation_throughput-like rows from {batch: (tokens_per_s, cache_gib) or "prefill"/"decode" (OOM phase)}."""
    return [
        {"batch": b, "status": "oom", "oom_in": v}
        if isinstance(v, str)
        else {
            "batch": b,
            "status": "ok",
            "oom_in": None,
            "tokens_per_s": v[0],
            "cache_gib": v[1],
            "prompt_len": 24,
            "new_tokens": 8,
        }
        for b, v in points.items()
    ]


def test_throughput_comparison_uses_the_largest_batch_both_decoded():
    softmax = _rows({1: (10.0, 1.0), 64: (500.0, 8.0), 256: "decode"})
    faster = _rows({1: (8.0, 0.5), 64: (1500.0, 2.0), 256: (4000.0, 8.0)})
    got = throughput_comparison(softmax, faster)
    assert (got["batch"], got["speedup"], got["cache_ratio"]) == (64, 3.0, 4.0)
    assert got["softmax_oom"] == [(256, "decode")] and got["linear_oom"] == []
    # per sequence at batch 64: 8/64 GiB softmax over 24 + 8 tokens, 2/64 GiB linear -> 32 / 4 = 8 tokens
    assert got["softmax_cache_per_seq"] == 2**27 and got["linear_cache_per_seq"] == 2**25
    assert got["break_even_tokens"] == 8
    assert got["memory_win"]  # the softmax model ran out at 256, which the linear one decoded
    slower_everywhere = _rows({1: (5.0, 0.5), 64: (250.0, 2.0), 256: "prefill"})
    got = throughput_comparison(softmax, slower_everywhere)
    assert got["speedup"] == 0.5 and not got["memory_win"]  # both ran out at 256
    no_oom = _rows({1: (10.0, 1.0), 64: (500.0, 8.0), 256: (900.0, 30.0)})
    assert not throughput_comparison(no_oom, faster)["memory_win"]
    nothing = throughput_comparison(_rows({1: "prefill"}), faster)
    assert nothing["batch"] is None and nothing["speedup"] != nothing["speedup"]  # NaN: no common batch


@pytest.mark.parametrize("feature_map", ["hedgehog", "t2r"])
def test_attention_transfer_lowers_every_layers_mse_teacher_forced(feature_map):
    teacher = _model("llama", init=0.1)  # sharper attention than the default init: untrained maps are off
    torch.manual_seed(1)
    rows = torch.randint(97, (64, 32))
    student = linearize(teacher, feature_map=feature_map)
    held = [rows[:8]]
    before = mse_by_layer(student, held)
    attention_transfer(
        student,
        PackedBatches(rows[8:], 8),
        TrainConfig(batch_size=8, seq_len=32, steps=60, lrs={"rest": 3e-2}, warmup_frac=0.0, progress=False),
    )
    after = mse_by_layer(student, held)
    # measured: hedgehog after/before ~0.66 / 0.71, t2r ~0.42 / 0.35 (two layers)
    assert len(before) == 2 and all(a < 0.8 * b for a, b in zip(after, before)), (before, after)
    # teacher forcing: layer 1's error does not depend on layer 0's feature maps
    ref = layer_mse(student, rows[:4])[1]
    with torch.no_grad():
        linearized_modules(student)[0].phi_q.weight.mul_(5.0)
    assert layer_mse(student, rows[:4])[1] == ref
    assert all(not p.requires_grad for p in student.parameters())


def test_lora_trains_only_adapters():
    student = linearize(_model("llama"), feature_map="hedgehog", window=8)
    frozen = {n: p.detach().clone() for n, p in student.named_parameters()}
    rows = torch.randint(97, (16, 32))
    peft_model, history = lora_finetune(
        student,
        PackedBatches(rows, 8),
        TrainConfig(batch_size=8, seq_len=32, steps=3, lrs={"rest": 1e-2}, warmup_frac=0.0, progress=False),
    )
    assert len(history.train) == 3
    named = dict(peft_model.named_parameters())
    trainable = {n for n, p in named.items() if p.requires_grad}
    assert trainable and all(".lora_" in n for n in trainable)
    assert {n.split(".")[-4] for n in trainable} == {"q_proj", "k_proj", "v_proj", "o_proj"}
    for name, value in frozen.items():  # base weights and feature maps unchanged (peft renames base layers)
        match = [p for n, p in named.items() if n.replace(".base_layer", "").endswith(name)]
        assert len(match) == 1 and torch.equal(match[0], value), name
    assert any(not torch.all(named[n] == 0) for n in trainable if "lora_B" in n)  # B starts at 0 and moved
    peft_model.train()
    peft_model(input_ids=rows[:2]).logits.sum().backward()
    assert {n for n, p in named.items() if p.grad is not None} <= trainable


class CharTokenizer:
    """Characters as ids: enough for building passkey and cloze items."""

    eos_token_id = 0

    def encode(self, text: str) -> list[int]:
        return [1 + ord(c) % 250 for c in text]


@pytest.mark.parametrize("depth", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_passkey_generator_places_the_key_at_the_requested_depth(depth):
    tok = CharTokenizer()
    item = passkey_item(tok, length=1500, depth=depth, key="71432", start=[5])
    assert len(item.prompt) + len(item.answer) <= 1500 and item.prompt[0] == 5
    text = "".join(chr(i - 1) for i in item.prompt[1:])
    needle = " The pass key is 71432."
    assert text.count(needle) == 1 and item.answer == tok.encode(" 71432")
    first, end = item.filler_span
    filler_len = end - first - len(tok.encode(" The pass key is 71432. Remember it. 71432 is the pass key."))
    where = (item.needle_start - first) / filler_len
    sentence = (
        max(len(tok.encode(s)) for s in [" The grass is green.", " There and back again."]) / filler_len
    )
    assert abs(where - depth) <= sentence
    assert text.index(needle) + 1 == item.needle_start
    with pytest.raises(ValueError, match="depth"):
        passkey_item(tok, length=1500, depth=1.5, key="1")


class Oracle(torch.nn.Module):
    """Predicts, at each position, the next token of the true sequence sharing the row's longest prefix."""

    def __init__(self, truths):
        super().__init__()
        self.truths = truths
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids):
        logits = torch.zeros(*input_ids.shape, 256)
        for b, row in enumerate(input_ids.tolist()):
            truth = max(
                self.truths,
                key=lambda t: next(
                    (i for i, (a, b) in enumerate(zip(row, t)) if a != b), min(len(row), len(t))
                ),
            )
            for i in range(min(len(row), len(truth)) - 1):
                logits[b, i, truth[i + 1]] = 20.0
        return type("Out", (), {"logits": logits})


def test_cloze_with_the_answer_given_scores_100_percent():
    items = cloze_items(CharTokenizer(), languages=["eng", "fra"], per_language=6, seed=1)
    assert len(items) == 12 and {i.answer for i in items} != {items[0].answer}  # answer position varies
    truths = [item.context + item.choices[item.answer] for item in items]
    assert cloze_accuracy(Oracle(truths), items) == 1.0
    wrong = [item.context + item.choices[(item.answer + 1) % 4] for item in items]
    assert cloze_accuracy(Oracle(wrong), items) == 0.0


class Uniform(torch.nn.Module):
    """Equal logits over ``vocab`` tokens: every next-token cross-entropy is ln(vocab)."""

    def __init__(self, vocab: int):
        super().__init__()
        self.vocab, self.dummy = vocab, torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids):
        return type("Out", (), {"logits": torch.zeros(*input_ids.shape, self.vocab)})


def test_sequence_nll_is_per_sequence_and_perplexity_its_exponentiated_mean():
    nll = sequence_nll(Uniform(97), torch.randint(97, (5, 12)), batch_size=2)
    assert nll == pytest.approx([math.log(97)] * 5)
    assert perplexity(Uniform(97), torch.randint(97, (3, 12))) == pytest.approx(97)
    items = cloze_items(CharTokenizer(), languages=["eng"], per_language=6, seed=1)
    truths = [item.context + item.choices[item.answer] for item in items]
    assert cloze_hits(Oracle(truths), items) == [True] * 6


def test_lora_only_is_step_matched_by_default():
    budget = Budget(transfer_steps=20, lora_steps=30, batch_size=4, seq_len=32)
    assert (budget.lora_only_steps, budget.lora_lr) == (50, 1e-4)  # the paper's protocol and learning rate
    assert (
        Budget(transfer_steps=20, lora_steps=30, batch_size=4, seq_len=32, step_matched=False).lora_only_steps
        == 30
    )


def test_ablation_rows_carry_steps_and_per_document_scores_and_the_seed_fixes_the_adapters():
    teacher = _model("llama", init=0.1)
    rows = torch.randint(97, (32, 16))
    budget = Budget(transfer_steps=2, lora_steps=1, batch_size=4, seq_len=16, lora_lr=1e-3, seed=3)
    items = [
        ClozeItem(i.lang, [c % 97 for c in i.context], [[c % 97 for c in ch] for ch in i.choices], i.answer)
        for i in cloze_items(CharTokenizer(), languages=["eng"], per_language=4, seed=0)
    ]  # ids in the vocab
    evaluation = Evaluation(rows[:3], items)
    got, extras = ablation(
        teacher, PackedBatches(rows[3:], 4, seed=3), evaluation, budget, feature_map="hedgehog"
    )
    steps = {r["stage"]: (r["transfer_steps"], r["lora_steps"]) for r in got}
    assert steps == {"swap": (0, 0), "transfer": (2, 0), "lora": (0, 3), "transfer+lora": (2, 1)}
    assert all(len(r["nll"]) == 3 and len(r["hits"]) == 4 for r in got)
    assert all(r["ppl"] == pytest.approx(math.exp(sum(r["nll"]) / 3)) for r in got)
    assert extras["lora_only_loss"] and len(extras["lora_only_loss"]) == 3
    one, _ = converted(
        teacher,
        PackedBatches(rows[3:], 4, seed=3),
        evaluation,
        budget,
        steps=1,
        feature_map="t2r",
        window=4,
        terraced=True,
    )
    assert {
        k: one[k] for k in ("feature_map", "window", "terraced", "stage", "transfer_steps", "lora_steps")
    } == {
        "feature_map": "t2r",
        "window": 4,
        "terraced": True,
        "stage": "transfer+lora",
        "transfer_steps": 1,
        "lora_steps": 1,
    }
    student, _ = transferred(teacher, [], budget, steps=0)
    batches = PackedBatches(rows, 4)
    lora_a = lambda b: next(p for n, p in adapted(student, batches, b)[0].named_parameters() if "lora_A" in n)
    first = lora_a(budget)
    assert torch.equal(first, lora_a(budget)) and not torch.equal(first, lora_a(replace(budget, seed=4)))
