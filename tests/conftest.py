"""Session order: tests marked ``after_notebooks`` run last, after nbval has executed the notebooks (which
rewrite ``data/results/<chapter>/seminar.json``), so they can compare the fresh results with the committed
ones read while the tests were collected. Fixture ``inductor_at_capability``: torch.compile on the CPU under the
run's ATEN_CPU_CAPABILITY."""

import os

import pytest


def pytest_collection_modifyitems(session, config, items):
    late = [item for item in items if item.get_closest_marker("after_notebooks")]
    if late:
        items[:] = [item for item in items if not item.get_closest_marker("after_notebooks")] + late


@pytest.fixture
def inductor_at_capability():
    """inductor's CPU vector width matched to ``ATEN_CPU_CAPABILITY`` for the test: inductor picks its vector ISA by
    probing the CPU, not from the capability, so under a narrower one its at::vec code does not compile (default) or
    computes NaN (avx2 on an AVX-512 CPU). inductor's own ``config.patch``: monkeypatch's undo deletes the setting
    from the config module."""
    import torch._inductor.config

    simdlen = {"default": 1, "avx2": 256, "avx512": 512}.get(os.environ.get("ATEN_CPU_CAPABILITY", ""))
    with torch._inductor.config.patch({"cpp.simdlen": simdlen} if simdlen else {}):
        yield
