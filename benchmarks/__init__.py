"""Benchmarks outside the library (``python -m benchmarks.<name>`` from a checkout): the token mixers
(:mod:`benchmarks.ops`), the distillation step and its probes (:mod:`benchmarks.distill_step`,
:mod:`benchmarks.distill_probes`) and the whole-model sweeps (:mod:`benchmarks.whole_model`). Each writes to
``_build/bench/`` unless told otherwise; :mod:`benchmarks.promote` copies a result the book shows into
``data/results/benchmarks/``. ``hybridlib`` and ``kernels`` never import this package."""
