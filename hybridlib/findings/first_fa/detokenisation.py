"""The detokenisation probe: does a layer assemble words out of their subword tokens?

The paper (Bandarkar et al., 2026) suggests, without testing it, that the first full-attention layer of a
hybrid "detokenises". We test it with linear probes for word identity across subword splits:

* **words**: maximal runs of non-whitespace characters; a token belongs to the word holding its first
  non-space character. The last word of each (possibly truncated) text is not used.
* **task "within"** (word identity across the split): at the *last* token of every word split into
  >= 2 tokens, predict the word's *first* token (its id). The input embedding there knows only the last
  subword, so a layer that gathers the word's earlier pieces into its last position raises the accuracy.
* **task "across"** (control, same kind of target outside a word): at the *first* token of every word
  that follows another word, predict the previous word's last token. A layer that merely copies
  neighbouring tokens raises both tasks; detokenisation raises "within" more than "across".
* **probe**: closed-form ridge regression onto one-hot labels (features standardised with training
  statistics, penalty ``l2 * n_train``), predicting the arg-max. Labels with >= ``min_count`` occurrences
  are kept; their occurrences alternate between train and test (first to train). **Score**: test accuracy.

Per layer ``l`` three points of the residual stream are probed: ``in`` (``attn_in[l]``), ``mid`` (after the
mixer: ``attn_in[l] + attn_delta[l]``) and ``out`` (after the MLP); ``acc(mid) - acc(in)`` is what the
layer's attention / recurrent mixer adds.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from hybridlib import probe
from hybridlib.models import ModelCard, encode
from hybridlib.progress import progress_bar

POINTS = ("in", "mid", "out")


def word_ids(text: str, offsets: Sequence[tuple[int, int]]) -> np.ndarray:
    """Word index per token ``[T]``: the whitespace-delimited word holding the token's first non-space
    character; -1 for tokens without one (pure whitespace, or special tokens with empty offsets)."""
    spans = [m.span() for m in re.finditer(r"\S+", text)]
    starts = [s for s, _ in spans]
    out = np.full(len(offsets), -1, dtype=np.int64)
    for t, (a, b) in enumerate(offsets):
        chars = [c for c in range(a, b) if not text[c].isspace()]
        if chars:
            w = bisect.bisect_right(starts, chars[0]) - 1
            if w >= 0 and spans[w][0] <= chars[0] < spans[w][1]:
                out[t] = w
    return out


@dataclass(frozen=True)
class Tokenised:
    """One text as the model sees it: ``ids`` (start token included, cut) and, for the positions
    :func:`hybridlib.probe.capture` keeps (ids not in ``special``), ``words [T_kept]`` (word index or -1)."""

    ids: list[int]
    words: np.ndarray
    special: frozenset[int]


def tokenise(tokenizer, card: ModelCard, text: str, max_tokens: int) -> Tokenised:
    """Encode ``text`` exactly like :func:`hybridlib.models.encode` and map kept tokens to words."""
    enc = tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
    ids, offsets = list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]
    if card.bos_policy == "prepend" and (not ids or ids[0] != card.bos_id):
        ids, offsets = [card.bos_id, *ids], [(0, 0), *offsets]
    if ids != encode(tokenizer, text, card):
        raise ValueError(f"{card.name}: offsets encoding differs from hybridlib.models.encode")
    ids, offsets = ids[:max_tokens], offsets[:max_tokens]
    special = frozenset(tokenizer.all_special_ids)
    kept = [o for i, o in zip(ids, offsets) if i not in special]
    return Tokenised(ids, word_ids(text, kept), special)


TASKS = ("within", "across")


def probe_units(items: Sequence[Tokenised]) -> pd.DataFrame:
    """Probe examples of both tasks: ``task, text, position`` (where the feature is read), ``label`` (the
    target token id) and ``n_tokens`` (tokens of the word at ``position``)."""
    rows = []
    for i, item in enumerate(items):
        words, ids = item.words, [t for t in item.ids if t not in item.special]
        last_word = words.max(initial=-1)
        for w in np.unique(words[words >= 0]):
            pos = np.flatnonzero(words == w)
            if w != last_word and len(pos) >= 2:
                rows.append(("within", i, int(pos[-1]), ids[pos[0]], len(pos)))
            prev = pos[0] - 1
            if prev >= 0 and words[prev] >= 0 and words[prev] != w:
                rows.append(("across", i, int(pos[0]), ids[prev], len(pos)))
    return pd.DataFrame(rows, columns=["task", "text", "position", "label", "n_tokens"])


def occurrence_split(labels: Sequence[str], min_count: int) -> tuple[np.ndarray, np.ndarray]:
    """``(train_idx, test_idx)``: occurrences of types with >= ``min_count`` (>= 2) occurrences,
    alternating train / test within each type in order of appearance."""
    if min_count < 2:
        raise ValueError(f"min_count must be >= 2 (one train and one test occurrence), got {min_count}")
    by_type: dict[str, list[int]] = defaultdict(list)
    for i, label in enumerate(labels):
        by_type[label].append(i)
    train, test = [], []
    for idx in by_type.values():
        if len(idx) >= min_count:
            train += idx[0::2]
            test += idx[1::2]
    return np.array(sorted(train), dtype=np.int64), np.array(sorted(test), dtype=np.int64)


def ridge_accuracy(
    x_train: Tensor, y_train: Sequence[str], x_test: Tensor, y_test: Sequence[str], *, l2: float = 1e-2
) -> float:
    """Test accuracy of a one-hot ridge classifier fitted in closed form on ``x_train [n, d]``.

    Features are standardised with training mean/std; ``W = (X^T X + l2 n I)^-1 X^T Y`` for centred one-hot
    ``Y``; prediction = arg-max of ``x W``. Test labels unseen in training count as errors.
    """
    if l2 <= 0:
        raise ValueError(f"l2 must be > 0, got {l2}")
    if len(x_train) != len(y_train) or len(x_test) != len(y_test) or len(y_train) == 0 or len(y_test) == 0:
        raise ValueError("x_train/y_train and x_test/y_test must be non-empty and of matching lengths")
    classes = sorted(set(y_train))
    code = {c: i for i, c in enumerate(classes)}
    x = torch.as_tensor(x_train, dtype=torch.float64)
    mean, std = x.mean(0), x.std(0, unbiased=False).clamp_min(1e-12)
    x = (x - mean) / std
    y = torch.zeros(len(y_train), len(classes), dtype=torch.float64)
    y[torch.arange(len(y_train)), torch.tensor([code[c] for c in y_train])] = 1.0
    y = y - y.mean(0)
    gram = x.T @ x + l2 * len(x) * torch.eye(x.shape[1], dtype=torch.float64)
    w = torch.linalg.solve(gram, x.T @ y)
    pred = (((torch.as_tensor(x_test, dtype=torch.float64) - mean) / std) @ w).argmax(1)
    truth = torch.tensor([code.get(c, -1) for c in y_test])
    return float((pred == truth).double().mean())


CAPTURE_BUDGET_BYTES = 2 * 1024**3  # states held at once while probing (layers are captured in groups)


def _layer_groups(items: Sequence[Tokenised], card: ModelCard) -> list[list[int]]:
    """Consecutive layer groups whose float32 states (3 signals) fit :data:`CAPTURE_BUDGET_BYTES`."""
    per_layer = sum(len(it.ids) for it in items) * card.hidden_size * 3 * 4
    size = max(1, CAPTURE_BUDGET_BYTES // max(1, per_layer))
    layers = list(range(card.n_layers))
    return [layers[i : i + size] for i in range(0, len(layers), size)]


def _group_features(
    model: nn.Module, tokenizer, items: Sequence[Tokenised], layers: list[int], units: pd.DataFrame
) -> dict[int, dict[str, Tensor]]:
    """``layer -> point -> [n_units, d]`` (float64) residual-stream vectors at the unit positions."""
    cap = probe.capture(
        model,
        tokenizer,
        [it.ids for it in items],
        signals=probe.SIGNALS,
        layers=layers,
        batch_size=8,
        progress=False,
    )
    at = list(zip(units["text"], units["position"]))
    out = {}
    for layer in layers:
        base, mixer, block = (
            torch.stack([cap[s][layer][t][p] for t, p in at]).double()
            for s in ("attn_in", "attn_delta", "mlp_delta")
        )
        out[layer] = {"in": base, "mid": base + mixer, "out": base + mixer + block}
    return out


def _score_layer(
    rows: list[dict], feats: dict[str, Tensor], splits: dict, model: str, layer: int, l2: float
) -> None:
    """Append one row per (task, point) of ``layer``: the probe's test accuracy and the split's counts."""
    for task, (rows_of_task, train, test, labels) in splits.items():
        y_train, y_test = [labels[i] for i in train], [labels[i] for i in test]
        commonest = Counter(y_train).most_common(1)[0][0]  # ties: the first seen (deterministic, linear time)
        for point, x in feats.items():
            x = x[rows_of_task]
            rows.append(
                {
                    "model": model,
                    "layer": layer,
                    "task": task,
                    "point": point,
                    "accuracy": ridge_accuracy(x[train], y_train, x[test], y_test, l2=l2),
                    "n_train": len(train),
                    "n_test": len(test),
                    "n_classes": len(set(y_train)),
                    "majority": float(np.mean([y == commonest for y in y_test])),
                }
            )


def word_identity_probe(
    model: nn.Module,
    tokenizer,
    card: ModelCard,
    texts: Sequence[str],
    *,
    max_tokens: int,
    min_count: int = 4,
    l2: float = 1e-2,
    label: str = "",
    progress: bool = True,
) -> pd.DataFrame:
    """Probe accuracy of both tasks at every layer and point of ``model`` on ``texts``.

    Returns one row per (layer, task): ``acc_in, acc_mid, acc_out``, ``se`` (the largest binomial standard
    error of the three), ``mixer_gain = acc_mid - acc_in``, ``layer_gain = acc_out - acc_in``, the counts
    ``n_train, n_test, n_classes`` and ``majority`` (test accuracy of always guessing the commonest class).
    """
    items = [tokenise(tokenizer, card, t, max_tokens) for t in texts]
    units = probe_units(items)
    splits = {}
    for task in TASKS:
        labels = [str(x) for x in units.loc[units["task"] == task, "label"]]
        train, test = occurrence_split(labels, min_count)
        if len(train) == 0:
            raise ValueError(
                f"task {task!r}: no label occurs >= min_count={min_count} times; pass more text "
                "or a smaller min_count"
            )
        splits[task] = (np.flatnonzero(units["task"] == task), train, test, labels)
    rows = []
    groups = _layer_groups(items, card)
    for group in progress_bar(groups, desc=f"probe {label or card.name}", unit="pass", disable=not progress):
        for layer, feats in _group_features(model, tokenizer, items, group, units).items():
            _score_layer(rows, feats, splits, label or card.name, layer, l2)
    long = pd.DataFrame(rows)
    keys = ["model", "layer", "task", "n_train", "n_test", "n_classes", "majority"]
    frame = (
        long.pivot(index=keys, columns="point", values="accuracy")[list(POINTS)]
        .add_prefix("acc_")
        .reset_index()
    )
    acc = frame[["acc_in", "acc_mid", "acc_out"]]
    frame["se"] = np.sqrt((acc * (1 - acc)).max(axis=1) / frame["n_test"])
    frame["mixer_gain"] = frame["acc_mid"] - frame["acc_in"]
    frame["layer_gain"] = frame["acc_out"] - frame["acc_in"]
    return frame.sort_values(["task", "layer"], ignore_index=True)
