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

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from transformers import PreTrainedModel

from hybridlib.data.corpus import training_corpus
from hybridlib.findings.lolcats import evals
from hybridlib.findings.lolcats.ablation import Budget, Evaluation, ablation, converted
from hybridlib.findings.lolcats.linearize import linearize
from hybridlib.findings.lolcats.passkey import PasskeyItem, passkey_hits, passkey_items, passkey_training_rows
from hybridlib.memo import memoized
from hybridlib.models import describe, encode, load, load_tokenizer
from hybridlib.provenance import device_name, utc_now
from hybridlib.train import PackedBatches
from hybridlib.train.distributed import spawn_pool

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


_NOT_ARM = ("parallel", "seeds", "throughput_batches", "preset")  # how many run and how, not what


def _arm_settings(P: Params, name: str, seed: int, device: str, arm: Mapping[str, Any]) -> dict[str, Any]:
    """What one arm's result depends on besides the library code: the parameters (less those that only say how
    many replicates run and how), the model, the seed, the precision and the arm itself."""
    params = {k: v for k, v in P.items() if k not in _NOT_ARM}
    precision = budget(P, seed, device).precision
    return {"params": params, "model": name, "seed": seed, "precision": precision, "arm": dict(arm)}


def _arm(
    P: Params, name: str, seed: int, device: str, arm: Mapping[str, Any], compute: Callable[[], Any]
) -> tuple[Any, dict[str, Any]]:
    """``compute()`` of one arm of a replicate, memoized (:func:`hybridlib.memo.memoized`) so that a killed
    run, or a later session given the memo files at the same library code, resumes at the first arm not yet
    done. Returns the value and where and when it was computed (``arm``, ``device``, ``date_utc``, ``wall_s``)."""

    def timed() -> dict[str, Any]:
        start = time.perf_counter()
        value = compute()
        return {
            "value": value,
            "device": device_name(),
            "date_utc": utc_now(),
            "wall_s": time.perf_counter() - start,
        }

    got = memoized("lolcats_arm", _arm_settings(P, name, seed, device, arm), timed)
    return got["value"], {"arm": dict(arm)} | {k: got[k] for k in ("device", "date_utc", "wall_s")}


def replicate(P: Params, name: str, seed: int, device: str) -> dict[str, Any]:
    """Every arm of model ``name`` for replicate ``seed`` on ``device`` (see the module docstring); each arm
    is memoized (:func:`_arm`), so a replicate resumes where a killed run of it stopped.

    Returns ``teacher`` (its held-out perplexity and cloze accuracy), ``rows`` (one per scored arm: the
    :func:`ablation` row plus ``model``, ``lora_lr``, ``seed``),
    ``per_layer`` (per ablation: its per-layer MSE / window-share curves and loss curves, with ``model``,
    ``feature_map``, ``window``, ``seed``), ``passkey_hits`` (main model only: per item, for the teacher and the
    students converted with corpus text and with passkey data) and ``arms`` (per arm: where, when and in how
    many seconds it was computed).
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
    arms: list[dict[str, Any]] = []
    scores = {k: v for k, v in d.evaluation(teacher).items() if k in ("ppl", "cloze")}

    def batches(train: torch.Tensor | None = None) -> PackedBatches:
        return PackedBatches(d.train_rows if train is None else train, P["batch_size"], seed=seed)

    def tag(row: Mapping[str, Any], lora_lr: float) -> dict[str, Any]:
        return {"model": name, "lora_lr": lora_lr, "seed": seed, **row}

    def run(arm: dict[str, Any], compute: Callable[[], Any]) -> Any:
        value, info = _arm(P, name, seed, device, arm, compute)
        arms.append(info)
        return value

    def ablate(fm: str, w: int, lr: float, passkey: bool) -> tuple[list, dict, list | None]:
        got, extras = ablation(
            teacher,
            batches(),
            d.evaluation,
            budget(P, seed, device, lr),
            feature_map=fm,
            window=w,
            terraced=terraced and w > 0,
        )
        hits = passkey_hits(extras["model"], d.passkey_items) if passkey else None
        return got, {k: v for k, v in extras.items() if k != "model"}, hits

    corpus_hits = None
    for w in (0, window) if main else (window,):
        for fm in fms:
            kept = main and (w, fm) == (window, fms[0])  # its student also takes the passkey test
            arm = {
                "kind": "ablation",
                "feature_map": fm,
                "window": w,
                "lora_lr": P["lora_lr"],
                "passkey": kept,
            }
            got, extras, hits = run(arm, partial(ablate, fm, w, P["lora_lr"], kept))
            rows += [tag(r, P["lora_lr"]) for r in got]
            per_layer.append({"model": name, "feature_map": fm, "window": w, "seed": seed, **extras})
            corpus_hits = hits if kept else corpus_hits
    if not main:
        return {"teacher": scores, "rows": rows, "per_layer": per_layer, "passkey_hits": None, "arms": arms}
    for lr in [lr for lr in P["lora_lr_sweep"] if lr != P["lora_lr"]]:
        arm = {"kind": "ablation", "feature_map": fms[0], "window": 0, "lora_lr": lr, "passkey": False}
        got, _, _ = run(arm, partial(ablate, fms[0], 0, lr, False))
        rows += [tag(r, lr) for r in got]

    def convert(
        w: int, t: bool, steps: int | None = None, train: torch.Tensor | None = None
    ) -> dict[str, Any]:
        row, model = converted(
            teacher,
            batches(train),
            d.evaluation,
            budget(P, seed, device),
            steps=steps,
            feature_map=fms[0],
            window=w,
            terraced=t,
        )
        return {"row": row, "hits": passkey_hits(model, d.passkey_items) if train is not None else None}

    sweep = [(w, False) for w in sorted(set(P["window_sweep"]) - {window})] + [(window, not terraced)]
    for w, t in sweep:  # Table 18: sliding windows, and the other form of `window`
        got = run({"kind": "window", "window": w, "terraced": t}, partial(convert, w, t))
        rows.append(tag(got["row"], P["lora_lr"]))
    for steps in sorted(set(P["transfer_sweep"]) - {P["transfer_steps"]}):  # Table 23
        got = run({"kind": "transfer_steps", "steps": steps}, partial(convert, window, terraced, steps))
        rows.append(tag(got["row"], P["lora_lr"]))
    pk = run({"kind": "passkey_data"}, partial(convert, window, terraced, None, d.passkey_rows))
    hits = {
        "teacher (softmax)": passkey_hits(teacher, d.passkey_items),
        "converted with corpus text": corpus_hits,
        "converted with passkey data": pk["hits"],
    }
    return {"teacher": scores, "rows": rows, "per_layer": per_layer, "passkey_hits": hits, "arms": arms}


def decoding_student(teacher: PreTrainedModel, P: Params) -> PreTrainedModel:
    """The chapter's window + linear student (first feature map) before training, for the Fig. 8 decoding
    benchmark: greedy decoding of a fixed number of tokens costs the same whatever the weights, so the
    benchmark needs the architecture, not a converted replicate."""
    return linearize(teacher, feature_map=P["feature_maps"][0], window=P["window"], terraced=P["terraced"])


def replicates(
    P: Params, tasks: Sequence[tuple[str, int]], devices: Sequence[str], parallel: int
) -> list[dict[str, Any]]:
    """:func:`replicate` of every ``(model, seed)`` task, in task order. With ``parallel > 1`` they run at the
    same time in up to ``parallel`` spawned processes, task ``i`` on ``devices[i % len(devices)]``."""
    if not tasks or not devices or parallel < 1:
        raise ValueError(
            f"need tasks, devices and parallel >= 1, got {len(tasks)}, {list(devices)}, {parallel}"
        )
    for name in dict.fromkeys(n for n, _ in tasks):
        data(name, P)  # convert each GGUF and build each corpus once, before processes race to write them
    if parallel == 1 or len(tasks) == 1:
        return [replicate(P, n, s, devices[0]) for n, s in tasks]
    with spawn_pool(min(parallel, len(tasks))) as pool:
        futures = [
            pool.submit(replicate, dict(P), n, s, devices[i % len(devices)]) for i, (n, s) in enumerate(tasks)
        ]
        return [f.result() for f in futures]


def arms_summary(results: Sequence[Mapping[str, Any]]) -> str:
    """One line on where and when the arms of ``results`` (:func:`replicate` values) were computed: arms
    found in the memo of an earlier run keep that run's device and date."""
    arms = [a for res in results for a in res["arms"]]
    dates = sorted(a["date_utc"] for a in arms)
    devices = ", ".join(sorted({a["device"] for a in arms}))
    return (
        f"{len(arms)} arms converted on {devices}, {dates[0]} to {dates[-1]} (UTC), "
        f"{sum(a['wall_s'] for a in arms):.0f} s of conversion in all"
    )
