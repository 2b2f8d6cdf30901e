"""Offline multilingual data: language table, UDHR, Bible corpus, training corpus, tokenizers."""
