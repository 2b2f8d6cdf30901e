"""LoLCATs (Zhang et al., ICLR 2025) on Hugging Face Llama / Gemma 3 models: linearised attention,
attention transfer, LoRA, and the evaluations of the book's chapter 4."""

from hybridlib.lolcats.attention import FEATURE_MAPS, LinearizedAttention, WindowLinearCacheLayer
from hybridlib.lolcats.convert import (
    alternate_layers,
    attention_parameters,
    linearize,
    linearized_modules,
    softmax_attention,
)
from hybridlib.lolcats.evals import ClozeItem, cloze_accuracy, cloze_items, heldout_sequences, perplexity
from hybridlib.lolcats.lora import LORA_TARGETS, add_lora, lora_finetune
from hybridlib.lolcats.passkey import (
    PasskeyItem,
    passkey_accuracy,
    passkey_item,
    passkey_items,
    passkey_training_rows,
)
from hybridlib.lolcats.throughput import (
    cache_nbytes,
    decode,
    decode_steps,
    generation_throughput,
    prefill,
    throughput_comparison,
)
from hybridlib.lolcats.transfer import (
    attention_transfer,
    layer_mse,
    layer_window_share,
    mse_by_layer,
    transfer_loss,
    window_share_by_layer,
)

__all__ = [
    "FEATURE_MAPS", "LORA_TARGETS", "ClozeItem", "LinearizedAttention", "PasskeyItem", "WindowLinearCacheLayer",
    "add_lora", "alternate_layers", "attention_parameters", "attention_transfer", "cache_nbytes", "cloze_accuracy",
    "cloze_items", "decode", "decode_steps", "generation_throughput", "heldout_sequences", "layer_mse",
    "layer_window_share", "linearize", "linearized_modules", "lora_finetune", "mse_by_layer", "passkey_accuracy",
    "passkey_item", "passkey_items", "passkey_training_rows", "perplexity", "prefill", "softmax_attention",
    "throughput_comparison", "transfer_loss", "window_share_by_layer",
]
