"""Findings 2-3: cross-lingual alignment of hybrid students measured with SoftCKA (``alignment``); the
chapter's parameters are in ``spec``."""
