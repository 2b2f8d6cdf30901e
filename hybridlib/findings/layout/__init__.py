"""Finding 7: where the full-attention layers go. Distillation of layout students (``distill``), the
step profiler (``bench``) and the paper-vs-book rules (``report``). Parameters: ``spec``."""
