"""The ``paper`` preset's real data: FineWeb-2 (training text) and FLORES+ (parallel evaluation).

Both go through ``datasets.load_dataset`` with the real hub names: ``HuggingFaceFW/fineweb-2`` (one
config per language, e.g. ``tel_Telu``; splits train/test; English, absent from FineWeb-2, comes from
``HuggingFaceFW/fineweb`` config ``sample-10BT``, train only) and the gated
``openlanguagedata/flores_plus`` (config per language, e.g. ``cmn_Hans``; splits dev/devtest). These
cannot be reached from the book's machines: ``data_files={lang: path or paths}`` reads local files in
the same schema instead (parquet, jsonl or csv). Without them and without the hub (``HF_HUB_OFFLINE=1``)
the loaders fail at once with ``PaperDataUnavailable``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from itertools import islice
from pathlib import Path

import datasets
import pandas as pd

from hybridlib.data.languages import ENGLISH, LANGUAGES, check_languages, language

FINEWEB2 = "HuggingFaceFW/fineweb-2"
FINEWEB_ENGLISH = ("HuggingFaceFW/fineweb", "sample-10BT")
FLORES = "openlanguagedata/flores_plus"
FINEWEB2_SPLITS = ("train", "test")
FLORES_SPLITS = ("dev", "devtest")
_BUILDERS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv"}
DataFiles = Mapping[str, "str | os.PathLike | Sequence[str | os.PathLike]"]


class PaperDataUnavailable(RuntimeError):
    """The hub dataset cannot be loaded here (offline, gated or missing)."""


def _local(files: str | os.PathLike | Sequence[str | os.PathLike], split: str) -> datasets.Dataset:
    paths = [Path(files)] if isinstance(files, (str, os.PathLike)) else [Path(f) for f in files]
    suffixes = {p.suffix for p in paths}
    if len(suffixes) != 1 or next(iter(suffixes)) not in _BUILDERS:
        raise ValueError(f"data_files must all be one of {sorted(_BUILDERS)}, got {[str(p) for p in paths]}")
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"data_files not found: {missing}")
    builder = _BUILDERS[paths[0].suffix]
    return datasets.load_dataset(builder, data_files={split: [str(p) for p in paths]}, split=split)


def _hub(repo: str, config: str, split: str, streaming: bool) -> datasets.Dataset | datasets.IterableDataset:
    try:
        return datasets.load_dataset(repo, name=config, split=split, streaming=streaming)
    except Exception as error:  # offline, gated, unknown config: all mean "not here"
        offline = datasets.config.HF_HUB_OFFLINE
        raise PaperDataUnavailable(
            f"the `paper` preset needs the Hugging Face hub: could not load {repo} config {config!r} split "
            f"{split!r}{' (HF_HUB_OFFLINE is set)' if offline else ''}: {error}. Pass "
            f"data_files={{lang: path}} to read local files in the same schema."
        ) from error


def _require(columns: Sequence[str], needed: tuple[str, ...], source: str) -> None:
    missing = [c for c in needed if c not in columns]
    if missing:
        raise ValueError(f"{source} lacks columns {missing} (has {list(columns)})")


def load_fineweb2(
    languages: Sequence[str],
    split: str = "train",
    *,
    data_files: DataFiles | None = None,
    max_documents: int | None = None,
) -> datasets.Dataset:
    """FineWeb-2 documents: columns lang, doc_id, text (the first ``max_documents`` per language).

    The hub is streamed so that only ``max_documents`` per language are downloaded.
    """
    codes = check_languages(languages, tuple(LANGUAGES))
    if split not in FINEWEB2_SPLITS:
        raise ValueError(f"split must be one of {FINEWEB2_SPLITS}, got {split!r}")
    if max_documents is not None and (not isinstance(max_documents, int) or max_documents < 1):
        raise ValueError(f"max_documents must be a positive int or None, got {max_documents!r}")
    rows: dict[str, list[str]] = {"lang": [], "doc_id": [], "text": []}
    for code in codes:
        if data_files is not None and code in data_files:
            source = _local(data_files[code], split)
        elif code == ENGLISH:
            if split != "train":
                raise ValueError(f"{FINEWEB_ENGLISH[0]} (English) has only a train split, got {split!r}")
            source = _hub(*FINEWEB_ENGLISH, split, streaming=True)
        else:
            source = _hub(FINEWEB2, language(code).fineweb2, split, streaming=True)
        _require(source.column_names or ["text", "id"], ("text", "id"), f"FineWeb data for {code}")
        for record in islice(source, max_documents):
            rows["lang"].append(code)
            rows["doc_id"].append(str(record["id"]))
            rows["text"].append(record["text"])
    return datasets.Dataset.from_dict(rows)


def load_flores(
    languages: Sequence[str], split: str = "devtest", *, data_files: DataFiles | None = None
) -> datasets.Dataset:
    """FLORES+ sentences: columns lang, id, text, sorted by id; every language must have the same ids."""
    codes = check_languages(languages, tuple(LANGUAGES))
    if split not in FLORES_SPLITS:
        raise ValueError(f"split must be one of {FLORES_SPLITS}, got {split!r}")
    frames = []
    for code in codes:
        if data_files is not None and code in data_files:
            source = _local(data_files[code], split)
        else:
            source = _hub(FLORES, language(code).flores, split, streaming=False)
        _require(source.column_names, ("id", "text"), f"FLORES+ data for {code}")
        frame = source.select_columns(["id", "text"]).to_pandas().sort_values("id")
        frame.insert(0, "lang", code)
        frames.append(frame)
    ids = [tuple(frame["id"]) for frame in frames]
    uneven = [code for code, i in zip(codes, ids) if i != ids[0]]
    if uneven:
        raise ValueError(f"FLORES+ sentences are not parallel: ids of {uneven} differ from {codes[0]}")
    return datasets.Dataset.from_pandas(pd.concat(frames, ignore_index=True), preserve_index=False)
