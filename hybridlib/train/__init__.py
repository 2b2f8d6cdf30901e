"""Generic trainer: cross-entropy pre-training, forward-KL distillation and LoRA share one loop."""

from hybridlib.train.batches import PackedBatches
from hybridlib.train.config import TrainConfig
from hybridlib.train.objectives import DistillationModel, causal_lm_loss, model_loss
from hybridlib.train.optim import lr_at
from hybridlib.train.trainer import History, train

__all__ = [
    "DistillationModel",
    "History",
    "PackedBatches",
    "TrainConfig",
    "causal_lm_loss",
    "lr_at",
    "model_loss",
    "train",
]
