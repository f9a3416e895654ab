# Every target sets up what it needs: a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: setup demo test lint typecheck unit synth bench deploy clean

$(STAMP): pyproject.toml requirements/runtime.txt requirements/dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements/dev.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/hyperpod-nccl demo

lint: $(STAMP)
	$(BIN)/ruff check functions infra tests
	$(BIN)/ruff format --check functions infra tests
	$(BIN)/mypy

typecheck: $(STAMP)
	$(BIN)/mypy

test: $(STAMP)
	$(BIN)/ruff check functions infra tests
	$(BIN)/mypy
	$(BIN)/pytest -n 2 -m "not bench"

unit: $(STAMP)
	$(BIN)/pytest tests/unit

synth: $(STAMP)
	$(BIN)/python -m infra.app

bench: $(STAMP)
	$(BIN)/python -m tests.bench.run

clean:
	rm -rf $(VENV) cdk.out layers/build .pytest_cache .mypy_cache .ruff_cache
