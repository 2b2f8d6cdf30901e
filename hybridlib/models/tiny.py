"""``tiny-teacher``: a few-million-parameter multilingual Qwen3 trained here on the Bible corpus, for the
``seminar`` CPU preset.

A byte-level BPE tokenizer (``tokenizers``) is trained on training-split chapters of every corpus
language; the model is trained with ``hybridlib.train`` on ``training_corpus`` (30% English anchor).
Everything is cached under ``cache_dir("models", "tiny-teacher", <hash of TinySpec>)`` and trained once;
the folder holds a normal ``save_pretrained`` model + tokenizer and ``report.json`` (validation loss per
language, CPU seconds per 1M training tokens).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from hybridlib.atomic import atomic_dir, write_json
from hybridlib.losses import next_token_ce, shift_labels
from hybridlib.paths import cache_dir

BOS_ID = 0  # "<|endoftext|>": starts every sequence and separates documents
_VERSION = 1  # bump when the recipe below changes


@dataclass(frozen=True)
class TinySpec:
    """Everything that determines the trained teacher (its hash names the cache folder)."""

    vocab_size: int = 8192
    tokenizer_chars_per_language: int = 200_000
    hidden_size: int = 128
    n_layers: int = 8
    n_heads: int = 4
    n_kv_heads: int = 2
    intermediate_size: int = 384
    seq_len: int = 128
    batch_size: int = 16
    train_tokens: int = 400_000
    english_share: float = 0.3
    lr: float = 3e-3
    seed: int = 0
    validation_docs_per_language: int = 4
    languages: tuple[str, ...] | None = None

    def key(self) -> str:
        return hashlib.sha256(json.dumps([_VERSION, asdict(self)], sort_keys=True).encode()).hexdigest()[:16]


def train_tokenizer(spec: TinySpec) -> PreTrainedTokenizerFast:
    """Byte-level BPE over the first ``tokenizer_chars_per_language`` characters of each language's
    training chapters; adds no special tokens itself (``encode`` prepends ``BOS_ID``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from hybridlib.data.corpus import iter_documents

    def texts():
        budget: dict[str, int] = defaultdict(int)
        for doc in iter_documents(spec.languages, split="train"):
            if budget[doc.lang] < spec.tokenizer_chars_per_language:
                budget[doc.lang] += len(doc.text)
                yield doc.text

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts(), trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        unk_token=None,
    )


def build_model(spec: TinySpec, vocab_size: int) -> Qwen3ForCausalLM:
    """A randomly initialised Qwen3 (full attention in every layer, tied embeddings)."""
    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        num_hidden_layers=spec.n_layers,
        num_attention_heads=spec.n_heads,
        num_key_value_heads=spec.n_kv_heads,
        head_dim=spec.hidden_size // spec.n_heads,
        intermediate_size=spec.intermediate_size,
        max_position_embeddings=4 * spec.seq_len,
        tie_word_embeddings=True,
        bos_token_id=BOS_ID,
        eos_token_id=BOS_ID,
        pad_token_id=BOS_ID,
    )
    torch.manual_seed(spec.seed)
    return Qwen3ForCausalLM(config)


@torch.no_grad()
def validation_loss(
    model: torch.nn.Module,
    tokenizer: Any,
    *,
    seq_len: int,
    per_language: int,
    languages: tuple[str, ...] | None = None,
) -> dict[str, float]:
    """Mean next-token loss (nats/token) per language on the first ``seq_len`` tokens (BOS included) of
    each of ``per_language`` validation chapters."""
    from hybridlib.data.corpus import heldout_documents

    docs = heldout_documents("validation", languages, per_language=per_language)
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    model.eval()
    for lang, text in zip(docs["lang"], docs["text"]):
        ids = torch.tensor([[BOS_ID, *tokenizer(text, add_special_tokens=False)["input_ids"]][:seq_len]])
        n = ids.shape[1] - 1
        loss = next_token_ce(model(input_ids=ids).logits, shift_labels(ids)).item()
        totals[lang][0] += loss * n
        totals[lang][1] += n
    return {lang: s / n for lang, (s, n) in totals.items()}


def _train_into(folder: Path, spec: TinySpec) -> None:
    from hybridlib.data.corpus import training_corpus
    from hybridlib.train import PackedBatches, TrainConfig, causal_lm_loss, train

    tokenizer = train_tokenizer(spec)
    corpus = training_corpus(
        tokenizer,
        tokens=spec.train_tokens,
        seq_len=spec.seq_len,
        english_share=spec.english_share,
        languages=spec.languages,
        seed=spec.seed,
        bos_token_id=BOS_ID,
        eos_token_id=BOS_ID,
    )
    model = build_model(spec, len(tokenizer))
    config = TrainConfig(
        batch_size=spec.batch_size,
        seq_len=spec.seq_len,
        total_tokens=len(corpus) * spec.seq_len,
        lrs={"rest": spec.lr},
        min_lr=spec.lr / 10,
        weight_decay=0.1,
        seed=spec.seed,
    )
    cpu0, wall0 = time.process_time(), time.perf_counter()
    history = train(
        model, PackedBatches.from_dataset(corpus, spec.batch_size, spec.seed), causal_lm_loss, config
    )
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    tokens = config.total_steps * config.tokens_per_step
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    write_json(
        folder / "report.json",
        {
            "spec": asdict(spec),
            "n_params": sum(p.numel() for p in model.parameters()),
            "train_tokens": tokens,
            "cpu_seconds_per_1M_tokens": cpu / tokens * 1e6,
            "wall_seconds_per_1M_tokens": wall / tokens * 1e6,
            "torch_threads": torch.get_num_threads(),
            "final_train_loss": history.train[-1]["loss"],
            "validation_loss": validation_loss(
                model,
                tokenizer,
                seq_len=spec.seq_len,
                per_language=spec.validation_docs_per_language,
                languages=spec.languages,
            ),
        },
    )


def trained_teacher(spec: TinySpec = TinySpec()) -> Path:
    """Folder of the trained teacher for ``spec``; trains it (a few CPU minutes) on first call."""
    target = cache_dir("models", "tiny-teacher") / spec.key()
    if (target / "report.json").is_file():
        return target
    with atomic_dir(target) as tmp:
        _train_into(tmp, spec)
    return target


def report(spec: TinySpec = TinySpec()) -> dict[str, Any]:
    """The training report (``report.json``) of the teacher for ``spec``."""
    return json.loads((trained_teacher(spec) / "report.json").read_text(encoding="utf-8"))
