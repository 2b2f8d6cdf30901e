"""Finding 7: where the full-attention layers go. The chapter's runs of its arms and replicates (``replicates``;
they train with the distillation engine :mod:`hybridlib.train.distill`) and the paper-vs-book rules (``report``).
Parameters: ``spec``."""
