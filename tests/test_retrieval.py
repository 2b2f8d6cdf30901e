"""Needle placement and budget, MQAR generator invariants, and oracle models that must score 100%."""

import pandas as pd
import pytest
import torch
from torch import nn

from hybridlib.findings.efficiency.models import fa_layers, tiny_lm
from hybridlib.findings.efficiency.mqar import FILLER, MQARBatches, MQARTask, accuracy, make_batch
from hybridlib.findings.efficiency.needle import NEEDLE, make_sample, make_samples, score, split_units
from hybridlib.findings.efficiency.verdicts import guesses_among_pairs, mqar_gap, needle_gap
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
        assert all(row[p] == FILLER for p in {p + 1 for p in asked} - set(asked))  # a filler follows each query
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


def _needle(eng: list[int], other: list[int], budget: int = 512) -> pd.DataFrame:
    return pd.DataFrame({"lang": ["eng"] * len(eng) + ["yor"] * len(other), "budget": budget,
                         "correct": eng + other})


def test_needle_gap_is_judged_only_when_its_interval_excludes_zero():
    clear = needle_gap(pd.concat([_needle([1] * 40, [0] * 40), _needle([0] * 5, [1] * 5, budget=64)]), 512)
    assert (clear.english, clear.other, clear.gap, clear.n_english, clear.n_other) == (1.0, 0.0, 1.0, 40, 40)
    assert clear.low == clear.high == 1.0 and clear.verdict == "reproduced"  # no resample can differ
    assert needle_gap(_needle([0] * 40, [1] * 40), 512).verdict == "contradicted"
    small = needle_gap(_needle([1] * 7 + [0] * 3, [1] * 96 + [0] * 24), 512)  # 70% vs 80% on 10 English samples
    assert small.gap == pytest.approx(-0.1) and small.low < 0 < small.high
    assert small.verdict == "not reproduced at this scale"
    with pytest.raises(ValueError, match="budget=2048: needs English and non-English"):
        needle_gap(_needle([1], [1]), 2048)


def _mqar(full: list[float], hybrid: list[float]) -> pd.DataFrame:
    lengths = [256, 512, 1024]
    return pd.DataFrame([{"kind": k, "seq_len": t, "n_pairs": 8, "accuracy": a}
                         for k, accs in (("full-attention", full), ("hybrid-3:1", hybrid)) for t, a in zip(lengths, accs)])


def test_mqar_gap_needs_both_stacks_to_have_learned_the_task():
    shrinking = mqar_gap(_mqar([0.9, 0.9, 0.9], [0.6, 0.7, 0.8]))  # hybrid deficit -0.3 -> -0.1
    assert shrinking.gap.round(6).tolist() == [-0.3, -0.2, -0.1] and shrinking.verdict == "reproduced"
    assert mqar_gap(_mqar([0.9, 0.9, 0.9], [0.8, 0.7, 0.6])).verdict == "contradicted"
    untrained = mqar_gap(_mqar([0.31, 0.2, 0.1], [1.0, 1.0, 1.0]))  # the gap grows, but full attention never learned
    assert untrained.trained_accuracy == {"full-attention": 0.31, "hybrid-3:1": 1.0}
    assert not untrained.learned and untrained.verdict == "not reproduced at this scale"
    with pytest.raises(ValueError, match=r"kinds \['hybrid-3:1'\] not in mqar"):
        mqar_gap(_mqar([0.9] * 3, [0.9] * 3).replace({"hybrid-3:1": "gdn"}))


def test_guessing_among_the_context_values_is_recognised_per_pair_count():
    def rows(acc_by_n: dict[int, float]) -> pd.DataFrame:
        return pd.DataFrame([{"n_pairs": n, "seq_len": t, "accuracy": a} for n, a in acc_by_n.items() for t in (256, 512)])

    assert guesses_among_pairs(rows({8: 0.13, 16: 0.06, 32: 0.03}))  # the 1 / n plateau (0.125, 0.0625, 0.031)
    assert not guesses_among_pairs(rows({8: 0.13, 16: 0.20}))  # 16 pairs: 0.20 is beyond 0.0625 +- 0.031
    assert not guesses_among_pairs(rows({8: 1.0, 16: 1.0}))  # recall
    assert not guesses_among_pairs(rows({1: 1.0}))  # one pair cannot tell guessing from recall
    both = pd.concat([rows({8: 0.12, 16: 0.07}).assign(kind="full-attention"),
                      rows({8: 1.0, 16: 1.0}).assign(kind="hybrid-3:1")])
    assert mqar_gap(both).guessing == ("full-attention",)
