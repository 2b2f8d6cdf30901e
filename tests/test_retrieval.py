"""Needle placement and budget, MQAR generator invariants, and oracle models that must score 100%."""

import pytest
import torch
from torch import nn

from hybridlib.findings.efficiency.models import CausalDepthwiseConv, fa_layers, tiny_lm
from hybridlib.findings.efficiency.mqar import FILLER, MQARBatches, MQARTask, accuracy, make_batch
from hybridlib.findings.efficiency.needle import NEEDLE, make_sample, make_samples, score, split_units
from hybridlib.losses import IGNORE_INDEX

SENTENCES = [f"Sentence number {i} of the haystack talks about item {i * 7}." for i in range(40)]


def byte_encode(text: str) -> list[int]:
    """A tokenizer with an exact inverse: a start token (256) then one token per UTF-8 byte."""
    return [256, *text.encode()]


@pytest.mark.parametrize("budget", [400, 700, 3000])
@pytest.mark.parametrize("depth", [0.0, 0.25, 0.5, 1.0])
def test_needle_at_requested_depth_within_budget(budget, depth):
    s = make_sample(SENTENCES, byte_encode, budget, depth, "river", "1234567", "eng", start=3)
    ids = byte_encode(s.prompt)
    assert s.n_tokens == len(ids) <= budget
    assert s.n_tokens >= budget - 2 * max(len(x) for x in SENTENCES)  # filled up to less than one unit or so
    needle = NEEDLE.format(key="river", value="1234567").encode()
    assert bytes(ids[s.needle_token : s.needle_token + len(needle)]) == needle  # needle_token is exact
    assert s.prompt.count("1234567") == 1
    unit = max(len(x) for x in SENTENCES) + 1
    haystack = s.n_tokens - len(byte_encode(s.prompt[s.prompt.index("\n\n") :])) - len(needle)
    assert abs(s.depth - depth) <= unit / max(haystack, 1) + 1e-9
    assert abs((s.needle_token - 1) / haystack - depth) <= unit / haystack + 0.01


def test_needle_cycles_short_text_and_rejects_bad_input():
    s = make_sample(SENTENCES[:2], byte_encode, 2000, 0.5, "river", "1234567")
    assert s.haystack_units > 2 and s.n_tokens <= 2000
    with pytest.raises(ValueError, match="depth"):
        make_sample(SENTENCES, byte_encode, 500, 1.5, "k", "1")
    with pytest.raises(ValueError, match="budget"):
        make_sample(SENTENCES, byte_encode, 50, 0.5, "k", "1")


def test_split_units_handles_scripts_without_spaces():
    units = split_units(["人人生而自由。他们赋有理性。", "First one. Second!", "ก" * 500], max_chars=160)
    assert units[:4] == ["人人生而自由。", "他们赋有理性。", "First one.", "Second!"]
    assert all(len(u) <= 160 for u in units) and "".join(units[4:]) == "ก" * 500


def test_same_draws_across_languages():
    samples = make_samples(
        {"a": SENTENCES, "b": SENTENCES[::-1]}, byte_encode, [300], [0.5], n_per_cell=3, seed=1
    )
    a, b = samples[:3], samples[3:]
    assert [(x.key, x.value) for x in a] == [(x.key, x.value) for x in b]


class NextTokenOracle(nn.Module):
    """Logits that put all mass on the true next input token (it is given the answer); ``wrong`` shifts it."""

    def __init__(self, vocab: int, wrong: bool = False):
        super().__init__()
        self.vocab, self.wrong = vocab, wrong
        self.dummy = nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, logits_to_keep=0):
        nxt = torch.roll(input_ids, -1, dims=1) + int(self.wrong)
        logits = nn.functional.one_hot(nxt % self.vocab, self.vocab).float() * 30
        return type("Out", (), {"logits": logits[:, -logits_to_keep:]})


def test_needle_score_oracle_is_perfect():
    samples = make_samples({"x": SENTENCES}, byte_encode, [300, 600], [0.2, 0.8], seed=0)
    answer = lambda text: list(text.encode())
    good = score(NextTokenOracle(257), byte_encode, answer, samples, progress=False)
    bad = score(NextTokenOracle(257, wrong=True), byte_encode, answer, samples, progress=False)
    assert good["correct"].all() and not bad["correct"].any()
    assert good["answer_logprob"].max() <= 0 and good["answer_logprob"].min() > -1e-3
    assert bad["answer_logprob"].max() < -100  # wrong token has probability ~e^-30 each


@pytest.mark.parametrize("task", [MQARTask(64, 32, 4), MQARTask(64, 40, 8, n_queries=3), MQARTask(16, 30, 7)])
def test_mqar_invariants(task):
    batch = make_batch(task, 50, torch.Generator().manual_seed(0))
    ids, labels = batch["input_ids"], batch["labels"]
    half, n = task.vocab_size // 2, task.n_pairs
    for row, lab in zip(ids.tolist(), labels.tolist()):
        keys, values = row[0 : 2 * n : 2], row[1 : 2 * n : 2]
        assert len(set(keys)) == n and all(1 <= k < half for k in keys)
        assert len(set(values)) == n and all(half <= v < task.vocab_size for v in values)
        asked = [p for p, y in enumerate(lab) if y != IGNORE_INDEX]
        assert len(asked) == task.queries and all(p >= 2 * n for p in asked)
        assert len({row[p] for p in asked}) == len(asked)  # each key asked at most once
        assert all(
            row[p] == FILLER for p in {p + 1 for p in asked} - set(asked)
        )  # a filler follows each query
        for p in asked:  # the answer appears only earlier, right after the same key
            assert values[keys.index(row[p])] == lab[p]
        rest = set(range(2 * n, task.seq_len)) - set(asked)
        assert all(row[p] == FILLER for p in rest)  # no value is ever repeated: no answering by elimination


def test_mqar_batches_reproducible_and_validated():
    batches = MQARBatches([MQARTask(64, 32, 2), MQARTask(64, 32, 4)], 8, steps=5, seed=3)
    assert torch.equal(batches[2]["input_ids"], batches[2]["input_ids"])
    assert not torch.equal(batches[1]["input_ids"], batches[3]["input_ids"])
    with pytest.raises(ValueError, match="seq_len"):
        MQARBatches([MQARTask(64, 32, 2), MQARTask(64, 64, 2)], 8, steps=5)
    with pytest.raises(ValueError, match="seq_len"):
        MQARTask(64, 10, 4)
    with pytest.raises(ValueError, match="n_pairs"):
        MQARTask(8, 64, 4)


class RecallOracle(nn.Module):
    """Reads the key-value pairs from the input and predicts each seen key's value (it is given the answer)."""

    def __init__(self, vocab: int):
        super().__init__()
        self.vocab = vocab
        self.dummy = nn.Parameter(torch.zeros(1))

    def forward(self, input_ids):
        logits = torch.zeros(*input_ids.shape, self.vocab)
        for b, row in enumerate(input_ids.tolist()):
            memory = {}
            for t, tok in enumerate(row):
                if 0 < tok < self.vocab // 2 and tok in memory:
                    logits[b, t, memory[tok]] = 1.0
                if t and 0 < row[t - 1] < self.vocab // 2 and row[t - 1] not in memory:
                    memory[row[t - 1]] = tok
        return type("Out", (), {"logits": logits})


def test_mqar_oracle_scores_100_and_chance_model_does_not():
    batch = make_batch(MQARTask(64, 48, 6), 16, torch.Generator().manual_seed(1))
    assert accuracy(RecallOracle(64), batch) == 1.0
    assert accuracy(NextTokenOracle(64, wrong=True), batch) == 0.0


def test_tiny_lm_layouts():
    assert (
        fa_layers("hybrid-3:1", 8) == (3, 7)
        and fa_layers("gdn", 4) == ()
        and fa_layers("full-attention", 2) == (0, 1)
    )
    hybrid = tiny_lm("hybrid-3:1", 32, hidden_size=16, n_layers=4, n_heads=2)
    kinds = [type(layer.self_attn).__name__ for layer in hybrid.model.layers]
    assert kinds == ["GatedDeltaNetAttention"] * 3 + ["LlamaAttention"]
    out = hybrid(input_ids=torch.randint(0, 32, (2, 12))).logits
    assert out.shape == (2, 12, 32) and torch.isfinite(out).all()
    with pytest.raises(ValueError, match="kind"):
        fa_layers("mamba", 4)


def test_causal_depthwise_conv_by_hand():
    conv = CausalDepthwiseConv(2, 4)
    x = torch.arange(12.0).reshape(1, 6, 2)  # [B=1, T=6, C=2]
    assert torch.equal(conv(x), x)  # identity at initialisation
    with torch.no_grad():
        conv.weight.zero_()
        conv.weight[0, 0] = torch.tensor([1.0, 0.0, 0.0, 0.0])  # channel 0: the token 3 steps back
        conv.weight[1, 0] = torch.tensor([0.0, 0.0, 1.0, 1.0])  # channel 1: previous + current
    y = conv(x)[0]
    assert y[:, 0].tolist() == [0, 0, 0, 0, 2, 4]  # x[:, 0] = 0 2 4 6 8 10, shifted by 3, zeros first
    assert y[:, 1].tolist() == [1, 4, 8, 12, 16, 20]  # x[:, 1] = 1 3 5 7 9 11: 1, 1+3, 3+5, ...


def test_full_attention_with_conv_starts_as_plain_attention_and_stays_causal():
    ids = torch.randint(0, 32, (2, 12), generator=torch.Generator().manual_seed(0))
    plain = tiny_lm("full-attention", 32, hidden_size=16, n_layers=4, n_heads=2, seed=3)
    conv = tiny_lm("full-attention+conv", 32, hidden_size=16, n_layers=4, n_heads=2, seed=3)
    assert fa_layers("full-attention+conv", 4) == (0, 1, 2, 3)
    attn = conv.model.layers[0].self_attn
    assert all(isinstance(getattr(attn, n)[1], CausalDepthwiseConv) for n in ("q_proj", "k_proj", "v_proj"))
    assert attn.q_proj[1].weight.shape == (16, 1, 4)
    assert torch.allclose(conv(input_ids=ids).logits, plain(input_ids=ids).logits, atol=1e-6)
    with torch.no_grad():
        for layer in conv.model.layers:
            for n in ("q_proj", "k_proj", "v_proj"):
                getattr(layer.self_attn, n)[1].weight.normal_()
    changed = ids.clone()
    changed[:, 7] = (changed[:, 7] + 1) % 32
    before, after = conv(input_ids=ids).logits, conv(input_ids=changed).logits
    assert torch.allclose(before[:, :7], after[:, :7], atol=1e-6) and not torch.allclose(
        before[:, 7:], after[:, 7:]
    )
