# Two commands on a fresh machine: `make run` (set up, then serve the embedded default)
# and `make test` (set up, then run every test). Everything else here is their plumbing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test setup lint

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned to the CPU build, so the project's torch range is already met
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	$(BIN)/fairgate serve

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check .
	mkdir -p $(VENV)/mypy-path && ln -sfn ../.. $(VENV)/mypy-path/fairgate
	$(BIN)/mypy
