"""Findings 4-6: the event at the first full-attention layer, attention locality and the detokenisation
probe (``detokenisation``); curves come from :mod:`hybridlib.findings.softcka.alignment`. Parameters: ``spec``."""
