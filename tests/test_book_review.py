"""tools/book_review.py: a page's weight is its HTML plus the local assets it loads, counted once each."""

import importlib.util

import pytest

from hybridlib.paths import REPO_ROOT

_spec = importlib.util.spec_from_file_location("book_review", REPO_ROOT / "tools" / "book_review.py")
review = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(review)


def test_page_weight_counts_local_assets_once_by_kind(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "page.html").write_bytes(b"x" * 100)
    (tmp_path / "_images").mkdir()
    (tmp_path / "_images" / "fig 1.png").write_bytes(b"x" * 50)
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "a.css").write_bytes(b"x" * 30)
    base = "http://127.0.0.1:8000"
    urls = [
        f"{base}/_images/fig%201.png",
        f"{base}/_images/fig%201.png",  # loaded twice, downloaded once
        f"{base}/_static/a.css",
        f"{base}/_static/missing.js",  # not in the build: the browser test reports it, not the weight
        "https://cdn.example.org/lib.js",  # not local
    ]
    assert review.page_weight(tmp_path, base, urls, "book/page") == {
        "html": 100,
        "images": 50,
        "scripts_styles": 30,
        "total": 180,
    }


def test_review_refuses_pages_missing_from_the_build(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"pages=\['book/nope'\] are not in the build"):
        review.review(tmp_path, tmp_path / "out", ["book/nope"])
