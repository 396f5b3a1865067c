"""Shared test helpers: the ``requires`` marker helper, the distbench CLI runner, and the
``--long`` option (full-size variants of the heaviest tests, kept out of ``make test``'s
time budget; ``pytest --long`` runs them)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

if os.environ.get("PYTEST_XDIST_WORKER"):
    # an xdist worker gets COLUMNS=80 and LINES=24 set for it; the distbench commands the tests
    # run would then lay their output out for an 80-column terminal instead of a pipe
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

QUICK_OPTIMIZERS = ["downpour", "aeasgd", "averaging"]  # one of each kind: delta (async), elastic (async), sync
ALL_OPTIMIZERS = ["downpour", "adag", "dynsgd", "aeasgd", "eamsgd", "easgd", "averaging"]


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--long``: run the full-size variants (every parameter-server optimizer on every
    engine, 32 clients x 500 cycles on 1 M parameters, 100,000 fuzzed frames)."""
    parser.addoption("--long", action="store_true", default=False,
                     help="run the full-size variants of the heaviest tests (about 15 minutes more)")


@pytest.fixture
def optimizers(request: pytest.FixtureRequest) -> list[str]:
    """The parameter-server optimizers an engine test runs: all seven with ``--long``,
    else one of each kind (:data:`QUICK_OPTIMIZERS`)."""
    return ALL_OPTIMIZERS if request.config.getoption("--long") else QUICK_OPTIMIZERS


def requires(*, gpu: bool = False, tpu: bool = False, executable: str | None = None,
             module: str | None = None) -> pytest.MarkDecorator:
    """Skip a test with the exact missing requirement (a GPU, a TPU, a program, a module).

    Only for things this machine may genuinely lack; never for something it can run.
    """
    missing = []
    if gpu and not shutil.which("nvidia-smi"):
        missing.append("a GPU (nvidia-smi not found)")
    if tpu and not os.environ.get("TPU_NAME"):
        missing.append("a TPU (TPU_NAME unset)")
    # the launchers run with this interpreter's bin directory first on PATH (launcher_env)
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    if executable and not shutil.which(executable, path=search):
        missing.append(f"the program {executable!r} on PATH or next to {sys.executable}")
    if module:
        import importlib.util

        if importlib.util.find_spec(module) is None:
            missing.append(f"the Python module {module!r}")
    return pytest.mark.skipif(bool(missing), reason="requires " + ", ".join(missing))


SHARED_SWEEP = ("single", "mirrored", "multi_worker_mirrored", "horovod", "horovod_mpi", "tf_ps", "mpi_ps:downpour")
"""The strategies of :func:`shared_sweep` (the two needing ``mpirun`` only where it exists)."""


@pytest.fixture(scope="session")
def shared_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run directory of one ``distbench run`` (digits, 2 workers, 3 epochs) of
    :data:`SHARED_SWEEP`, shared by every test that only reads a healthy sweep's records
    (record semantics, Horovod vs single): one sweep instead of one per test module."""
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    names = [s for s in SHARED_SWEEP if shutil.which("mpirun", path=search) or "mpi" not in s]
    if os.environ.get("PYTEST_XDIST_WORKER"):  # one sweep for all workers of this session (xdist's recipe)
        base = tmp_path_factory.getbasetemp().parent / "shared-sweep"
        base.mkdir(exist_ok=True)
    else:
        base = tmp_path_factory.mktemp("shared-sweep")
    out, done = base / "run", base / "done"
    with open(base / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits; released on close, also if this one dies
        if not done.exists():
            shutil.rmtree(out, ignore_errors=True)  # a worker that died mid-sweep
            cp = distbench("run", "--strategies", ",".join(names), "--workers", "2", "--epochs", "3",
                           "--repeats", "1", "--out", str(out))
            assert cp.returncode == 0, cp.stderr[-3000:]
            done.touch()
    return out


def distbench(*args: str, env: dict[str, str] | None = None, timeout: float = 600,
              cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m distbench ARGS`` and return the completed process (text output)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "distbench", *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=cwd)


def pids_with(text: str) -> list[int]:
    """PIDs (other than this test process) whose command line contains ``text``."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid():
            try:
                if text in (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    out.append(int(p.name))
            except OSError:
                pass
    return out
