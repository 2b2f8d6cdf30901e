"""Retrieval vs context: multilingual needle-in-a-haystack and Zoology-style MQAR with tiny models."""

from hybridlib.retrieval.models import KINDS, fa_layers, tiny_lm
from hybridlib.retrieval.mqar import MQARBatches, MQARTask, accuracy, accuracy_grid, make_batch
from hybridlib.retrieval.needle import NeedleSample, make_sample, make_samples, score, split_units

__all__ = [
    "KINDS",
    "MQARBatches",
    "MQARTask",
    "NeedleSample",
    "accuracy",
    "accuracy_grid",
    "fa_layers",
    "make_batch",
    "make_sample",
    "make_samples",
    "score",
    "split_units",
    "tiny_lm",
]
