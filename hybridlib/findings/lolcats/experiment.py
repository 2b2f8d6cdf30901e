"""The chapter's runs: every arm of one replicate (a model and a seed), and replicates in parallel processes.

A replicate is independent of every other (its seed draws the data order and the adapters' initial weights),
so :func:`replicates` runs them at once, each in its own process, on the lent devices in turn: conversions of
models this small are bound by the host (Python, kernel launches), so several processes share one GPU well.

Arms of the first model of ``P["models"]`` (the *main* model): Table 2 (linear only) and Table 5 (window +
linear) ablations for every feature map, Table 2 again at each further LoRA learning rate, the Table 18
window sweep, the Table 23 transfer-step sweep and the Table 21 passkey conversions. Further models: the
window + linear ablation for every feature map. ``P`` is the chapter's resolved parameters.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch

from hybridlib.data.corpus import training_corpus
from hybridlib.findings.lolcats import evals
from hybridlib.findings.lolcats.ablation import Budget, Evaluation, ablation, converted
from hybridlib.findings.lolcats.passkey import PasskeyItem, passkey_hits, passkey_items, passkey_training_rows
from hybridlib.models import describe, encode, load, load_tokenizer
from hybridlib.train import PackedBatches

Params = Mapping[str, Any]


@dataclass
class Data:
    """One teacher's inputs: training rows [N, seq_len] (held-out chapters never enter them), the evaluation
    sets, passkey conversion rows [N, seq_len] and passkey test items."""

    train_rows: torch.Tensor
    evaluation: Evaluation
    passkey_rows: torch.Tensor
    passkey_items: list[PasskeyItem]


def data(name: str, P: Params) -> Data:
    """:class:`Data` of model ``name`` (the corpus is built and cached on the first call)."""
    tok = load_tokenizer(name)
    start = encode(tok, "", describe(name))
    n_seq = (P["transfer_steps"] + P["lora_steps"]) * P[
        "batch_size"
    ]  # step-matched LoRA-only sees no repeats
    corpus = training_corpus(
        tok,
        tokens=n_seq * P["seq_len"],
        seq_len=P["seq_len"],
        languages=P["languages"],
        english_share=0.3,
        seed=P["seed"],
        bos_token_id=start[0] if start else None,
    )
    held = evals.heldout_sequences(
        tok, seq_len=P["seq_len"], per_language=P["eval_sequences"], languages=P["languages"], start=start
    )
    items = evals.cloze_items(
        tok, languages=P["languages"], per_language=P["cloze_items"], start=start, seed=P["seed"]
    )
    evaluation = Evaluation(held, items, mse_batches=[held[0 :: len(P["languages"])][:4]])
    return Data(
        torch.tensor(corpus["input_ids"], dtype=torch.long),
        evaluation,
        passkey_training_rows(tok, n=n_seq, seq_len=P["seq_len"], start=start, seed=P["seed"]),
        passkey_items(
            tok,
            lengths=P["passkey_lengths"],
            depths=P["passkey_depths"],
            per_cell=P["passkey_per_cell"],
            start=start,
            seed=P["seed"] + 1,
        ),
    )


def budget(P: Params, seed: int, device: str, lora_lr: float | None = None) -> Budget:
    """The conversion budget of replicate ``seed`` (bf16 autocast on CUDA, float32 on CPU)."""
    return Budget(
        transfer_steps=P["transfer_steps"],
        lora_steps=P["lora_steps"],
        batch_size=P["batch_size"],
        seq_len=P["seq_len"],
        lora_lr=P["lora_lr"] if lora_lr is None else lora_lr,
        step_matched=P["step_matched"],
        precision="bf16" if device.startswith("cuda") else "fp32",
        seed=seed,
    )


def replicate(P: Params, name: str, seed: int, device: str, *, keep_model: bool = False) -> dict[str, Any]:
    """Every arm of model ``name`` for replicate ``seed`` on ``device`` (see the module docstring).

    Returns ``teacher`` (its held-out perplexity and cloze accuracy), ``rows`` (one per scored arm: the
    :func:`ablation` row plus ``model``, ``lora_lr``, ``seed``),
    ``per_layer`` (per ablation: its per-layer MSE / window-share curves and loss curves, with ``model``,
    ``feature_map``, ``window``, ``seed``), ``passkey_hits`` (main model only: per item, for the teacher and the
    students converted with corpus text and with passkey data) and ``model`` (the main model's corpus-converted
    window + linear student of the first feature map, if ``keep_model``, else None).
    """
    if device.startswith("cuda"):
        torch.cuda.set_device(device)
    elif torch.get_num_threads() > 1:
        torch.set_num_threads(1)  # models this small run fastest on one thread (and share the cores)
    main = name == P["models"][0]
    teacher, _ = load(name, device=device)
    d = data(name, P)
    fms, window, terraced = P["feature_maps"], P["window"], P["terraced"]
    rows: list[dict[str, Any]] = []
    per_layer: list[dict[str, Any]] = []
    kept = None
    scores = {k: v for k, v in d.evaluation(teacher).items() if k in ("ppl", "cloze")}

    def batches(train: torch.Tensor | None = None) -> PackedBatches:
        return PackedBatches(d.train_rows if train is None else train, P["batch_size"], seed=seed)

    def tag(row: Mapping[str, Any], lora_lr: float) -> dict[str, Any]:
        return {"model": name, "lora_lr": lora_lr, "seed": seed, **row}

    for w in (0, window) if main else (window,):
        for fm in fms:
            got, extras = ablation(
                teacher,
                batches(),
                d.evaluation,
                budget(P, seed, device),
                feature_map=fm,
                window=w,
                terraced=terraced and w > 0,
            )
            rows += [tag(r, P["lora_lr"]) for r in got]
            per_layer.append(
                {
                    "model": name,
                    "feature_map": fm,
                    "window": w,
                    "seed": seed,
                    **{k: v for k, v in extras.items() if k != "model"},
                }
            )
            if main and (w, fm) == (window, fms[0]):
                kept = extras["model"]
    if not main:
        return {"teacher": scores, "rows": rows, "per_layer": per_layer, "passkey_hits": None, "model": None}
    for lr in [lr for lr in P["lora_lr_sweep"] if lr != P["lora_lr"]]:
        got, _ = ablation(
            teacher,
            batches(),
            d.evaluation,
            budget(P, seed, device, lr),
            feature_map=fms[0],
            window=0,
            terraced=False,
        )
        rows += [tag(r, lr) for r in got]
    sweep = [(w, False) for w in sorted(set(P["window_sweep"]) - {window})] + [(window, not terraced)]
    for w, t in sweep:  # Table 18: sliding windows, and the other form of `window`
        row, _ = converted(
            teacher,
            batches(),
            d.evaluation,
            budget(P, seed, device),
            feature_map=fms[0],
            window=w,
            terraced=t,
        )
        rows.append(tag(row, P["lora_lr"]))
    for steps in sorted(set(P["transfer_sweep"]) - {P["transfer_steps"]}):  # Table 23
        row, _ = converted(
            teacher,
            batches(),
            d.evaluation,
            budget(P, seed, device),
            steps=steps,
            feature_map=fms[0],
            window=window,
            terraced=terraced,
        )
        rows.append(tag(row, P["lora_lr"]))
    _, pk_model = converted(
        teacher,
        batches(d.passkey_rows),
        d.evaluation,
        budget(P, seed, device),
        feature_map=fms[0],
        window=window,
        terraced=terraced,
    )
    hits = {
        "teacher (softmax)": passkey_hits(teacher, d.passkey_items),
        "converted with corpus text": passkey_hits(kept, d.passkey_items),
        "converted with passkey data": passkey_hits(pk_model, d.passkey_items),
    }
    return {
        "teacher": scores,
        "rows": rows,
        "per_layer": per_layer,
        "passkey_hits": hits,
        "model": kept if keep_model else None,
    }


def replicates(
    P: Params, tasks: Sequence[tuple[str, int]], devices: Sequence[str], parallel: int
) -> list[dict[str, Any]]:
    """:func:`replicate` of every ``(model, seed)`` task, in task order. The first runs in this process and
    keeps its model; with ``parallel > 1`` the others run at the same time in up to ``parallel - 1`` spawned
    processes, task ``i`` on ``devices[i % len(devices)]`` (the first on ``devices[0]``)."""
    if not tasks or not devices or parallel < 1:
        raise ValueError(
            f"need tasks, devices and parallel >= 1, got {len(tasks)}, {list(devices)}, {parallel}"
        )
    for name in dict.fromkeys(n for n, _ in tasks):
        data(name, P)  # convert each GGUF and build each corpus once, before processes race to write them
    (name, seed), rest = tasks[0], tasks[1:]
    if parallel == 1 or not rest:
        return [replicate(P, name, seed, devices[0], keep_model=True)] + [
            replicate(P, n, s, devices[0]) for n, s in rest
        ]
    with ProcessPoolExecutor(
        max_workers=parallel - 1, mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        futures = [
            pool.submit(replicate, dict(P), n, s, devices[i % len(devices)])
            for i, (n, s) in enumerate(rest, start=1)
        ]
        first = replicate(P, name, seed, devices[0], keep_model=True)
        return [first] + [f.result() for f in futures]
