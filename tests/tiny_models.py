"""Tiny random causal LMs of the three teacher families the library supports, and a tokenizer whose ids name
documents, for fast tests."""

import hashlib

import torch
from transformers import AutoModelForCausalLM, Gemma3TextConfig, LlamaConfig, PreTrainedModel, Qwen3Config

CONFIGS = {"llama": LlamaConfig, "qwen3": Qwen3Config, "gemma3": Gemma3TextConfig}


def tiny_config(family: str, **config):
    """The ``family`` ("llama", "qwen3" or "gemma3") config class built from ``config``."""
    if family not in CONFIGS:
        raise ValueError(f"family={family!r}; choose one of {list(CONFIGS)}")
    return CONFIGS[family](**config)


def tiny_causal_lm(family: str, *, seed: int = 0, **config) -> PreTrainedModel:
    """A randomly initialised (seeded) model of ``family`` in eval mode."""
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(tiny_config(family, **config)).eval()


class DocumentIdTokenizer:
    """Encodes a whole text as one id derived from its hash: a training id names its document."""

    eos_token_id = 0

    def encode(self, text: str) -> list[int]:
        return [1 + int(hashlib.sha256(text.encode()).hexdigest()[:7], 16)]
