"""Records carried between machines' caches: what is packed, what is refused, and what a carried student does."""

import os
import tarfile
from pathlib import Path

import pytest

from hybridlib import carry

RECORDS = {
    "students/k1/run.json": b'{"key": "k1"}',
    "students/k1/test-16.json": b"[]",
    "alignment/a.npz": b"npz",
    "memo/lolcats_arm/m.pkl": b"pkl",
}
NOT_RECORDS = {
    "students/k1/student/model.safetensors": b"weights",
    "students/k1/train/checkpoint.pt": b"optimizer state",
    "students/k1/.run.x1.tmp.json": b"an interrupted write",
    "corpus/c.arrow": b"corpus",
}


def _cache(root, files):
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def test_pack_takes_records_only_and_unpack_marks_students_without_weights(tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    _cache(here, RECORDS | NOT_RECORDS)
    packed = carry.pack(tmp_path / "r.tgz", here)
    assert sorted(map(str, packed)) == sorted(RECORDS)
    _cache(there, {"alignment/a.npz": b"measured here"})  # never replaced by a carried copy
    restored = carry.unpack(tmp_path / "r.tgz", there)
    assert sorted(map(str, restored)) == sorted(set(RECORDS) - {"alignment/a.npz"})
    assert (there / "alignment/a.npz").read_bytes() == b"measured here"
    assert (there / "students/k1/test-16.json").read_bytes() == b"[]"
    assert not (there / "students/k1/student").exists()
    assert (there / "students/k1" / carry.CARRIED).is_file()
    assert not (here / "students/k1" / carry.CARRIED).exists()  # the trained one keeps its weights
    error = carry.missing_weights(there / "students/k1")
    assert "r.tgz" in str(error) and str(there / "students/k1") in str(error)


def test_unpack_refuses_an_archive_with_anything_but_records(tmp_path):
    _cache(tmp_path / "src", {"students/k1/student/model.safetensors": b"weights"})
    with tarfile.open(tmp_path / "dirs.tgz", "w:gz") as tar:  # tar's own folder entries are fine
        tar.add(tmp_path / "src" / "students", arcname="students", recursive=False)
    assert carry.unpack(tmp_path / "dirs.tgz", tmp_path / "dst") == []
    with tarfile.open(tmp_path / "bad.tgz", "w:gz") as tar:
        tar.add(
            tmp_path / "src/students/k1/student/model.safetensors",
            arcname="students/k1/student/model.safetensors",
        )
    with pytest.raises(ValueError, match="not records"):
        carry.unpack(tmp_path / "bad.tgz", tmp_path / "dst")
    assert not (tmp_path / "dst" / "students" / "k1").exists()
    with pytest.raises(ValueError, match="no records"):
        carry.pack(tmp_path / "empty.tgz", tmp_path / "nothing")


def test_pack_newer_takes_only_the_records_written_after_the_mark(tmp_path):
    _cache(tmp_path / "c", RECORDS | NOT_RECORDS)
    mark = tmp_path / "mark"
    mark.touch()
    os.utime(mark, (1_000_000, 1_000_000))
    for rel in RECORDS:
        os.utime(tmp_path / "c" / rel, (999_999, 999_999))  # written before the mark
    os.utime(tmp_path / "c" / "alignment/a.npz", (1_000_001, 1_000_001))
    os.utime(tmp_path / "c" / "students/k1/student/model.safetensors", (1_000_001, 1_000_001))
    assert carry.pack(tmp_path / "r.tgz", tmp_path / "c", newer=mark) == [Path("alignment/a.npz")]
    with tarfile.open(tmp_path / "r.tgz") as tar:
        assert tar.getnames() == ["alignment/a.npz"]
    os.utime(tmp_path / "c" / "alignment/a.npz", (1_000_000, 1_000_000))  # a tie is not newer
    with pytest.raises(ValueError, match="newer than"):
        carry.pack(tmp_path / "s.tgz", tmp_path / "c", newer=mark)
    with pytest.raises(FileNotFoundError, match="newer="):
        carry.pack(tmp_path / "t.tgz", tmp_path / "c", newer=tmp_path / "absent")
