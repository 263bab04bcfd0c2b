# Two commands for a newcomer: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
STAGE := build/stage/actae

.PHONY: setup demo test lint typecheck layers unit mutants bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# mypy and import-linter read packages from disk, not through the editable-install hook, so
# they check a staged tree of symlinks that has the installed layout (actae/domain, ...).
$(STAGE):
	mkdir -p $(STAGE)
	for face in __init__.py py.typed langgraph.py redaction.py; do ln -sfn ../../../actae/$$face $(STAGE)/$$face; done
	for layer in domain projections adapters; do ln -sfn ../../../$$layer $(STAGE)/$$layer; done

demo: setup
	$(BIN)/actae drill

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup $(STAGE)
	$(BIN)/mypy

layers: setup $(STAGE)
	cd build/stage && ../../$(BIN)/lint-imports ../../pyproject.toml

# Two workers: the suite waits on subprocesses, servers and a browser as much as it computes.
# A worker takes a test file at a time (tests/conftest.py).
unit: setup
	$(BIN)/pytest -n 2

test: lint typecheck layers unit

# Not part of `make test`: breaks each guard (a version check, a fingerprint part, a fence, a
# lock, a limit) in a temporary copy of the tree and checks that a test fails; prints the
# table and the kill rate (tests/mutants.py; about 18 minutes on 2 cores: it uses the
# PostgreSQL server of `make test` for the guards that exist only there, and the chaos guards
# restart a throwaway server of their own).
mutants: setup
	$(BIN)/python -m tests.mutants

# The peers (LangGraph, DBOS) are an optional extra, installed on first use.
BENCH_STAMP := $(VENV)/.bench-stamp
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

# ACTAE_BENCH_QUICK=1 make bench: small counts, to check the pipeline; its figures mean nothing
# and go to benchmarks/results/quick/. benchmarks.house reads the import graph off $(STAGE).
bench: $(BENCH_STAMP) $(STAGE)
	$(BIN)/python -m benchmarks.core
	$(BIN)/python -m benchmarks.ledger
	$(BIN)/python -m benchmarks.projections
	$(BIN)/python -m benchmarks.peers
	$(BIN)/python -m benchmarks.anatomy
	$(BIN)/python -m benchmarks.concurrency
	$(BIN)/python -m benchmarks.scaling
	$(BIN)/python -m benchmarks.instructions
	$(BIN)/python -m benchmarks.house
	$(BIN)/python -m benchmarks.report

clean:
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis
