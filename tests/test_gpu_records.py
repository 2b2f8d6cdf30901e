"""The H200 records committed under ``data/gpu_memo/<frozen commit>/`` (a GPU campaign's students, SoftCKA curves and
first-FA measurements) are found by this checkout: their keys hash the sources of the frozen commit
(``codes.json``, written by ``tools/offline_gpu/freeze.sh``), so an edit of those sources here would orphan them and
the chapters would train the students again; and the gpu preset's layout chapter asks for exactly these students."""

import json
import tarfile
from pathlib import Path

import pytest

from hybridlib.campaign import record_codes
from hybridlib.findings import chapter
from hybridlib.paths import REPO_ROOT
from hybridlib.recipes import replicate_seeds
from hybridlib.train.distill import DistillSettings

COMMITS = sorted(p for p in (REPO_ROOT / "data" / "gpu_memo").iterdir() if p.is_dir())
#: the layout chapter's parameters a student's settings hold as they are
SAME = ("teacher", "seq_len", "batch_size", "lr_recurrent", "lr_rest", "precision")


def student_records(folder: Path) -> dict[str, dict]:
    """Student key (its folder's name) -> its ``run.json``, of every records archive in ``folder``."""
    out = {}
    for archive in sorted(folder.glob("records-*.tgz")):
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                parts = Path(member.name).parts
                if len(parts) == 3 and parts[0] == "students" and parts[2] == "run.json":
                    out[parts[1]] = json.load(tar.extractfile(member))
    return out


def test_records_are_committed_with_their_codes():
    assert COMMITS, "no data/gpu_memo/<commit>/"
    for folder in COMMITS:
        assert (folder / "codes.json").is_file() and list(folder.glob("records-*.tgz")), folder.name


@pytest.mark.parametrize("folder", COMMITS, ids=[p.name[:8] for p in COMMITS])
def test_the_records_sources_are_this_checkout_s(folder):
    frozen = json.loads((folder / "codes.json").read_text())
    changed = {k: (v, record_codes()[k]) for k, v in frozen.items() if record_codes()[k] != v}
    assert not changed, (
        f"sources keying the records of {folder.name[:8]} changed here (frozen, now): {changed}; "
        "hybridlib.campaign.record_codes names the modules"
    )


@pytest.mark.parametrize("folder", COMMITS, ids=[p.name[:8] for p in COMMITS])
def test_every_student_is_keyed_as_the_gpu_preset_asks_for_it(folder):
    records = student_records(folder)
    assert records
    params = chapter("layout_distillation").resolve("gpu")
    seeds = replicate_seeds(params["data_seed"], max(params["seeds"], params["budget_seeds"]))
    for key, record in records.items():
        settings = record["settings"]
        assert record["key"] == key == DistillSettings(**settings).key()
        asked = {"teacher": settings["teacher_name"]} | settings
        assert {k: asked[k] for k in SAME} == {k: params[k] for k in SAME}, key
        assert settings["train_tokens"] in {params["train_tokens"], *params["budgets"]}, key
        assert {"data_seed": settings["data_seed"], "init_seed": settings["init_seed"]} in seeds, key
