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
from hybridlib.findings.layout.distill import teacher_identity
from hybridlib.memo import memoized
from hybridlib.models import ModelCard, encode
from hybridlib.train import TrainConfig, causal_lm_loss, train


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
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train each of ``kinds`` on MQAR at ``lengths[0]`` with every ``pairs`` count mixed, once per seed (model
    initialisation and data order), evaluate on every (length, pairs); seeds after the first train only
    ``replicate_kinds`` (None: all ``kinds``). Returns (accuracy rows seed, kind, seq_len, n_pairs, accuracy; loss
    curves seed, kind, step, loss). Each (kind, seed) result is memoized by every argument, so a killed run resumes
    with the next one."""
    plan = [
        (seed, kind)
        for i, seed in enumerate(seeds)
        for kind in kinds
        if i == 0 or replicate_kinds is None or kind in replicate_kinds
    ]
    results = [
        memoized(
            "mqar",
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
            },
            partial(
                _mqar_kind, kind, vocab, pairs, lengths, width, steps, batch, lr, seed, device, eval_examples
            ),
        )
        for seed, kind in plan
    ]
    results = [(a.assign(seed=seed), c.assign(seed=seed)) for (seed, _), (a, c) in zip(plan, results)]
    return (
        pd.concat([a for a, _ in results], ignore_index=True),
        pd.concat([c for _, c in results], ignore_index=True),
    )


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


def mqar_replicates(params: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The chapter's MQAR runs after the first seed (``params``: the efficiency chapter's resolved parameters):
    :data:`~hybridlib.findings.efficiency.report.MQAR_REPLICATED` for seeds ``seed + 1 ... seed + mqar_seeds - 1``,
    memoized under the keys the notebook's :func:`mqar_experiment` call looks up."""
    seeds = list(range(params["seed"] + 1, params["seed"] + params["mqar_seeds"]))
    if not seeds:
        raise ValueError(f"mqar_seeds={params['mqar_seeds']}: no replicate seed after the first to train")
    return mqar_experiment(
        params["mqar_vocab"],
        params["mqar_pairs"],
        params["mqar_lengths"],
        params["mqar_width"],
        params["mqar_steps"],
        params["mqar_batch"],
        params["mqar_lr"],
        seeds,
        params["device"],
        kinds=MQAR_REPLICATED,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m hybridlib.findings.efficiency.runs mqar-replicates --preset gpu``: train the MQAR replicate
    seeds ahead of (or beside, on another GPU) the notebook, which then finds them memoized."""
    parser = argparse.ArgumentParser(
        prog="python -m hybridlib.findings.efficiency.runs", description=main.__doc__
    )
    parser.add_argument("command", choices=("mqar-replicates",))
    parser.add_argument("--preset", required=True, choices=("seminar", "gpu", "paper"))
    args = parser.parse_args(argv)
    accuracy, _ = mqar_replicates(chapter("efficiency").resolve(args.preset))
    print(accuracy.groupby(["kind", "seed"])["accuracy"].mean().round(3).to_string(), flush=True)


if __name__ == "__main__":
    main()
