"""The distillation engine: convert a full-attention teacher into a hybrid with a given FA layout (Algorithm 1,
:func:`hybridlib.convert.convert_to_hybrid`) and train every student parameter with forward KL to the frozen teacher
through the generic trainer (the hybrid paper's Finding 7; the layout-distillation chapter trains its students here).

``distill_layout(teacher, layout, ...)`` returns a :class:`DistillRun` (learning curve, speed, MFU) and caches
the trained student under ``cache_dir("students", <key>)``; the key hashes every setting that changes the
result (teacher identity = its weight files, the FA layer set, the recipe, the data seed, this code), so the
SoftCKA chapters get the layout chapter's students with :func:`load_student`, and layouts that coincide on a shallow
teacher (e.g. sandwich = endpoint spread on 6 layers) share one student. A killed run resumes from its
trainer checkpoint. Schedule: linear warm-up over 3% of the steps, cosine to ``MIN_LR_RATIO * lr_rest``
(the paper: 1e-5 = lr_rest / 2), so a larger ``train_tokens`` stretches the same schedule over more steps at
the same peaks (the budget curve). Validations every ``eval_every_tokens``, or with ``eval_points`` > 0 at that
many log-spaced token counts (:func:`eval_schedule`). ``init_seed`` seeds the conversion (new GDN parameters) and
the trainer, ``data_seed`` orders the data (a replicate changes both, :func:`hybridlib.recipes.replicate_seeds`);
validation / test documents are the corpus' fixed held-out chapters (independent of the seeds).

Each teacher's defaults are its recipe (:data:`hybridlib.recipes.RECIPES`, which documents each choice).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import math
import os
import shutil
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn
from transformers import PreTrainedModel

from hybridlib import convert, losses, metrics
from hybridlib.atomic import file_lock, write_json
from hybridlib.carry import CARRIED, missing_weights
from hybridlib.convert import MIXERS, RECURRENT_PATTERN, convert_to_hybrid, load_hybrid
from hybridlib.data.corpus import (
    EDITIONS,
    check_editions,
    check_text_cap,
    heldout_documents,
    repetition,
    text_tokens,
    training_corpus,
)
from hybridlib.data.tokenizers import tokenizer_fingerprint
from hybridlib.integrity import (
    MISSING,
    BrokenCacheError,
    check_weights,
    quarantine,
    read,
    read_or_discard,
    write_digests,
)
from hybridlib.layouts import CAPPED_SUFFIX, LAYOUT_NAMES, Layout
from hybridlib.models import describe, encode, load, load_tokenizer
from hybridlib.models.flops import PEAK_BF16_FLOPS, matmul_params
from hybridlib.models.identity import teacher_identity
from hybridlib.paths import cache_dir
from hybridlib.provenance import source_digest
from hybridlib.recipes import RECIPES, Recipe, fa_count
from hybridlib.train import PackedBatches, TrainConfig, compile_cache, objectives, optim, train
from hybridlib.train import trainer as _trainer
from hybridlib.train.distributed import barrier, init_world, rank_device
from hybridlib.train.objectives import DistillationModel, model_loss
from kernels.layers import gated_deltanet as gdn
from kernels.ops.gated_delta_rule import gated_delta_rule

PRECISIONS = ("fp32", "bf16")
MIN_LR_RATIO = 0.5  # cosine floor = 0.5 * lr_rest (the paper: 1e-5 with lr_rest 2e-5)
WARMUP_FRAC = 0.03
MODEL_SEED = 0  # default conversion (new GDN parameters) and trainer seed
CHECKPOINT_EVERY_S = (
    60.0  # a checkpoint (weights + AdamW state, 1.6 GB for SmolLM2) costs seconds: a kill loses <= 1 min
)
_VERSION = 1  # bump when the recipe in this file changes meaning


def recipe(teacher_name: str) -> Recipe:
    """The defaults for ``teacher_name``; an unknown teacher raises naming the known ones."""
    if teacher_name not in RECIPES:
        raise ValueError(
            f"teacher_name={teacher_name!r} has no distillation recipe; allowed: {sorted(RECIPES)}"
        )
    return RECIPES[teacher_name]


@dataclass(frozen=True)
class DistillSettings:
    """Everything that determines a trained student; :meth:`key` is its content hash."""

    teacher_name: str
    teacher_identity: str
    fa_layers: tuple[int, ...]
    mixer: str
    swa_window: int
    train_tokens: int
    seq_len: int
    batch_size: int
    lr_recurrent: float
    lr_rest: float
    tau: float
    data_seed: int
    eval_every_tokens: int
    val_docs_per_language: int
    languages: tuple[str, ...] | None
    precision: str
    init_seed: int = MODEL_SEED
    compiled: bool = False
    eval_points: int = 0
    text_cap: int | None = None  # tokens of unique training text (``training_corpus``); None: no cap
    editions: str = "one"  # the training text's editions of each language (``training_corpus``)

    def key(self) -> str:
        """The hash of the settings and the code (:func:`_code_version`). ``text_cap`` and ``editions`` are left
        out at their defaults (None, "one"): a default student's key is the one the same code computed before the
        fields existed (the code digest still changes with any edit of the sources it hashes, this module's
        included)."""
        fields = asdict(self)
        for name, default in (("text_cap", None), ("editions", "one")):
            if fields[name] == default:
                del fields[name]
        payload = json.dumps([_VERSION, _code_version(), fields], sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:20]


@dataclass
class DistillRun:
    """A finished distillation. ``evals``: one record per validation (tokens, ce, kl, ce_teacher, delta,
    ``ce_by_lang``, ``kl_by_lang``; nats/token), the first at 0 tokens (the converted, untrained student).
    ``tokens_per_s``: median over steps; ``mfu``: model FLOPs utilisation vs
    :data:`hybridlib.models.flops.PEAK_BF16_FLOPS` (CUDA only),
    counting ``6 N_student + 2 N_teacher`` FLOPs a token (N = non-embedding parameters + LM head).
    ``corpus``: per language, the training text used (``hybridlib.data.corpus.repetition``: tokens, unique tokens,
    passes, and ``text_cap`` when the text was capped)."""

    key: str
    path: str
    layout_name: str
    pattern: str
    settings: dict[str, Any]
    evals: list[dict[str, Any]]
    train_loss: list[tuple[int, float]]
    grad_norm_max: float
    tokens_trained: int
    tokens_per_s: float
    flops_per_token: float
    mfu: float | None
    cpu_s_per_1m_tokens: float
    wall_s: float
    device: str
    teacher_compiled: bool
    n_params: dict[str, int] = field(default_factory=dict)
    corpus: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The layout name, with the mixer for non-GDN students (``standard_periodic+swa``) and
        :data:`~hybridlib.layouts.CAPPED_SUFFIX` for students trained on capped text (``text_cap``)."""
        mixer = self.settings["mixer"]
        label = self.layout_name if mixer == "gdn" else f"{self.layout_name}+{mixer}"
        return label + (CAPPED_SUFFIX if self.settings.get("text_cap") is not None else "")

    def curve(self, metric: str = "ce") -> pd.Series:
        """Validation ``metric`` (``ce``, ``kl``, ``delta``) indexed by training tokens (> 0)."""
        points = {e["tokens"]: e[metric] for e in self.evals if e["tokens"] > 0}
        return pd.Series(points, name=self.label, dtype=float).rename_axis("tokens")

    def final(self, metric: str = "ce") -> float:
        return float(self.evals[-1][metric])

    def load_model(
        self, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
    ) -> PreTrainedModel:
        """The trained student (eval mode) rebuilt from its cache folder; ``FileNotFoundError`` for a student
        carried here without its weights (:mod:`hybridlib.carry`)."""
        folder = Path(self.path)
        if (folder / CARRIED).is_file() and not (folder / "student").exists():
            raise missing_weights(folder)
        return load_hybrid(folder / "student", dtype=dtype).to(device)

    def save(self) -> None:
        write_json(Path(self.path) / "run.json", asdict(self))

    @classmethod
    def read(cls, path: str | Path) -> DistillRun:
        record = json.loads((Path(path) / "run.json").read_text(encoding="utf-8"))
        return cls(
            **record | {"path": str(path)}
        )  # where it is now (another machine's cache wrote the record)


def _code_version() -> str:
    """Hash of the sources a student depends on (this module and the teacher identity and FLOP accounting it used to
    hold, the converter, losses, trainer, GDN layer)."""
    return source_digest(
        (
            inspect.getmodule(_code_version),
            inspect.getmodule(teacher_identity),
            inspect.getmodule(matmul_params),
            convert,
            losses,
            _trainer,
            objectives,
            optim,
            gdn,
            inspect.getmodule(gated_delta_rule),
        )
    )


def start_token(tokenizer: Any, card: Any) -> int | None:
    """The id ``models.encode`` puts before every text (so corpus rows start like held-out documents), or None."""
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = encode(tokenizer, "a", card)
    return full[0] if len(full) == len(plain) + 1 else None


def heldout_ids(
    tokenizer: Any, card: Any, split: str, languages: Sequence[str] | None, per_language: int, max_length: int
) -> list[dict[str, Any]]:
    """Held-out chapters as ``{lang, doc_id, input_ids}`` (cut to ``max_length`` tokens), cached as JSON.

    The cache (``cache_dir("heldout")``) lets a machine without the Bible database run on prepared ids.
    """
    key = hashlib.sha256(
        json.dumps(
            [
                tokenizer_fingerprint(tokenizer),
                card.bos_policy,
                card.bos_id,
                split,
                list(languages or []),
                per_language,
                max_length,
            ]
        ).encode()
    ).hexdigest()[:20]
    path = cache_dir("heldout") / f"{key}.json"
    if path.is_file():
        records = read_or_discard(path, lambda p: json.loads(p.read_text(encoding="utf-8")))
        if records is not MISSING:
            return records
    docs = heldout_documents(split, languages, per_language=per_language)
    records = [
        {"lang": lang, "doc_id": doc, "input_ids": encode(tokenizer, text, card)[:max_length]}
        for lang, doc, text in zip(docs["lang"], docs["doc_id"], docs["text"])
    ]
    write_json(path, records)
    return records


def scores_summary(frame: pd.DataFrame) -> dict[str, Any]:
    """Pooled (token-weighted) ce, ce_teacher, kl, delta and per-language ce / kl of an ``evaluate_pair`` frame."""
    w = frame["tokens"] / frame["tokens"].sum()
    by_lang = metrics.per_language(frame)
    return {
        "ce": float((frame["ce_student"] * w).sum()),
        "ce_teacher": float((frame["ce_teacher"] * w).sum()),
        "kl": float((frame["kl"] * w).sum()),
        "delta": metrics.ce_gap(frame),
        "ce_by_lang": by_lang["ce_student"].round(6).to_dict(),
        "kl_by_lang": by_lang["kl"].round(6).to_dict(),
    }


def _autocast(device: torch.device, precision: str):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


def _resolve_device(device: str | torch.device | None, precision: str | None) -> tuple[torch.device, str]:
    device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    precision = precision or ("bf16" if device.type == "cuda" else "fp32")
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r} is not allowed; choose one of {PRECISIONS}")
    return device, precision


@functools.lru_cache(maxsize=1)
def _device_teacher(
    teacher_name: str, teacher_path: str | Path | None, device: str, precision: str
) -> PreTrainedModel:
    """The frozen teacher on ``device`` (bf16 weights under "bf16"), loaded once for consecutive runs, so
    ``torch.compile`` traces it once per process rather than once per layout (students are converted from the
    float32 copy that ``distill_layout`` loads)."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    teacher, _ = load(teacher_name, dtype=dtype, device=device, path=teacher_path)
    return teacher.requires_grad_(False)


def _compiled_teacher(
    teacher: nn.Module, example: torch.Tensor, device: torch.device, precision: str
) -> tuple[nn.Module, bool]:
    """``torch.compile(teacher)`` on CUDA if one forward on ``example`` works, else the eager teacher."""
    if device.type != "cuda":
        return teacher, False
    compile_cache.activate()
    compiled = torch.compile(teacher)
    try:
        with torch.no_grad(), _autocast(device, precision):
            compiled(input_ids=example.to(device))
    except Exception as err:  # noqa: BLE001 - any compiler failure falls back to the eager teacher
        warnings.warn(
            f"torch.compile of the teacher failed ({type(err).__name__}: {err}); running it eagerly"
        )
        return teacher, False
    return compiled, True


def _layout(teacher: PreTrainedModel, layout_name: str, fa_fraction: float) -> Layout:
    if layout_name not in LAYOUT_NAMES:
        raise ValueError(f"layout_name={layout_name!r} is not allowed; choose one of {LAYOUT_NAMES}")
    n_layers = teacher.config.num_hidden_layers
    return Layout.from_name(layout_name, n_layers, fa_count(n_layers, fa_fraction))


def eval_schedule(total_tokens: int, tokens_per_step: int, points: int) -> list[int]:
    """Token counts of ``points`` validations log-spaced from the first step to the last step that covers
    ``total_tokens`` (both included), each rounded to a whole step; duplicates after rounding are merged, so a run
    of fewer steps than ``points`` validates at every step."""
    if points < 2:
        raise ValueError(f"points must be >= 2 (the first and the last step), got {points!r}")
    steps = math.ceil(total_tokens / tokens_per_step)
    spaced = [round(steps ** (i / (points - 1))) for i in range(points)]
    return [s * tokens_per_step for s in sorted(set(spaced))]


def _check_args(mixer: str, seeds: dict[str, int], values: dict[str, Any]) -> None:
    if mixer not in MIXERS:
        raise ValueError(f"mixer={mixer!r} is not allowed; choose one of {MIXERS}")
    for name, seed in seeds.items():
        if not isinstance(seed, int) or seed < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {seed!r}")
    points = values["eval_points"]
    if isinstance(points, bool) or not isinstance(points, int) or not (points == 0 or points >= 2):
        raise ValueError(
            f"eval_points must be 0 (every eval_every_tokens) or >= 2, got {values['eval_points']!r}"
        )
    for name in ("train_tokens", "seq_len", "batch_size", "eval_every_tokens", "val_docs_per_language"):
        if not isinstance(values[name], int) or values[name] < 1:
            raise ValueError(f"{name} must be a positive integer, got {values[name]!r}")
    for name in ("lr_recurrent", "lr_rest", "tau"):
        if not values[name] > 0:
            raise ValueError(f"{name} must be > 0, got {values[name]!r}")
    if not isinstance(values["compiled"], bool):
        raise ValueError(f"compiled must be True or False, got {values['compiled']!r}")
    check_text_cap(values["text_cap"])
    check_editions(values["editions"])


def distill_layout(
    teacher_name: str,
    layout_name: str,
    *,
    mixer: str = "gdn",
    fa_fraction: float | None = None,
    train_tokens: int | None = None,
    seq_len: int | None = None,
    batch_size: int | None = None,
    lr_recurrent: float | None = None,
    lr_rest: float | None = None,
    tau: float | None = None,
    data_seed: int = 0,
    init_seed: int = MODEL_SEED,
    eval_every_tokens: int | None = None,
    val_docs_per_language: int | None = None,
    languages: Sequence[str] | None = None,
    device: str | torch.device | None = None,
    precision: str | None = None,
    teacher_path: str | Path | None = None,
    swa_window: int | None = None,
    compiled: bool | None = None,
    eval_points: int = 0,
    text_cap: int | None = None,
    editions: str = "one",
    progress: bool = True,
    train: bool = True,
) -> DistillRun:
    """Distil ``teacher_name`` (registry name; ``teacher_path`` = a local folder instead) into the hybrid
    ``layout_name`` with ``mixer`` ("gdn" or "swa") in the non-FA layers; cached, resumable.

    ``None`` arguments take the teacher's :data:`~hybridlib.recipes.RECIPES` values; ``languages`` (Bible codes)
    default to all 22;
    ``device`` defaults to CUDA when visible; ``precision`` "bf16" (CUDA default: autocast, teacher in bf16)
    or "fp32"; ``compiled``: on CUDA, the fast path (compiled backbones, CUDA graphs) instead of eager backbones;
    ``eval_points``: 0 validates every ``eval_every_tokens``, n >= 2 at n log-spaced token counts instead;
    ``text_cap``: tokens of unique training text (None: no cap), split across languages as a corpus of that many
    tokens splits its budget and repeated to fill ``train_tokens`` (``training_corpus``'s ``text_cap``);
    ``editions``: "one" (the held-out sets' edition of each language) or "all" (every edition the package has).
    ``train``: False finds the student in the cache (a carried record too) and raises ``FileNotFoundError`` naming
    it where it is not there, instead of training it.
    ``device``, ``teacher_path``, ``progress`` and ``train`` do not enter the cache key.
    """
    r = recipe(teacher_name)
    values = {
        k: v if v is not None else getattr(r, k)
        for k, v in {
            "fa_fraction": fa_fraction,
            "train_tokens": train_tokens,
            "seq_len": seq_len,
            "batch_size": batch_size,
            "lr_recurrent": lr_recurrent,
            "lr_rest": lr_rest,
            "tau": tau,
            "eval_every_tokens": eval_every_tokens,
            "val_docs_per_language": val_docs_per_language,
            "swa_window": swa_window,
            "compiled": compiled,
        }.items()
    } | {"eval_points": eval_points, "text_cap": text_cap, "editions": editions}
    _check_args(mixer, {"data_seed": data_seed, "init_seed": init_seed}, values)
    if mixer != "swa":
        values["swa_window"] = 0
    device, precision = _resolve_device(device, precision)
    device = rank_device(device)  # under torchrun: this rank's GPU, for the teacher the trainer does not move
    teacher, tokenizer = load(teacher_name, path=teacher_path)
    layout = _layout(teacher, layout_name, values.pop("fa_fraction"))
    settings = DistillSettings(
        teacher_name=teacher_name,
        teacher_identity=teacher_identity(teacher),
        fa_layers=layout.fa_layers,
        mixer=mixer,
        data_seed=data_seed,
        init_seed=init_seed,
        languages=tuple(languages) if languages else None,
        precision=precision,
        **values,
    )
    folder = cache_dir("students", settings.key())
    # two runs wanting this student: the second waits for the first, then reads its cache (one lock per rank)
    with file_lock(folder.with_name(f".{folder.name}.rank{os.environ.get('RANK', '0')}.lock")):
        cached = _cached_run(folder)
        if cached is not None:
            return replace(cached, layout_name=layout_name)
        if not train:
            raise FileNotFoundError(
                f"student {layout_name} ({mixer}, {values['train_tokens']:,} tokens, data_seed={data_seed}, "
                f"init_seed={init_seed}) is not in the cache ({folder}) and train=False"
            )
        card = describe(teacher_name, path=teacher_path)
        run = _distill(teacher, tokenizer, card, layout, settings, folder, device, progress, teacher_path)
        world = init_world(device)  # the trainer's (torchrun: every rank trained the same student)
        if world.is_main:
            write_digests(folder / "student")
            run.save()
            shutil.rmtree(
                folder / "train", ignore_errors=True
            )  # the checkpoint (with optimizer state) is not needed
        barrier(world)
    return replace(DistillRun.read(folder), layout_name=layout_name)  # as a later cache hit returns it


def _cached_run(folder: Path) -> DistillRun | None:
    """The finished run cached in ``folder`` (a carried one without weights too, :mod:`hybridlib.carry`), or None:
    not trained yet, or broken (``run.json`` or the student's weights do not read or match their digests), in which
    case the folder is moved aside to ``<key>.broken`` with a warning naming the file, and the student is trained
    again."""
    if not (folder / "run.json").is_file():
        return None
    remedy = f"moved to {folder.name}.broken, training the student again"
    carried = (folder / CARRIED).is_file() and not (
        folder / "student"
    ).exists()  # its record, not its weights
    try:
        run = read(folder / "run.json", lambda p: DistillRun.read(p.parent), remedy)
        if not carried:
            check_weights(folder / "student", remedy)
    except BrokenCacheError as err:
        warnings.warn(str(err))
        quarantine(folder)
        folder.mkdir()
        return None
    return run


def load_student(
    teacher_name: str, layout_name: str, *, device: str | torch.device = "cpu", **kwargs: Any
) -> PreTrainedModel:
    """The student ``distill_layout(teacher_name, layout_name, **kwargs)`` caches (trained first if absent)."""
    return distill_layout(teacher_name, layout_name, **kwargs).load_model(device)


def _corpus_batches(
    tokenizer: Any,
    card: Any,
    *,
    steps: int,
    batch_size: int,
    seq_len: int,
    languages: Sequence[str] | None,
    data_seed: int,
    text_cap: int | None = None,
    editions: str = "one",
) -> PackedBatches:
    """``steps`` batches of packed training rows (the corpus is cached by ``training_corpus``)."""
    corpus = training_corpus(
        tokenizer,
        tokens=steps * batch_size * seq_len,
        seq_len=seq_len,
        languages=languages,
        seed=data_seed,
        bos_token_id=start_token(tokenizer, card),
        text_cap=text_cap,
        editions=editions,
    )
    return PackedBatches.from_dataset(corpus, batch_size, seed=data_seed)


def prepare_data(
    teacher_name: str,
    *,
    data_seeds: Sequence[int] = (0,),
    test_docs_per_language: int,
    budgets: Sequence[int] = (),
    editions: str = "one",
    languages: Sequence[str] | None = None,
    teacher_path: str | Path | None = None,
    **overrides: Any,
) -> None:
    """Build and cache the training corpora (one per data seed) and the validation / test token ids that
    ``distill_layout`` and :func:`heldout_scores` will read, so a machine without the Bible database (the
    GPU machine) can run from a copied ``$HYBRIDLIB_CACHE``, and each language's training-text length
    (``corpus.text_tokens``, for the runs' repetition counts). ``budgets``: corpora for these ``train_tokens`` too
    (the budget curve's), of ``editions`` ("one" or "all", ``training_corpus``'s). ``overrides``: recipe fields
    (train_tokens, ...).
    The caches are keyed by the tokenizer's path too: prepare under the same ``$HYBRIDLIB_CACHE`` path."""
    r = replace(recipe(teacher_name), **overrides)
    tokenizer, card = (
        load_tokenizer(teacher_name, path=teacher_path),
        describe(teacher_name, path=teacher_path),
    )
    check_editions(editions)
    corpora = [(r.train_tokens, "one"), *((tokens, editions) for tokens in budgets)]
    for tokens, text in dict.fromkeys(corpora):
        for seed in data_seeds:
            _corpus_batches(
                tokenizer,
                card,
                steps=math.ceil(tokens / (r.batch_size * r.seq_len)),
                batch_size=r.batch_size,
                seq_len=r.seq_len,
                languages=languages,
                data_seed=seed,
                editions=text,
            )
    for text in dict.fromkeys(["one", editions]):
        text_tokens(tokenizer, languages, text)
    heldout_ids(tokenizer, card, "validation", languages, r.val_docs_per_language, r.seq_len)
    heldout_ids(tokenizer, card, "test", languages, test_docs_per_language, r.seq_len)


def _distill(
    teacher: PreTrainedModel,
    tokenizer: Any,
    card: Any,
    layout: Layout,
    s: DistillSettings,
    folder: Path,
    device: torch.device,
    progress: bool,
    teacher_path: str | Path | None,
) -> DistillRun:
    window = {"swa_window": s.swa_window} if s.mixer == "swa" else {}
    student = convert_to_hybrid(teacher, layout, s.mixer, seed=s.init_seed, **window).to(device)
    teacher = _device_teacher(s.teacher_name, teacher_path, str(device), s.precision)
    config = TrainConfig(
        batch_size=s.batch_size,
        seq_len=s.seq_len,
        total_tokens=s.train_tokens,
        lrs={"recurrent": s.lr_recurrent, "rest": s.lr_rest},
        group_patterns={"recurrent": RECURRENT_PATTERN},
        warmup_frac=WARMUP_FRAC,
        min_lr=MIN_LR_RATIO * min(s.lr_rest, s.lr_recurrent),
        precision=s.precision,
        eval_every_tokens=None if s.eval_points else s.eval_every_tokens,  # the trainer validates at the end
        seed=s.init_seed,
        out_dir=str(folder / "train"),
        checkpoint_every_s=CHECKPOINT_EVERY_S,
        progress=progress,
    )
    batches = _corpus_batches(
        tokenizer,
        card,
        steps=config.total_steps,
        batch_size=s.batch_size,
        seq_len=s.seq_len,
        languages=s.languages,
        data_seed=s.data_seed,
        text_cap=s.text_cap,
        editions=s.editions,
    )
    val_docs = heldout_ids(tokenizer, card, "validation", s.languages, s.val_docs_per_language, s.seq_len)
    evaluate = _Validator(teacher, val_docs, device, s.precision)
    initial = _initial_eval(folder / "train" / "initial.json", student, evaluate)
    compiled = (
        device.type == "cuda" and s.compiled
    )  # the fast path: + compiled backbones, CUDA graphs on one GPU
    one_process = int(os.environ.get("WORLD_SIZE", "1")) == 1
    model = DistillationModel(student, teacher, s.tau, compile=compiled, cuda_graphs=compiled and one_process)
    scheduled = (
        [_validate_at(eval_schedule(s.train_tokens, config.tokens_per_step, s.eval_points), model, evaluate)]
        if s.eval_points
        else []
    )
    steps_here: list[int] = []  # steps trained by this process (a resumed run did the others before)
    cpu0, wall0, eval_cpu0 = time.process_time(), time.perf_counter(), evaluate.cpu_s
    history = train(
        model,
        batches,
        model_loss,
        config,
        evaluate=lambda m: evaluate(m.student),
        callbacks=[_stop_if_diverged, lambda step, _: steps_here.append(step), *scheduled],
    )
    cpu = time.process_time() - cpu0 - (evaluate.cpu_s - eval_cpu0)
    wall = time.perf_counter() - wall0
    if init_world(device).is_main:  # under torchrun every rank holds the same student (DDP)
        student.save_pretrained(folder / "student")
    tokens_per_s = float(pd.Series([r["tokens_per_s"] for r in history.train[1:] or history.train]).median())
    flops = 6 * matmul_params(student) + 2 * matmul_params(teacher)
    return DistillRun(
        key=s.key(),
        path=str(folder),
        layout_name=layout.name,
        pattern=layout.pattern(),
        settings=asdict(s),
        evals=[{"step": 0, "tokens": 0, **initial}, *history.evals],
        train_loss=[(r["tokens"], r["loss"]) for r in history.train],
        grad_norm_max=max(r["grad_norm"] for r in history.train),
        tokens_trained=history.train[-1]["tokens"],
        tokens_per_s=tokens_per_s,
        flops_per_token=float(flops),
        mfu=tokens_per_s * flops / PEAK_BF16_FLOPS if device.type == "cuda" else None,
        cpu_s_per_1m_tokens=cpu / (max(1, len(steps_here)) * config.tokens_per_step) * 1e6,
        wall_s=wall,
        device=str(torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"),
        teacher_compiled=compiled,
        n_params={
            "student": sum(p.numel() for p in student.parameters()),
            "student_matmul": matmul_params(student),
            "teacher_matmul": matmul_params(teacher),
        },
        corpus=repetition(
            tokenizer,
            tokens=config.total_steps * config.tokens_per_step,
            seq_len=s.seq_len,
            languages=s.languages,
            bos_token_id=start_token(tokenizer, card),
            text_cap=s.text_cap,
            editions=s.editions,
        ),
    )


class _Validator:
    """``evaluate(student)`` for the trainer: pooled and per-language validation scores vs the teacher;
    ``cpu_s`` accumulates the CPU time spent (so training speed can exclude it)."""

    def __init__(self, teacher: nn.Module, docs: list[dict[str, Any]], device: torch.device, precision: str):
        self.teacher, self.docs, self.device, self.precision = teacher, docs, device, precision
        self.cpu_s = 0.0

    def __call__(self, student: nn.Module) -> dict[str, Any]:
        start = time.process_time()
        with _autocast(self.device, self.precision):
            frame = metrics.evaluate_pair(student, self.teacher, self.docs, batch_size=8, device=self.device)
        self.cpu_s += time.process_time() - start
        return scores_summary(frame)


def _validate_at(
    tokens: Sequence[int], model: DistillationModel, evaluate: Callable
) -> Callable[[int, _trainer.History], None]:
    """A trainer callback validating ``model.student`` after each step that ends at one of ``tokens`` but the last
    (the trainer validates at the end), appending the record to the history (checkpointed with it)."""
    due = set(tokens) - {max(tokens)}

    def callback(step: int, history: _trainer.History) -> None:
        done = history.train[-1]["tokens"]  # after this step
        if done in due:
            model.student.eval()
            with torch.no_grad():
                scores = evaluate(model.student)
            model.student.train()
            history.evals.append({"step": step, "tokens": done, **scores})

    return callback


def _initial_eval(path: Path, student: nn.Module, evaluate: Callable) -> dict[str, Any]:
    """Validation of the untrained student, kept beside the checkpoint so a resumed run reuses it."""
    if path.is_file():
        result = read_or_discard(path, lambda p: json.loads(p.read_text(encoding="utf-8")))
        if result is not MISSING:
            return result
    student.eval()
    with torch.no_grad():
        result = evaluate(student)
    write_json(path, result)
    return result


def _stop_if_diverged(step: int, history: _trainer.History) -> None:
    loss = history.train[-1]["loss"]
    if not math.isfinite(loss):
        raise FloatingPointError(
            f"distillation diverged at step {step} (loss {loss}); lower lr_recurrent / lr_rest"
        )


def heldout_scores(
    run: DistillRun,
    per_language: int,
    split: str = "test",
    *,
    device: str | torch.device | None = None,
    teacher_path: str | Path | None = None,
) -> pd.DataFrame:
    """``evaluate_pair`` frame of the trained student vs its teacher on the first ``per_language`` held-out
    chapters of ``split`` per language (cut to the run's seq_len); cached in the student's folder."""
    path = Path(run.path) / f"{split}-{per_language}.json"
    if path.is_file():
        frame = read_or_discard(path, lambda p: pd.read_json(p, orient="records"))
        if frame is not MISSING:
            return frame
    s = run.settings
    device, precision = _resolve_device(device, s["precision"])
    tokenizer = load_tokenizer(s["teacher_name"], path=teacher_path)
    card = describe(s["teacher_name"], path=teacher_path)
    docs = heldout_ids(tokenizer, card, split, s["languages"], per_language, s["seq_len"])
    teacher = _device_teacher(s["teacher_name"], teacher_path, str(device), precision)
    with _autocast(device, precision):
        frame = metrics.evaluate_pair(run.load_model(device), teacher, docs, batch_size=8, device=device)
    write_json(path, frame.to_dict("records"))
    return frame


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m hybridlib.train.distill prepare --teacher NAME [--data-seeds 0 1] [--train-tokens N]``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m hybridlib.train.distill", description=prepare_data.__doc__
    )
    parser.add_argument("command", choices=("prepare",))
    parser.add_argument("--teacher", required=True, choices=sorted(RECIPES))
    parser.add_argument("--data-seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--train-tokens", type=int)
    parser.add_argument("--test-docs-per-language", type=int, default=16)
    parser.add_argument("--budgets", type=int, nargs="+", default=[], help="also these train_tokens' corpora")
    parser.add_argument(
        "--editions", choices=EDITIONS, default="one", help="the budgets' corpora's Bible editions"
    )
    args = parser.parse_args(argv)
    overrides = {"train_tokens": args.train_tokens} if args.train_tokens else {}
    prepare_data(
        args.teacher,
        data_seeds=args.data_seeds,
        test_docs_per_language=args.test_docs_per_language,
        budgets=args.budgets,
        editions=args.editions,
        **overrides,
    )


if __name__ == "__main__":
    main()
