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
