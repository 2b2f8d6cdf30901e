"""hybridlib: models, converters, trainers, metrics, data and plots for the hybrid-attention companion."""

__version__ = "0.1.0"
