"""Session set-up. Canonical runs in this session (nbval's notebooks) write their results to a temporary folder
(``$HYBRIDLIB_RESULTS_DIR``, set here unless the caller set it), never to the tracked ``data/results``. Tests marked
``after_notebooks`` run last, after nbval has executed the notebooks, so they can compare those fresh results with
the committed ones. Fixture ``inductor_at_capability``: torch.compile on the CPU under the run's
ATEN_CPU_CAPABILITY."""

import atexit
import os
import shutil
import tempfile

import pytest

from hybridlib.results import RESULTS_ENV

if not os.environ.get(RESULTS_ENV):  # before any kernel starts: nbval's kernels inherit it
    os.environ[RESULTS_ENV] = tempfile.mkdtemp(prefix="hybridlib-results-")
    atexit.register(shutil.rmtree, os.environ[RESULTS_ENV], ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks set here
def pytest_collection_modifyitems(session, config, items):
    for item in items:
        if item.path.suffix == ".ipynb":  # nbval's cells
            item.add_marker(pytest.mark.notebook)
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


@pytest.fixture
def book_style():
    """The book's plot style (``hybridlib.style.apply``) for one test, matplotlib's settings restored and its
    figures closed after it (a figure test module: ``pytestmark = pytest.mark.usefixtures("book_style")``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hybridlib import style

    with matplotlib.rc_context():
        style.apply()
        yield
    plt.close("all")
