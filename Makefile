# distbench: `make run` (set up, then the default sweep) and `make test` (set up, then the tests).
# `make setup` is idempotent: system packages only when missing, Python packages only when
# pyproject.toml changed since the last install; a second run takes seconds.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.distbench-installed
EXTRAS ?= test,spark,horovod,mpi

.PHONY: setup system run test bench clean

setup: system $(STAMP)

system:
	@bash scripts/setup_system.sh

$(STAMP): pyproject.toml Makefile scripts/build_horovod.sh
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip setuptools wheel
	$(BIN)/python -m pip install -q -e '.[$(EXTRAS)]'
	bash scripts/build_horovod.sh $(VENV)
	@touch $(STAMP)

run: setup
	$(BIN)/distbench run $(ARGS)

test: setup
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: setup
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) runs .pytest_cache
