# distbench: `make run` (set up, then the default sweep) and `make test` (set up, then the tests).
# `make setup` is idempotent: system packages only when missing, Python packages only when
# pyproject.toml changed since the last install, Horovod only when it was not built against
# the installed TensorFlow, Python and MPI (checked from package metadata every time, in well
# under a second); a second run takes seconds.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Where the NVIDIA driver lists GPUs, TensorFlow's and JAX's CUDA libraries too (the `gpu` extra:
# tensorflow[and-cuda] and jax[cuda12], pip packages, no system CUDA needed); its own stamp, so a machine that
# gains GPUs installs them on the next run. Without them distbench refuses to run there
# (src/distbench/gpu.py): a GPU machine is never benchmarked on its CPU unasked.
GPU_EXTRA := $(shell nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && echo ,gpu)
STAMP  := $(VENV)/.distbench-installed$(GPU_EXTRA:,%=-%)
EXTRAS ?= test,spark,horovod,mpi$(GPU_EXTRA)
# Two pytest-xdist workers, a test file each at a time: the engine tests wait on processes
# more than they compute (about 1.15 of 2 cores busy), so two at once finish the suite
# sooner even on a 2-core machine. PYTEST_WORKERS=0 runs it in one process. SOLO_TESTS run
# afterwards, alone: the emulated-cluster tests (their namespaces, bridge and veth links are
# machine-wide: with one up, a concurrent mpirun timed out) and the Horovod stall tests, whose
# rank must start training within a bound (twice it did not while another test file ran).
PYTEST_WORKERS ?= 2
SOLO_TESTS := tests/cluster tests/strategies/test_horovod_failures.py

.PHONY: setup system horovod run test bench clean

setup: system $(STAMP) horovod

system:
	@bash scripts/setup_system.sh

$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip setuptools wheel
	$(BIN)/python -m pip install -q -e '.[$(EXTRAS)]'
	@touch $(STAMP)

# Not a file target: a `pip install -U tensorflow` changes no file make could watch
# reliably, so the script compares the TensorFlow Horovod was built against with the
# installed one itself, every time, and rebuilds only on a difference.
horovod: $(STAMP)
	bash scripts/build_horovod.sh $(VENV)

run: setup
	$(BIN)/distbench run $(ARGS)

test: setup
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile $(SOLO_TESTS:%=--ignore=%) $(PYTEST_ARGS)
	$(BIN)/python -m pytest -q $(SOLO_TESTS) $(PYTEST_ARGS)

bench: setup
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) runs .pytest_cache
