"""Findings 2-3: cross-lingual alignment of hybrid students measured with SoftCKA (:mod:`hybridlib.alignment`, on
the models :mod:`hybridlib.findings.students` loads; ``prealign`` measures ahead of the notebook); the chapter's
parameters are in ``spec``."""
