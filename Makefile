# Two commands matter: `make run` (set everything up, start the app) and `make test`
# (set everything up, run ruff, mypy and the whole test suite). Both reuse .venv when it is good.
PYTHON ?= python3
VENV_PY := .venv/bin/python

.PHONY: setup run test lint typecheck pytest bench clean

setup:
	$(PYTHON) scripts/bootstrap.py --extras dev

run: setup
	$(VENV_PY) -m app

lint: setup
	$(VENV_PY) -m ruff check .
	$(VENV_PY) -m ruff format --check .

typecheck: setup
	$(VENV_PY) -m mypy

pytest: setup
	$(VENV_PY) -m pytest

test: setup
	$(VENV_PY) -m ruff check .
	$(VENV_PY) -m ruff format --check .
	$(VENV_PY) -m mypy
	$(VENV_PY) -m pytest

bench: setup
	for b in bench/*.py; do $(VENV_PY) $$b || exit 1; done

clean:
	rm -rf .venv build dist .mypy_cache .pytest_cache .ruff_cache

# The double-clickable app for this OS, in dist/ (PyInstaller; see packaging/README.md).
# `make test` never builds it; `make bundle-test` builds it when app/, packaging/ or the venv
# changed, then smoke-tests the built binary, unpacked from its archive (tests/packaging).
.PHONY: bundle bundle-test

bundle: setup
	$(VENV_PY) packaging/build.py

bundle-test: setup
	$(VENV_PY) packaging/build.py --if-needed
	EMBER_BUNDLE="$$($(VENV_PY) packaging/build.py --print-artifact)" $(VENV_PY) -m pytest tests/packaging
