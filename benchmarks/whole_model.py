"""The whole-model sweeps' CLI: each model of a preset (:data:`PRESETS`) measured alone on the device with
:mod:`hybridlib.findings.efficiency.wholemodel`'s prefill sweep, decode sweeps and completion grid, the result
written after each model (``complete`` false until the last) to ``--out`` (default
``_build/bench/wholemodel_<preset>.json``; the chapters read ``data/results/efficiency/wholemodel_<preset>.json``,
:func:`~hybridlib.findings.whole_models.run_command`). It also decodes a few batches without the CUDA graph
(``decode_eager``: the host overhead the graph removes) and records each model's ``decode_path``. With ``--rows``
it measures nothing: it judges the committed run's rules into each chapter's
``paper_vs_book_wholemodel_<preset>.json`` (:func:`write_rows`), which the scoreboard reads.

    python -m benchmarks.whole_model --preset gpu --out data/results/efficiency/wholemodel_gpu.json
    python -m benchmarks.whole_model --preset gpu --rows
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel

from hybridlib.atomic import write_json
from hybridlib.convert import convert_to_hybrid
from hybridlib.findings.efficiency.wholemodel import (
    NAMES,
    PAPER_COMPLETED_128K,
    STACK,
    WINDOW,
    check_choice,
    check_sizes,
    completion_grid,
    decode_ratios,
    decode_sweep,
    doubling,
    grid_summary,
    max_context,
    model_shape,
    prefill_sweep,
    run_of,
    weights_nbytes,
    with_prediction,
)
from hybridlib.findings.lolcats.linearize import linearize
from hybridlib.findings.whole_models import KINDS
from hybridlib.layouts import Layout
from hybridlib.models import load
from hybridlib.pages import wholemodel as page
from hybridlib.paths import REPO_ROOT
from hybridlib.provenance import collect
from hybridlib.results import write_record
from kernels.ops.gated_delta_rule import fla_available
from kernels.ops.window_linear_decode import triton_available
from kernels.shapes import ModelShape

#: where the CLI writes unless ``--out`` says otherwise
OUT_DIR = REPO_ROOT / "_build" / "bench"


# --- models and CLI -------------------------------------------------------------------------------------------


def tiny_random(seed: int = 0) -> LlamaForCausalLM:
    """A random 4-layer Llama (GQA 4:2, head 16) for CPU smoke runs of the CLI."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=1 << 20,
    )
    return LlamaForCausalLM(config).eval()


def build(teacher: PreTrainedModel, kind: str, window: int) -> PreTrainedModel:
    """``kind`` of ``teacher``: itself, its 3:1 GDN student (one FA layer closing each block of four, the
    conversion of the layout chapter) or its LoLCATs window + linear model (Hedgehog, terraced ``window``)."""
    check_choice("kind", kind, KINDS)
    if kind == "teacher":
        return teacher
    if kind == "gdn":
        n = teacher.config.get_text_config().num_hidden_layers
        return convert_to_hybrid(teacher, Layout.from_name("standard_periodic", n, n // 4)).eval()
    return linearize(teacher, feature_map="hedgehog", window=window, terraced=True)


PRESETS: Mapping[str, Mapping[str, object]] = {
    "seminar": {
        "models": "tiny-random:teacher,tiny-random:gdn,tiny-random:window-linear",
        "device": "cpu",
        "prefill_first": 256,
        "prefill_last": 2048,
        "probe_last": 8192,
        "chunk": 256,
        "decode_contexts": "256",
        "decode_batches": "1,4,16",
        "eager_batches": "1,4",
        "grid_contexts": "256,512,1024,2048",
        "grid_batches": "1,2,4,8",
        "new_tokens": 8,
        "grid_new_tokens": 4,
        "repeats": 3,
        "time_limit_s": 30.0,
    },
    "gpu": {
        "models": "smollm2-135m:teacher,smollm2-135m:gdn,smollm2-135m:window-linear,gemma3-270m:teacher,"
        "gemma3-270m:gdn",
        "device": "cuda",
        "prefill_first": 4096,
        "prefill_last": 1 << 21,
        "probe_last": 1 << 25,
        "chunk": 8192,
        "decode_contexts": "4096,32768",
        "decode_batches": "1,4,16,64,256,1024,2048",
        "eager_batches": "1,64",
        "grid_contexts": "32768,65536,131072,262144,524288",
        "grid_batches": "1,2,4,8,16,32,64,128",
        "new_tokens": 32,
        "grid_new_tokens": 8,
        "repeats": 3,
        "time_limit_s": 30.0,
    },
}


def _ints(name: str, text: str) -> list[int]:
    try:
        return check_sizes(name, [int(v) for v in text.split(",") if v])
    except ValueError as err:
        raise ValueError(
            f"--{name.replace('_', '-')}: comma-separated increasing positive ints, got {text!r}"
        ) from err


def parse_models(text: str) -> list[tuple[str, str]]:
    """``name:kind,...`` -> [(name, kind)], validated against :data:`NAMES` and :data:`KINDS`."""
    out = []
    for item in (t for t in text.split(",") if t):
        name, _, kind = item.partition(":")
        if name not in NAMES:
            raise ValueError(f"--models: model {name!r} is not allowed; allowed: {', '.join(NAMES)}")
        if kind not in KINDS:
            raise ValueError(
                f"--models: kind {kind!r} of {name!r} is not allowed; allowed: {', '.join(KINDS)}"
            )
        out.append((name, kind))
    if not out:
        raise ValueError("--models: give at least one name:kind")
    return out


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.whole_model",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--preset", default="gpu", help=f"defaults for every option below; one of {', '.join(PRESETS)}"
    )
    p.add_argument(
        "--out",
        help="JSON file to write (atomically); default: _build/bench/wholemodel_<preset>.json",
    )
    p.add_argument(
        "--rows",
        action="store_true",
        help="instead: judge the committed run's rules into paper_vs_book_wholemodel_<preset>.json (write_rows)",
    )
    p.add_argument("--models", help=f"name:kind,... with name in {NAMES}, kind in {KINDS}")
    p.add_argument("--device", help="cpu or cuda")
    p.add_argument(
        "--merge",
        action="store_true",
        help="keep the models of an existing --out that this run does not measure (each model records the run "
        "that measured it: its commit, date and device)",
    )
    p.add_argument(
        "--prefill-first", type=int, help="first prefill context (tokens); doubled to --prefill-last"
    )
    p.add_argument("--prefill-last", type=int, help="last prefill context (tokens)")
    p.add_argument(
        "--probe-last",
        type=int,
        help="last context of the maximum-context probe (doubling from "
        "--prefill-first; only the last chunk is run)",
    )
    p.add_argument("--chunk", type=int, help="prefill tokens per forward call, over the whole batch")
    p.add_argument("--decode-contexts", help="contexts of the decode sweep, e.g. 4096,32768")
    p.add_argument("--decode-batches", help="batches of the decode sweep, e.g. 1,4,16")
    p.add_argument("--eager-batches", help="batches decoded without the CUDA graph too (CUDA only)")
    p.add_argument("--grid-contexts", help="contexts of the completion grid")
    p.add_argument("--grid-batches", help="batches of the completion grid")
    p.add_argument("--new-tokens", type=int, help="decoded tokens per repeat")
    p.add_argument("--grid-new-tokens", type=int, help="decoded tokens per completion-grid point")
    p.add_argument("--repeats", type=int, help="timed repeats per point (after warm-up)")
    p.add_argument("--time-limit-s", type=float, help="stop the prefill sweep after a point slower than this")
    p.add_argument(
        "--memory-cap-gib",
        type=float,
        default=None,
        help="memory cap (CUDA: share of the card; CPU: simulated)",
    )
    args = p.parse_args(argv)
    check_choice("--preset", args.preset, tuple(PRESETS))
    if args.out is None:
        args.out = str(OUT_DIR / f"wholemodel_{args.preset}.json")
    for key, value in PRESETS[args.preset].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def _validate(args: argparse.Namespace) -> dict[str, object]:
    """Every parameter checked (naming it and its allowed values) before a model is loaded."""
    check_choice("--device", args.device, ("cpu", "cuda"))
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is visible; allowed here: cpu")
    if not args.out.endswith(".json"):
        raise ValueError(f"--out must name a .json file, got {args.out!r}")
    for name in (
        "prefill_first",
        "prefill_last",
        "probe_last",
        "chunk",
        "new_tokens",
        "grid_new_tokens",
        "repeats",
    ):
        value = getattr(args, name)
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be a positive int, got {value!r}")
    for last in ("prefill_last", "probe_last"):
        if getattr(args, last) < args.prefill_first:
            raise ValueError(f"--{last.replace('_', '-')} must be >= --prefill-first={args.prefill_first}")
    if args.time_limit_s <= 0 or (args.memory_cap_gib is not None and args.memory_cap_gib <= 0):
        raise ValueError("--time-limit-s and --memory-cap-gib must be > 0")
    return {
        "models": parse_models(args.models),
        "device": args.device,
        "prefill_contexts": doubling(args.prefill_first, args.prefill_last),
        "probe_contexts": doubling(args.prefill_first, args.probe_last),
        "chunk": args.chunk,
        "decode_contexts": _ints("decode_contexts", args.decode_contexts),
        "decode_batches": _ints("decode_batches", args.decode_batches),
        "eager_batches": _ints("eager_batches", args.eager_batches),
        "grid_contexts": _ints("grid_contexts", args.grid_contexts),
        "grid_batches": _ints("grid_batches", args.grid_batches),
        "new_tokens": args.new_tokens,
        "grid_new_tokens": args.grid_new_tokens,
        "repeats": args.repeats,
        "time_limit_s": args.time_limit_s,
        "memory_cap": None if args.memory_cap_gib is None else int(args.memory_cap_gib * 2**30),
    }


def decode_path(kind: str, device: str) -> str:
    """How ``kind`` decodes on ``device``: the kernels its cache-holding layers use."""
    check_choice("kind", kind, KINDS)
    if kind == "teacher":
        return "static KV cache, PyTorch attention"
    if kind == "gdn":
        fla = device == "cuda" and fla_available()
        return "fla fused_recurrent (GDN layers)" if fla else "PyTorch chunked recurrence (GDN layers)"
    fused = device == "cuda" and triton_available()
    return "triton kernel on a ring buffer" if fused else "PyTorch ring-buffer step"


def load_teacher(name: str) -> PreTrainedModel:
    """The teacher ``name`` on the CPU in float32 (:data:`NAMES`: the registry's converted GGUF models, or
    :func:`tiny_random`)."""
    check_choice("model", name, NAMES)
    return tiny_random() if name == "tiny-random" else load(name)[0]


def measure_model(
    model: PreTrainedModel, shape: ModelShape, stack: str | None, params: Mapping[str, object]
) -> dict[str, object]:
    """The prefill sweep, a decode sweep per context and the completion grid of one model (alone on its device)."""
    kw = {"chunk": params["chunk"], "memory_cap": params["memory_cap"]}
    prefill = prefill_sweep(
        model,
        params["prefill_contexts"],
        repeats=params["repeats"],
        time_limit_s=params["time_limit_s"],
        **kw,
    )
    probe = prefill_sweep(model, params["probe_contexts"], repeats=1, fill="probe", **kw)
    for rows in (prefill, probe):
        print(pd.DataFrame(rows).drop(columns=["prefill_s_all"], errors="ignore").to_string(), flush=True)
    decode = {}
    for context in params["decode_contexts"]:
        rows = decode_sweep(
            model,
            context,
            params["decode_batches"],
            new_tokens=params["new_tokens"],
            repeats=params["repeats"],
            **kw,
        )
        decode[str(context)] = with_prediction(rows, shape, stack)
        print(pd.DataFrame(rows).drop(columns=["step_ms_all"], errors="ignore").to_string(), flush=True)
    eager = []
    if next(model.parameters()).device.type == "cuda":  # the same step without the CUDA graph: host overhead
        eager = decode_sweep(
            model,
            params["decode_contexts"][0],
            params["eager_batches"],
            new_tokens=params["new_tokens"],
            repeats=params["repeats"],
            mode="eager",
            **kw,
        )
    grid = completion_grid(
        {"model": model},
        params["grid_contexts"],
        params["grid_batches"],
        new_tokens=params["grid_new_tokens"],
        **kw,
    )
    return {
        "prefill": with_prediction(prefill, shape, stack),
        "probe": with_prediction(probe, shape, stack),
        "max_context": max_context(probe),
        "decode": decode,
        "decode_eager": eager,
        "grid": [{k: v for k, v in r.items() if k != "model"} for r in grid],
    }


def kept_models(path: str | Path, measuring: set[str]) -> dict[str, dict[str, object]]:
    """The models of the result at ``path`` (none if it does not exist) that this run does not measure, each with
    the run that measured it (``run``; from the file's provenance where an older file has none)."""
    path = Path(path)
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    old = run_of(data.get("provenance"))
    return {label: {"run": old, **e} for label, e in data["models"].items() if label not in measuring}


def summarise(result: dict[str, object]) -> None:
    """Add ``decode_ratios`` (each student over its teacher, per decode context and batch) and ``grid_summary``
    (completed points per model) to a result holding ``models``."""
    models = result["models"]
    result["decode_ratios"] = {
        label: {
            c: decode_ratios(models[f"{e['name']}:teacher"]["decode"][c], rows)
            for c, rows in e["decode"].items()
        }
        for label, e in models.items()
        if e["kind"] != "teacher" and f"{e['name']}:teacher" in models
    }
    grid = [r | {"model": label} for label, e in models.items() for r in e["grid"]]
    result["grid_summary"] = grid_summary(grid).reset_index().to_dict("records") if grid else []


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    """Measure every model (each alone on the device), print the figures and write the JSON after each model
    (``complete`` false until the last: a run cut short keeps the models it finished); returns the result ({} with
    ``--rows``: the rules' records written instead)."""
    args = _arguments(argv)
    if args.rows:
        for path in write_rows(args.preset):
            print(f"wrote {path}")
        return {}
    params = _validate(args)
    device = params["device"]
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    window = WINDOW["gpu" if args.preset == "gpu" else "seminar"]
    teachers: dict[str, PreTrainedModel] = {}
    measuring = {f"{name}:{kind}" for name, kind in params["models"]}
    result: dict[str, object] = {
        "models": kept_models(args.out, measuring) if args.merge else {},
        "complete": False,
        "paper_completed_128k": [list(p) for p in PAPER_COMPLETED_128K],
    }
    for i, (name, kind) in enumerate(params["models"]):
        if name not in teachers:
            teachers[name] = load_teacher(name)
        label, stack = f"{name}:{kind}", STACK[kind]
        model = build(teachers[name], kind, window).to(device, dtype)
        print(f"== {label}", flush=True)
        result["models"][label] = {
            "name": name,
            "kind": kind,
            "stack": stack,
            "weights_bytes": weights_nbytes(model),
            "window": window if kind == "window-linear" else None,
            "decode_path": decode_path(kind, device),
            **measure_model(model, model_shape(teachers[name], name), stack, params),
            "run": run_of(collect(args.preset)),
        }
        model = None
        if device == "cuda":
            torch.cuda.empty_cache()
        summarise(result)
        result["complete"] = i == len(params["models"]) - 1
        result["provenance"] = collect(
            args.preset, {**params, "models": [":".join(m) for m in params["models"]]}
        )
        write_json(args.out, _plain(result))
    print(
        pd.DataFrame(result["grid_summary"]).to_string(),
        "\npaper (128K evaluations):",
        PAPER_COMPLETED_128K,
        flush=True,
    )
    return result


def write_rows(preset: str, root: Path | None = None) -> list[Path]:
    """Write each chapter's record of the committed ``preset`` run's rules
    (:func:`hybridlib.pages.wholemodel.records`) as ``paper_vs_book_wholemodel_<preset>.json`` under ``root``
    (default: the canonical results, :func:`hybridlib.results.write_record`); returns the paths."""
    return [
        write_record(chapter, f"paper_vs_book_wholemodel_{preset}", record, root)
        for chapter, record in page.records(preset).items()
    ]


def _plain(obj: object) -> object:
    """JSON-ready copy (NaN -> None, numpy scalars -> Python)."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


if __name__ == "__main__":
    try:
        main()
    except ValueError as err:
        sys.exit(f"error: {err}")
