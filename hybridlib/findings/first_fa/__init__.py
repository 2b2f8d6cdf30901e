"""Findings 4-6: the event at the first full-attention layer, attention locality and the detokenisation
probe (``detokenisation``, ``measures``); curves come from :mod:`hybridlib.alignment`, the models from
:mod:`hybridlib.findings.students`. Parameters: ``spec``."""
