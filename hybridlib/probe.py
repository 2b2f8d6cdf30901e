"""Per-layer hidden-state probes and attention-locality statistics for decoder-only models.

Supported: Hugging Face decoder stacks reachable as ``model.model.layers`` whose layers own ``self_attn``
and ``mlp`` (Llama/SmolLM2, Qwen3, Gemma 3 text), and hybrid students from :mod:`hybridlib.convert`,
which replace ``layer.self_attn`` by a mixer with the same call signature.

Signals per decoder layer ``l`` (each returned as ``[T_i, d]`` per text, special tokens removed):

* ``attn_in``: the residual stream entering layer ``l``;
* ``attn_delta``: what the attention/mixer block adds to the residual stream;
* ``mlp_delta``: what the MLP block adds.

So ``attn_in[l] + attn_delta[l] + mlp_delta[l] == attn_in[l + 1]``. Where a layer norms a block's
output before the residual add (Gemma 2/3 style, recognised by a ``post_feedforward_layernorm``), the
delta is the output of that norm (``post_attention_layernorm`` / ``post_feedforward_layernorm``);
otherwise (Llama, Qwen3, where ``post_attention_layernorm`` is the MLP's *input* norm) it is the
output of ``self_attn`` / ``mlp`` itself.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from hybridlib.progress import progress_bar

SIGNALS = ("attn_in", "attn_delta", "mlp_delta")
Captured = dict[str, dict[int, list[Tensor]]]


def decoder(model: nn.Module) -> tuple[nn.Module, nn.ModuleList]:
    """``(base, layers)``: the decoder stack without LM head (``model.model``, or ``model`` itself when it
    is a bare decoder) and its layers (``base.layers``). Probes run ``base`` to skip the logits."""
    for base in (getattr(model, "model", None), model):
        layers = getattr(base, "layers", None)
        if isinstance(layers, nn.ModuleList) and len(layers) > 0:
            for i, layer in enumerate(layers):
                if not (hasattr(layer, "self_attn") and hasattr(layer, "mlp")):
                    raise TypeError(
                        f"{type(model).__name__}: decoder layer {i} ({type(layer).__name__}) has no "
                        "self_attn/mlp; probe supports Llama/Qwen3/Gemma3-style layers"
                    )
            return base, layers
    raise TypeError(
        f"{type(model).__name__} is not supported: expected decoder layers at model.model.layers "
        "(Llama, SmolLM2, Qwen3, Gemma3 causal LMs and hybridlib students)"
    )


def block_outputs(layer: nn.Module) -> dict[str, nn.Module]:
    """The modules whose outputs are added to the residual stream: ``{"attn_delta": ..., "mlp_delta": ...}``."""
    if hasattr(layer, "post_feedforward_layernorm"):
        return {"attn_delta": layer.post_attention_layernorm, "mlp_delta": layer.post_feedforward_layernorm}
    return {"attn_delta": layer.self_attn, "mlp_delta": layer.mlp}


@dataclass(frozen=True)
class Encoded:
    """One tokenised text: ``ids [T]`` (what the model sees) and ``keep [T]`` (positions returned)."""

    ids: Tensor
    keep: Tensor


def encode(
    tokenizer,
    texts: Sequence[str | Sequence[int]],
    *,
    bos_id: int | None = None,
    special_ids: Collection[int] | None = None,
) -> list[Encoded]:
    """Tokenise ``texts`` (strings, or token-id sequences passed through as they are).

    ``bos_id`` is prepended to sequences that do not already start with it (for tokenizers such as
    SmolLM2's that add no start token). Positions holding ``special_ids`` (default: the tokenizer's
    ``all_special_ids``, i.e. BOS/EOS/pad/...; none without a tokenizer) and the prepended token are
    not kept.
    """
    if special_ids is None:
        special_ids = set(tokenizer.all_special_ids) if tokenizer is not None else set()
    special = torch.tensor(sorted(special_ids), dtype=torch.long)
    out = []
    for i, text in enumerate(texts):
        if isinstance(text, str):
            if tokenizer is None:
                raise ValueError(
                    f"texts[{i}] is a string but tokenizer is None; pass a tokenizer or token ids"
                )
            ids = torch.tensor(tokenizer(text)["input_ids"], dtype=torch.long)
        else:
            ids = torch.as_tensor(text, dtype=torch.long)
        if ids.ndim != 1:
            raise ValueError(
                f"texts[{i}] must be a string or a 1-D sequence of token ids, got shape {tuple(ids.shape)}"
            )
        keep = ~torch.isin(ids, special)
        if bos_id is not None and (len(ids) == 0 or ids[0] != bos_id):
            ids = torch.cat([torch.tensor([bos_id]), ids])
            keep = torch.cat([torch.tensor([False]), keep])
        if not keep.any():
            raise ValueError(f"texts[{i}] has no non-special tokens")
        out.append(Encoded(ids, keep))
    return out


def _batches(items: list[Encoded], batch_size: int, pad_id: int) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
    """Right-padded ``(ids [B, T], attention_mask [B, T], keep [B, T])`` batches."""
    for start in range(0, len(items), batch_size):
        chunk = items[start : start + batch_size]
        width = max(len(e.ids) for e in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        keep = torch.zeros((len(chunk), width), dtype=torch.bool)
        for b, e in enumerate(chunk):
            n = len(e.ids)
            ids[b, :n], mask[b, :n], keep[b, :n] = e.ids, 1, e.keep
        yield ids, mask, keep


def _first_tensor(x) -> Tensor:
    return x[0] if isinstance(x, (tuple, list)) else x


@contextmanager
def _probing(model: nn.Module, handles: list) -> Iterator[None]:
    """Eval mode while the hooks in ``handles`` are live; afterwards remove them, restore the mode."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)


def _resolve_layers(n_layers: int, layers: Iterable[int] | None) -> list[int]:
    if layers is None:
        return list(range(n_layers))
    chosen = sorted({int(i) for i in layers})
    bad = [i for i in chosen if not 0 <= i < n_layers]
    if bad or not chosen:
        raise ValueError(f"layers must be a non-empty subset of 0..{n_layers - 1}, got {list(layers)}")
    return chosen


@torch.inference_mode()
def capture(
    model: nn.Module,
    tokenizer,
    texts: Sequence[str | Sequence[int]],
    *,
    signals: Sequence[str] = ("attn_in", "attn_delta"),
    layers: Iterable[int] | None = None,
    batch_size: int = 1,
    dtype: torch.dtype = torch.float32,
    bos_id: int | None = None,
    special_ids: Collection[int] | None = None,
    progress: bool = True,
) -> Captured:
    """Run ``texts`` through ``model`` and return ``out[signal][layer] -> [states [T_i, d] per text]``.

    ``tokenizer`` may be ``None`` when ``texts`` are token ids (see :func:`encode` for ``bos_id`` and
    ``special_ids``). States are stored on the CPU as ``dtype`` and take ``tokens x d x layers x signals
    x itemsize`` bytes: float32 by default (SoftCKA converts each pair to float64 itself), since e.g.
    SmolLM2 on 13 languages x 30 UDHR articles (~120k tokens, d=576, 30 layers, 2 signals) already
    needs ~17 GB in float32 - capture fewer layers or one language at a time for such corpora.
    Batches are right-padded, which leaves causal models' real positions unchanged.
    """
    bad = [s for s in signals if s not in SIGNALS]
    if bad or not signals:
        raise ValueError(f"signals must be a non-empty subset of {SIGNALS}, got {list(signals)}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    base, stack = decoder(model)
    chosen = _resolve_layers(len(stack), layers)
    items = encode(tokenizer, texts, bos_id=bos_id, special_ids=special_ids)
    pad_id = getattr(tokenizer, "pad_token_id", None) or 0  # any id works: padding is masked and dropped
    device = next(model.parameters()).device

    out: Captured = {s: {l: [] for l in chosen} for s in signals}
    in_flight: dict[str, Tensor] = {}  # "keep": keep mask [B, T] of the batch being run

    def store(signal: str, layer: int, x: Tensor) -> None:
        x = x.detach().to(device="cpu", dtype=dtype)
        out[signal][layer].extend(x[b][in_flight["keep"][b]] for b in range(x.shape[0]))  # masking copies

    handles = []
    for l in chosen:
        layer = stack[l]
        if "attn_in" in signals:
            handles.append(
                layer.register_forward_pre_hook(
                    lambda mod, args, kwargs, l=l: store(
                        "attn_in", l, args[0] if args else kwargs["hidden_states"]
                    ),
                    with_kwargs=True,
                )
            )
        for signal, module in block_outputs(layer).items():
            if signal in signals:
                handles.append(
                    module.register_forward_hook(
                        lambda mod, args, output, l=l, s=signal: store(s, l, _first_tensor(output))
                    )
                )

    with (
        _probing(model, handles),
        progress_bar(total=len(items), desc="capture", unit="text", disable=not progress) as bar,
    ):
        for ids, mask, keep in _batches(items, batch_size, pad_id):
            in_flight["keep"] = keep
            base(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=False)
            bar.update(len(ids))
    return out


@dataclass(frozen=True)
class Locality:
    """Attention locality per probed layer, averaged over heads and query positions.

    ``mean_distance [n_layers]``: ``sum_j p_ij (i - j)`` in tokens; ``local_share [n_layers]``: attention
    mass on keys ``j`` with ``i - j < window`` (the last ``window`` tokens, the query included).
    """

    layers: list[int]
    mean_distance: np.ndarray
    local_share: np.ndarray
    window: int


@contextmanager
def _eager_attention(model: nn.Module) -> Iterator[None]:
    """Temporarily switch to eager attention, the implementation that returns probabilities."""
    previous = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        yield
    finally:
        model.set_attn_implementation(previous)


@torch.inference_mode()
def attention_locality(
    model: nn.Module,
    ids: Sequence[Sequence[int] | Tensor],
    layers: Iterable[int],
    *,
    window: int = 64,
    progress: bool = False,
) -> Locality:
    """Mean attention distance and local mass share of softmax-attention ``layers``.

    Each sequence in ``ids`` (1-D token ids) runs alone (no padding). The model is switched to
    ``attn_implementation="eager"`` for the call (SDPA/flash kernels do not return probabilities) and
    each layer's ``self_attn`` output ``(out, probs [B, H, T, T])`` is hooked. All query positions
    (BOS included) count equally; a layer whose mixer returns no probabilities (a recurrent mixer in a
    hybrid) is an error.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    base, stack = decoder(model)
    chosen = _resolve_layers(len(stack), layers)
    seqs = [torch.as_tensor(s, dtype=torch.long) for s in ids]
    if not seqs or any(s.ndim != 1 or len(s) == 0 for s in seqs):
        raise ValueError("ids must be a non-empty list of non-empty 1-D token-id sequences")
    device = next(model.parameters()).device
    dist_sum = {l: 0.0 for l in chosen}
    local_sum = {l: 0.0 for l in chosen}
    count = {l: 0 for l in chosen}

    def record(layer: int, output) -> None:
        probs = output[1] if isinstance(output, (tuple, list)) and len(output) > 1 else None
        if probs is None:
            raise ValueError(
                f"layer {layer} ({type(stack[layer].self_attn).__name__}) returns no attention "
                "probabilities: choose softmax-attention layers"
            )
        p = probs.detach().to(torch.float64).cpu()  # [B, H, Tq, Tk]
        tq, tk = p.shape[-2:]
        offset = (torch.arange(tq)[:, None] + (tk - tq)) - torch.arange(tk)[None, :]  # i - j
        dist_sum[layer] += float((p * offset.clamp_min(0)).sum())
        local_sum[layer] += float((p * ((offset >= 0) & (offset < window))).sum())
        count[layer] += p.shape[0] * p.shape[1] * tq

    handles = [stack[l].self_attn.register_forward_hook(lambda m, a, o, l=l: record(l, o)) for l in chosen]
    with _probing(model, handles), _eager_attention(model):
        for s in progress_bar(seqs, desc="locality", unit="seq", disable=not progress):
            base(input_ids=s[None].to(device), use_cache=False)
    return Locality(
        layers=chosen,
        mean_distance=np.array([dist_sum[l] / count[l] for l in chosen]),
        local_share=np.array([local_sum[l] / count[l] for l in chosen]),
        window=window,
    )
