"""What a model is (``ModelCard``) and how text becomes its input ids (``encode``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch
from transformers import PretrainedConfig, PreTrainedTokenizerBase

BosPolicy = Literal["tokenizer", "prepend"]


@dataclass(frozen=True)
class ModelCard:
    """Architecture facts of one registry entry.

    ``bos_policy``: ``"tokenizer"`` - the tokenizer adds its own start token; ``"prepend"`` - it adds
    none and ``encode`` prepends ``bos_id`` (SmolLM2: id 0 gave the lowest English loss of the candidates tried).
    ``n_params`` counts tied embeddings once (``model.parameters()`` semantics).
    """

    name: str
    source: str
    licence: str
    architecture: str
    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int
    n_params: int
    layer_types: list[str]
    bos_policy: BosPolicy
    bos_id: int | None
    observe_only: bool
    notes: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def count_parameters(config: PretrainedConfig) -> int:
    """Parameter count of the causal LM ``config`` describes, built on the meta device (no memory)."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def architecture_fields(config: PretrainedConfig) -> dict[str, Any]:
    """Card fields read from a (text) config: depth, widths, heads, vocabulary, per-layer attention type."""
    text = config.get_text_config()
    n_layers = int(text.num_hidden_layers)
    n_heads = int(text.num_attention_heads)
    layer_types = list(getattr(text, "layer_types", None) or ["full_attention"] * n_layers)
    return {
        "architecture": (config.architectures or [type(config).__name__])[0],
        "n_layers": n_layers,
        "hidden_size": int(text.hidden_size),
        "n_heads": n_heads,
        "n_kv_heads": int(getattr(text, "num_key_value_heads", None) or n_heads),
        "head_dim": int(getattr(text, "head_dim", None) or text.hidden_size // n_heads),
        "vocab_size": int(text.vocab_size),
        "layer_types": layer_types,
    }


def encode(tokenizer: PreTrainedTokenizerBase, text: str, card: ModelCard) -> list[int]:
    """Token ids of ``text`` as the model expects them, start token included exactly once."""
    ids = tokenizer(text, add_special_tokens=True)["input_ids"]
    if card.bos_policy == "prepend" and (not ids or ids[0] != card.bos_id):
        ids = [card.bos_id, *ids]
    return list(ids)
