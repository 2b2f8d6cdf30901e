"""Offline multilingual data: language table, UDHR, Bible corpus, training corpus, tokenizers, hub loaders."""

from hybridlib.data.bible import bible_db_path, chapters, clean_verse
from hybridlib.data.checksums import ChecksumError
from hybridlib.data.corpus import heldout_documents, iter_documents, split_documents, training_corpus
from hybridlib.data.languages import BIBLE_LANGUAGES, LANGUAGES, TIERS, UDHR_LANGUAGES, Language, language
from hybridlib.data.paper import PaperDataUnavailable, load_fineweb2, load_flores
from hybridlib.data.tokenizers import encode_batch, inflation_table, load_tokenizer, token_counts
from hybridlib.data.udhr import load_udhr, prepare_udhr

__all__ = [
    "BIBLE_LANGUAGES",
    "LANGUAGES",
    "TIERS",
    "UDHR_LANGUAGES",
    "ChecksumError",
    "Language",
    "PaperDataUnavailable",
    "bible_db_path",
    "chapters",
    "clean_verse",
    "encode_batch",
    "heldout_documents",
    "inflation_table",
    "iter_documents",
    "language",
    "load_fineweb2",
    "load_flores",
    "load_tokenizer",
    "load_udhr",
    "prepare_udhr",
    "split_documents",
    "token_counts",
    "training_corpus",
]
