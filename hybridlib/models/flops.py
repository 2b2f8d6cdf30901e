"""FLOP accounting for model FLOPs utilisation (MFU): the parameters a token's matrix multiplies touch, and the
device's peak rate they are measured against."""

from __future__ import annotations

from torch import nn

PEAK_BF16_FLOPS = 694e12  # bf16 matmul ceiling measured on one H200 (8192^3 torch.matmul)


def matmul_params(model: nn.Module) -> int:
    """N for FLOP counting: parameters outside the input embedding, plus the LM head even when tied."""
    embed, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    total = sum(p.numel() for p in model.parameters()) - embed.numel()
    return total + (head.numel() if head.data_ptr() == embed.data_ptr() else 0)
