"""``tiny-teacher``: a few-million-parameter multilingual Qwen3 trained here on the Bible corpus, for the
``seminar`` CPU preset.

A byte-level BPE tokenizer (``tokenizers``) is trained on training-split chapters of every corpus
language; the model is trained with ``hybridlib.train`` on ``training_corpus`` (30% English anchor).
Everything is cached under ``cache_dir("models", "tiny-teacher", <hash of TinySpec>)`` and trained once by
``python -m hybridlib.prepare`` (:func:`hybridlib.prepare.train_tiny_teacher`; this module only builds and loads);
the folder holds a normal ``save_pretrained`` model + tokenizer and ``report.json`` (validation loss per
language, CPU seconds per 1M training tokens).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from hybridlib.data.corpus import heldout_documents, iter_documents
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


def teacher_folder(spec: TinySpec = TinySpec()) -> Path:
    """Folder of the trained teacher for ``spec``; a clear error naming the command that trains it if absent."""
    target = cache_dir("models", "tiny-teacher") / spec.key()
    if not (target / "report.json").is_file():
        raise FileNotFoundError(
            f"the tiny teacher is not trained yet (no {target}); run `python -m hybridlib.prepare` "
            "(or `make data`) once"
        )
    return target


def report(spec: TinySpec = TinySpec()) -> dict[str, Any]:
    """The training report (``report.json``) of the teacher for ``spec``."""
    return json.loads((teacher_folder(spec) / "report.json").read_text(encoding="utf-8"))
