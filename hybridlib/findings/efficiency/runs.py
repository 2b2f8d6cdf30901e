"""The chapter's two retrieval experiments end to end: needle-in-a-haystack on a pretrained model and MQAR
training of the three tiny stacks."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from functools import partial
from typing import Any

import pandas as pd
import torch

from hybridlib.data import encode_batch, load_udhr
from hybridlib.findings import chapter
from hybridlib.findings.efficiency.models import KINDS, tiny_lm
from hybridlib.findings.efficiency.mqar import MQARBatches, MQARTask, accuracy_grid
from hybridlib.findings.efficiency.needle import make_samples, score, split_units
from hybridlib.findings.efficiency.report import MQAR_REPLICATED
from hybridlib.memo import memoized
from hybridlib.models import ModelCard, encode
from hybridlib.models.identity import teacher_identity
from hybridlib.train import TrainConfig, causal_lm_loss, train
from hybridlib.train.distributed import spawn_pool


def udhr_units(languages: Sequence[str]) -> dict[str, list[str]]:
    """UDHR sentences per language (articles 1-30 in order), the haystack material."""
    frame = load_udhr(list(languages)).to_pandas().sort_values(["lang", "article"])
    return {lang: split_units(frame.loc[frame["lang"] == lang, "text"].tolist()) for lang in languages}


def needle_accuracy(
    model: torch.nn.Module,
    tokenizer: Any,
    card: ModelCard,
    languages: Sequence[str],
    lengths: Sequence[int],
    depths: Sequence[float],
    n_per_cell: int,
    seed: int,
) -> pd.DataFrame:
    """Score needle prompts (UDHR haystacks) with ``model``; one row per prompt (see ``needle.score``).
    Memoized (``hybridlib.memo``) by the weight files the model was loaded from, its device and dtype, and every
    argument."""
    prompt_ids = lambda text: encode(tokenizer, text, card)
    answer_ids = lambda text: encode_batch(tokenizer, [text])[0]
    weights = next(model.parameters())
    settings = {
        "model": teacher_identity(model),
        "device": weights.device.type,
        "dtype": str(weights.dtype),
        "card": card.name,
        "languages": list(languages),
        "lengths": list(lengths),
        "depths": list(depths),
        "n_per_cell": n_per_cell,
        "seed": seed,
    }
    return memoized(
        "needle",
        settings,
        lambda: score(
            model,
            prompt_ids,
            answer_ids,
            make_samples(udhr_units(languages), prompt_ids, lengths, depths, n_per_cell, seed),
        ),
    )


def mqar_experiment(
    vocab: int,
    pairs: Sequence[int],
    lengths: Sequence[int],
    width: int,
    steps: int,
    batch: int,
    lr: float,
    seeds: Sequence[int],
    device: str = "cpu",
    kinds: Sequence[str] = KINDS,
    eval_examples: int = 128,
    replicate_kinds: Sequence[str] | None = None,
    workers: int = 1,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train each of ``kinds`` on MQAR at ``lengths[0]`` with every ``pairs`` count mixed, once per seed (model
    initialisation and data order), evaluate on every (length, pairs); seeds after the first train only
    ``replicate_kinds`` (None: all ``kinds``). Returns (accuracy rows seed, kind, seq_len, n_pairs, accuracy; loss
    curves seed, kind, step, loss). Each (kind, seed) result is memoized by every argument, so a killed run resumes
    with the next one. ``workers > 1`` trains up to that many (kind, seed) runs at once in spawned processes on
    ``device`` (the tiny models leave an H200 mostly idle: launching kernels bounds their steps), each with this
    process's CPU threads divided among them; the results and memo entries are those of ``workers=1``."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    plan = [
        (seed, kind)
        for i, seed in enumerate(seeds)
        for kind in kinds
        if i == 0 or replicate_kinds is None or kind in replicate_kinds
    ]
    settings = [
        {
            "vocab": vocab,
            "pairs": list(pairs),
            "lengths": list(lengths),
            "width": width,
            "steps": steps,
            "batch": batch,
            "lr": lr,
            "seed": seed,
            "device": device,
            "kind": kind,
            "eval_examples": eval_examples,
        }
        for seed, kind in plan
    ]
    if workers == 1 or len(plan) == 1:
        results = [_memoized_kind(s) for s in settings]
    else:
        with spawn_pool(min(workers, len(plan))) as pool:
            results = list(pool.map(_memoized_kind, settings))
    results = [(a.assign(seed=seed), c.assign(seed=seed)) for (seed, _), (a, c) in zip(plan, results)]
    return (
        pd.concat([a for a, _ in results], ignore_index=True),
        pd.concat([c for _, c in results], ignore_index=True),
    )


def _memoized_kind(settings: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`_mqar_kind` of ``settings`` (its keyword arguments), memoized under them."""
    return memoized("mqar", settings, partial(_mqar_kind, **settings))


def _mqar_kind(
    kind: str,
    vocab: int,
    pairs: Sequence[int],
    lengths: Sequence[int],
    width: int,
    steps: int,
    batch: int,
    lr: float,
    seed: int,
    device: str,
    eval_examples: int,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One stack of :func:`mqar_experiment`: (accuracy grid, loss curve)."""
    tasks = [MQARTask(vocab, lengths[0], n) for n in pairs]
    model = tiny_lm(kind, vocab, hidden_size=width, max_len=max(lengths), seed=seed).to(device)
    config = TrainConfig(
        batch_size=batch,
        seq_len=lengths[0],
        steps=steps,
        lrs={"rest": lr},
        warmup_frac=0.05,
        min_lr=lr / 10,
        seed=seed,
    )
    history = train(model, MQARBatches(tasks, batch, steps, seed), causal_lm_loss, config)
    accuracy = accuracy_grid(model, vocab, lengths, pairs, eval_examples).assign(kind=kind)
    curve = pd.DataFrame([{"kind": kind, "step": r["step"], "loss": r["loss"]} for r in history.train])
    return accuracy, curve


def mqar_runs(
    params: dict[str, Any], replicates_only: bool = False, workers: int | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The chapter's MQAR runs (``params``: the efficiency chapter's resolved parameters) through
    :func:`mqar_experiment`: every stack at ``seed`` and the judged stacks
    (:data:`~hybridlib.findings.efficiency.report.MQAR_REPLICATED`) at ``seed + 1 ... seed + mqar_seeds - 1``, or
    (``replicates_only``) just the latter, memoized under the same keys; ``workers`` defaults to ``mqar_workers``."""
    seeds = list(range(params["seed"], params["seed"] + params["mqar_seeds"]))
    if replicates_only and len(seeds) == 1:
        raise ValueError(f"mqar_seeds={params['mqar_seeds']}: no replicate seed after the first to train")
    return mqar_experiment(
        params["mqar_vocab"],
        params["mqar_pairs"],
        params["mqar_lengths"],
        params["mqar_width"],
        params["mqar_steps"],
        params["mqar_batch"],
        params["mqar_lr"],
        seeds[1:] if replicates_only else seeds,
        params["device"],
        kinds=MQAR_REPLICATED if replicates_only else KINDS,
        replicate_kinds=None if replicates_only else MQAR_REPLICATED,
        workers=params["mqar_workers"] if workers is None else workers,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m hybridlib.findings.efficiency.runs mqar|mqar-replicates --preset gpu [--workers N]``: train the
    chapter's MQAR runs (all, or the replicate seeds) ahead of (or beside, on another GPU) the notebook, which then
    finds them memoized."""
    parser = argparse.ArgumentParser(
        prog="python -m hybridlib.findings.efficiency.runs", description=main.__doc__
    )
    parser.add_argument("command", choices=("mqar", "mqar-replicates"))
    parser.add_argument("--preset", required=True, choices=("seminar", "gpu", "paper"))
    parser.add_argument("--workers", type=int, help="trainings at once (default: the preset's mqar_workers)")
    args = parser.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        parser.error(f"--workers must be >= 1, got {args.workers}")
    params = chapter("efficiency").resolve(args.preset)
    accuracy, _ = mqar_runs(params, args.command == "mqar-replicates", args.workers)
    print(accuracy.groupby(["kind", "seed"])["accuracy"].mean().round(3).to_string(), flush=True)


if __name__ == "__main__":
    main()
