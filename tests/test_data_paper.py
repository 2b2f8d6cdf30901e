"""The paper preset's hub loaders, on local fixtures in the hub schema, and their offline failure."""

from __future__ import annotations

from pathlib import Path

import datasets
import huggingface_hub.constants
import pytest

from hybridlib.data import PaperDataUnavailable, load_fineweb2, load_flores

FIXTURES = Path(__file__).parent / "fixtures" / "paper_data"
FINEWEB = {
    "tel": FIXTURES / "fineweb2" / "tel_Telu.test.jsonl",
    "yor": FIXTURES / "fineweb2" / "yor_Latn.test.jsonl",
}
FLORES = {
    code: FIXTURES / "flores_plus" / f"{config}.devtest.jsonl"
    for code, config in (("eng", "eng_Latn"), ("tel", "tel_Telu"), ("cmn_hans", "cmn_Hans"))
}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def test_fineweb2_from_local_files():
    docs = load_fineweb2(["tel", "yor"], "test", data_files=FINEWEB, max_documents=2)
    assert docs.column_names == ["lang", "doc_id", "text"]
    assert docs["lang"] == ["tel", "tel", "yor", "yor"]
    assert docs["doc_id"][0] == "<urn:uuid:fixture-tel_Telu-0>"


def test_flores_from_local_files_is_sorted_and_parallel():
    flores = load_flores(["eng", "tel", "cmn_hans"], data_files=FLORES)
    assert flores.column_names == ["lang", "id", "text"] and len(flores) == 9
    assert flores["id"][:3] == [1, 2, 3] and flores["text"][0] == "The library opens at nine in the morning."


def test_flores_refuses_non_parallel_files():
    with pytest.raises(ValueError, match="not parallel"):
        load_flores(["eng", "tel"], data_files={"eng": FLORES["eng"], "tel": FINEWEB["tel"]})


def test_offline_without_local_files_fails_fast_with_the_reason():
    with pytest.raises(
        PaperDataUnavailable, match=r"`paper` preset needs the Hugging Face hub.*tel_Telu.*HF_HUB_OFFLINE"
    ):
        load_fineweb2(["tel"], "test")
    with pytest.raises(PaperDataUnavailable, match=r"flores_plus config 'cmn_Hans'"):
        load_flores(["cmn_hans"])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: load_fineweb2(["tel"], "dev"), "split must be one of"),
        (lambda: load_flores(["eng"], "test"), "split must be one of"),
        (lambda: load_fineweb2(["eng"], "test"), "only a train split"),
        (lambda: load_fineweb2(["tel"], data_files={"tel": "x.txt"}), "data_files must all be one of"),
    ],
)
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()
