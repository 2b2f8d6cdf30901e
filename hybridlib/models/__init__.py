"""Model registry: short names -> (model, tokenizer), cards, and the shared ``encode`` helper."""

from hybridlib.models.card import ModelCard, encode
from hybridlib.models.registry import available, describe, load, load_tokenizer

__all__ = ["ModelCard", "available", "describe", "encode", "load", "load_tokenizer"]
