"""Broken artefact-cache files: each names itself in one line and is either recomputed (moved aside to
``<name>.broken``) or refused with the command that rebuilds it; the per-student lock; the resume message."""

import dataclasses
import json
import shutil
import threading
import time
from pathlib import Path

import pytest
import torch
from fake_runs import distill_run
from safetensors.torch import save_file
from test_train import Killed, _kill_at, config, tiny_batches, tiny_model

from hybridlib import integrity, memo
from hybridlib.integrity import BrokenCacheError
from hybridlib.models import load, load_tokenizer, registry
from hybridlib.models.tiny import teacher_folder
from hybridlib.train import causal_lm_loss, distill, train
from hybridlib.train.checkpoint import CHECKPOINT_NAME, load_checkpoint
from hybridlib.train.distributed import init_world
from hybridlib.train.optim import build_optimizer, build_scheduler


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _one_warning(recwarn, path: Path) -> str:
    messages = [str(w.message) for w in recwarn if str(path) in str(w.message)]
    assert len(messages) == 1, [str(w.message) for w in recwarn]
    assert "\n" not in messages[0] and "is broken" in messages[0]
    return messages[0]


def test_a_broken_memo_pickle_is_named_moved_aside_and_computed_again(tmp_path, monkeypatch, recwarn):
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path))
    calls = []
    compute = lambda: calls.append(1) or {"value": [1, 2, 3]}
    assert memo.memoized("kind", {"a": 1}, compute) == {"value": [1, 2, 3]}
    (path,) = (tmp_path / "memo" / "kind").glob("*.pkl")
    _truncate(path)
    assert memo.memoized("kind", {"a": 1}, compute) == {"value": [1, 2, 3]}
    assert len(calls) == 2 and _one_warning(recwarn, path)
    assert path.with_name(path.name + ".broken").is_file()
    assert memo.memoized("kind", {"a": 1}, compute) == {"value": [1, 2, 3]} and len(calls) == 2  # rewritten


def _optimizer_parts(model):
    cfg = config()
    optimizer = build_optimizer(model, cfg)
    return optimizer, build_scheduler(optimizer, cfg)


def test_a_truncated_checkpoint_restarts_training_and_names_the_file(tmp_path, recwarn):
    out = tmp_path / "run"
    train(
        tiny_model(),
        tiny_batches(),
        causal_lm_loss,
        config(steps=2, checkpoint_every_steps=1, out_dir=str(out)),
    )
    _truncate(out / CHECKPOINT_NAME)
    model = tiny_model()
    state = load_checkpoint(out, model, *_optimizer_parts(model), init_world(torch.device("cpu")))
    assert state is None
    _one_warning(recwarn, out / CHECKPOINT_NAME)
    assert not (out / CHECKPOINT_NAME).exists() and (out / f"{CHECKPOINT_NAME}.broken").is_file()


def test_a_resumed_run_says_from_which_step(tmp_path, capsys):
    out = str(tmp_path / "run")
    cfg = config(steps=3, checkpoint_every_steps=1, out_dir=out)
    with pytest.raises(Killed):
        train(tiny_model(), tiny_batches(), causal_lm_loss, cfg, callbacks=[_kill_at(3)])
    assert "resuming" not in capsys.readouterr().out
    train(tiny_model(), tiny_batches(), causal_lm_loss, cfg)
    assert f"resuming from step 2 of 3 ({out}/checkpoint.pt)" in capsys.readouterr().out


def _fake_run(folder: Path) -> distill.DistillRun:
    """A finished run as distill_layout caches it: run.json and a student with weights and digests."""
    (folder / "student").mkdir(parents=True, exist_ok=True)
    save_file({"w": torch.arange(4096, dtype=torch.float32)}, str(folder / "student" / "model.safetensors"))
    integrity.write_digests(folder / "student")
    run = distill_run(
        folder.name,
        "sandwich",
        [{"tokens": 0, "ce": 1.0}],
        {"mixer": "gdn", "precision": "fp32"},
        str(folder),
        512,
    )
    run.save()
    return run


@pytest.mark.parametrize("broken", ["run.json", "student/model.safetensors"])
def test_a_broken_student_is_named_and_trained_again(tmp_path, recwarn, broken):
    folder = tmp_path / "students" / "k"
    run = _fake_run(folder)
    assert distill._cached_run(folder) == run
    _truncate(folder / broken)
    assert distill._cached_run(folder) is None  # distill_layout then trains it again
    assert "training the student again" in _one_warning(recwarn, folder / broken)
    assert folder.is_dir() and not any(folder.iterdir())
    assert (folder.parent / "k.broken" / broken).is_file()


def test_a_corrupted_student_of_the_same_size_fails_its_digest(tmp_path, recwarn):
    folder = tmp_path / "k"
    _fake_run(folder)
    weights = folder / "student" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-8:] = b"\xff" * 8  # the header still fits the size: only the digest can tell
    weights.write_bytes(bytes(data))
    assert distill._cached_run(folder) is None
    assert "sha256" in _one_warning(recwarn, weights)


def test_broken_heldout_and_test_score_caches_are_computed_again(tmp_path, monkeypatch, recwarn):
    monkeypatch.setattr(distill, "cache_dir", lambda *parts: tmp_path.joinpath(*parts))
    (tmp_path / "heldout").mkdir()
    tokenizer = load_tokenizer("tiny-teacher")
    card = distill.describe("tiny-teacher")
    first = distill.heldout_ids(tokenizer, card, "validation", ["eng"], 1, 16)
    (path,) = (tmp_path / "heldout").glob("*.json")
    _truncate(path)
    assert distill.heldout_ids(tokenizer, card, "validation", ["eng"], 1, 16) == first
    assert "JSONDecodeError" in _one_warning(recwarn, path)

    run = _fake_run(tmp_path / "student-run")
    scores = Path(run.path) / "test-4.json"
    scores.write_text('[{"lang": "eng", "ce_stu')

    class Recomputing(Exception):
        pass

    def recompute(*args, **kwargs):
        raise Recomputing

    monkeypatch.setattr(distill, "_resolve_device", recompute)
    with pytest.raises(Recomputing):
        distill.heldout_scores(run, 4)
    _one_warning(recwarn, scores)


def test_truncated_or_altered_teacher_weights_name_the_file_and_the_command(tmp_path):
    folder = tmp_path / "teacher"
    shutil.copytree(teacher_folder(), folder)
    integrity.write_digests(folder)
    assert load("tiny-teacher", path=folder)[0].config.num_hidden_layers > 0
    weights = folder / "model.safetensors"
    _truncate(weights)
    with pytest.raises(BrokenCacheError) as err:
        load("tiny-teacher", path=folder)
    assert str(weights) in str(err.value) and "save the model into" in str(err.value)
    assert "\n" not in str(err.value)
    (folder / integrity.DIGESTS).unlink()  # no stored digest: the header check still finds the truncation
    with pytest.raises(BrokenCacheError, match="model.safetensors is broken"):
        load("tiny-teacher", path=folder)


def test_the_default_folders_remedy_is_the_prepare_command(tmp_path, monkeypatch):
    folder = tmp_path / "teacher"
    shutil.copytree(teacher_folder(), folder)
    _truncate(folder / "model.safetensors")
    entry = dataclasses.replace(registry._REGISTRY["tiny-teacher"], locate=lambda: folder)
    monkeypatch.setitem(registry._REGISTRY, "tiny-teacher", entry)
    with pytest.raises(
        BrokenCacheError, match=f"rm -rf {folder} && python -m hybridlib.prepare --models tiny-teacher"
    ):
        load("tiny-teacher")


def test_two_runs_wanting_one_student_train_it_once(tmp_path, monkeypatch):
    monkeypatch.setattr(distill, "cache_dir", lambda *parts: tmp_path.joinpath(*parts))
    trained = []

    def fake_distill(teacher, tokenizer, card, layout, settings, folder, *rest):
        trained.append(settings.key())
        time.sleep(1.0)  # long enough for the other thread to reach the cache
        run = _fake_run(folder)
        return dataclasses.replace(run, key=settings.key())

    monkeypatch.setattr(distill, "_distill", fake_distill)
    teacher = load("tiny-teacher")  # loaded once: transformers' loading is not thread-safe
    monkeypatch.setattr(distill, "load", lambda name, path=None: teacher)
    runs, errors = [], []

    def run_one():
        try:
            runs.append(distill.distill_layout("tiny-teacher", "sandwich", **kwargs))
        except Exception as err:  # noqa: BLE001 - reported by the assertion below
            errors.append(err)

    kwargs = {"train_tokens": 512, "device": "cpu", "progress": False}
    threads = [threading.Thread(target=run_one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(trained) == 1 and len(runs) == 2
    assert runs[0].key == runs[1].key == trained[0]
    assert json.loads((Path(runs[0].path) / "run.json").read_text())["key"] == trained[0]


def test_broken_bible_chapters_and_corpus_caches_are_built_again(tmp_path, monkeypatch, recwarn):
    from hybridlib.data import bible, corpus

    monkeypatch.setattr(bible, "cache_dir", lambda *parts: tmp_path.joinpath(*parts))
    monkeypatch.setattr(corpus, "cache_dir", lambda *parts: tmp_path.joinpath(*parts))
    bible.chapters.cache_clear()
    first = bible.chapters("eng")
    (path,) = tmp_path.glob("bible/*/eng.json")
    _truncate(path)
    bible.chapters.cache_clear()
    assert bible.chapters("eng") == first
    _one_warning(recwarn, path)

    kwargs = {"tokens": 1024, "seq_len": 32, "languages": ["eng"], "english_share": 1.0, "eos_token_id": 0}
    tokenizer = load_tokenizer("tiny-teacher")
    rows = corpus.training_corpus(tokenizer, **kwargs)["input_ids"]
    (meta,) = tmp_path.glob("corpus/*/meta.json")
    _truncate(meta)
    assert corpus.training_corpus(tokenizer, **kwargs)["input_ids"] == rows
    _one_warning(recwarn, meta)
    shutil.rmtree(meta.parent / "data")
    (meta.parent / "data").mkdir()
    with pytest.raises(BrokenCacheError, match=f"{meta.parent / 'data'} is broken .*rm -rf {meta.parent}"):
        corpus.training_corpus(tokenizer, **kwargs)
    bible.chapters.cache_clear()
