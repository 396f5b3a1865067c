"""``horovod`` and ``horovod_mpi``: synchronous data parallelism with Horovod's
ring-allreduce, launched by ``horovodrun --gloo`` (Gloo controller) or by ``mpirun``
(Open MPI controller).

How it trains (every rank, :func:`distbench.strategies.horovod_rank.run_worker`):
``hvd.init()``; intra-op threads = ``training.threads`` or cores // local ranks (on an emulated
cluster, whose hosts share this machine's cores, cores // all ranks, as the other strategies); rank 0
loads the run's workload and broadcasts it (config, initial weights, hashes) so every
rank builds the same Keras 3 model from the same initial weights, then
``hvd.broadcast_variables`` from rank 0 as Horovod users do. The loop is the shared batch
schedule (:mod:`distbench.training.schedule`): each epoch's seeded permutation, ``n // G``
steps, rank ``r`` takes the ``r``-th ``G/N`` slice of every global batch; its loss is the
mean over that local slice and ``hvd.DistributedGradientTape`` averages the gradients
over the ranks (ring-allreduce), which is the gradient of the global-batch mean: the same
optimizer steps as ``single`` and ``mirrored``. The recorded ``last_train_loss`` is the
last step's global-batch loss as for ``single`` (the ranks' local means averaged by one
allreduce after training). Keras 3 traps (docs/horovod_build.md):
the tape and ``broadcast_variables`` get the backing ``tf.Variable`` of each Keras
variable (``v.value``); ``hvd.DistributedOptimizer`` in ``model.fit`` is avoided because
it silently does not average; every rank clears Keras's name counters before building
(Horovod matches collectives by tensor name); the step is traced without AutoGraph
(which would transpile Horovod's code: seconds of tracing). After training every rank
hashes its weights; the hashes are allgathered and ``replicas_in_sync_check`` is
``passed`` only if all are equal (a ``failed`` check makes the record ``failed``: "ranks
diverged"). Rank 0 takes the epoch-end snapshots and hands the :class:`TrainOutput` to a
callback (saved in the artifacts directory under the harness; saved, evaluated and
recorded by :mod:`distbench.harness.horovod_app` when a user runs it on a cluster).

How it is launched (:meth:`HorovodStrategy.launch`): the pure builders
:func:`horovodrun_command` / :func:`mpirun_command` make ``(argv, env)`` for
``distbench worker horovod --run-dir DIR --key KEY`` on ``localhost:N``; one
:func:`~distbench.launch.process.run_processes` call runs the launcher in a new
process group with the configuration's timeout and kills it on failure. Per-rank logs go
to ``DIR/logs/<key>/`` (``--output-filename``). A failure is blamed on the rank at fault,
which is not always the first to exit: a rank that stopped making progress (process
stopped, or the others waiting for it on the progress board, or named by Horovod's stall
inspector) is named, and once one has stalled for the stall limit the job is ended
(:mod:`distbench.launch.ranks`); else the first failing rank, its exit code
and its own last error (:func:`parse_launcher_failure`, :func:`engine_error`).

Availability (:func:`probe`): the TensorFlow Horovod was built against (its
``metadata.json``) must be the installed one (:func:`tensorflow_pairing`), then ``import
horovod.tensorflow`` must work in this Python and report the controller built (cached on
disk, keyed by both versions).

Test hooks: see :mod:`distbench.strategies.horovod_rank`.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distbench.config import ExperimentConfig
from distbench.contracts import PlacementKind
from distbench.launch import process
from distbench.launch.commands import (horovodrun_command, launcher_env, mpirun_command,
                                       scenario_arg, start_timeout, worker_argv)
from distbench.launch.ranks import (PROGRESS_ENV, STALL_CHECK_ENV, STALL_SHUTDOWN_ENV, HorovodJobError, RankWatch,
                                    engine_error, failure_error, new_progress_board,
                                    stall_env)
from distbench.strategies.base import Availability, LaunchContext, Strategy
from distbench.strategies.horovod_rank import configured_threads, run_worker
from distbench.strategies.registry import register
from distbench.text import clip
from distbench.training import TrainOutput


# ----------------------------------------------------------------- pure builders


def worker_command(python: str, run_dir: Path, key: str | None = None,
                   config_file: str | None = None, scenario: Any = None, threads: int = 0) -> list[str]:
    """argv of one rank: ``PYTHON -m distbench worker horovod --run-dir DIR [--key K] [--config F]
    [--scenario JSON] [--threads T]`` (a straggler :class:`~distbench.config.scenario.Scenario`;
    ``threads``: intra-op threads of every rank, 0 = ``training.threads`` or cores // local ranks)."""
    return worker_argv("horovod", run_dir, ("--key", key), ("--config", config_file),
                       ("--scenario", scenario_arg(scenario)), ("--threads", str(threads) if threads else None),
                       python=python)


# ------------------------------------------------------------------- availability
_PROBES: dict[str, Availability] = {}
_PROBE_LOCK = threading.Lock()


_BUILD_PROBE = """\
import json, horovod, horovod.tensorflow as hvd
ops = {"NCCL": hvd.nccl_built(), "DDL": hvd.ddl_built(), "CCL": hvd.ccl_built(), "MPI": hvd.mpi_built(),
       "Gloo": hvd.gloo_built()}
print("distbench-horovod-build " + json.dumps({
    "version": horovod.__version__, "frameworks": {"TensorFlow": True},
    "controllers": {"MPI": bool(hvd.mpi_built()), "Gloo": bool(hvd.gloo_built())},
    "tensor ops": {k: bool(v) for k, v in ops.items()}}))
"""
_BUILD_MARK = "distbench-horovod-build "


def parse_build_probe(text: str) -> dict[str, Any]:
    """The build description the probe printed: ``{"version": "0.28.1", "frameworks":
    {"TensorFlow": True}, "controllers": {"MPI": bool, "Gloo": bool}, "tensor ops": {"NCCL":
    bool, "DDL": bool, "CCL": bool, "MPI": bool, "Gloo": bool}}`` (what ``horovodrun
    --check-build`` shows for TensorFlow, read in one import). Empty when ``text`` holds
    no such line or it is not a JSON object (other output lines are ignored)."""
    for line in reversed(text.splitlines()):
        if line.startswith(_BUILD_MARK):
            try:
                got = json.loads(line[len(_BUILD_MARK):])
            except ValueError:
                return {}
            return got if isinstance(got, dict) else {}
    return {}


def find_horovodrun() -> str | None:
    """``horovodrun`` next to this interpreter (the virtualenv), else on ``PATH``."""
    local = Path(sys.executable).parent / "horovodrun"
    return str(local) if local.exists() else shutil.which("horovodrun")


def probe(controller: str) -> Availability:
    """Whether Horovod can train TensorFlow here with ``controller`` (``gloo`` | ``mpi``).

    Real probe: ``horovod`` importable and built against the installed TensorFlow
    (:func:`tensorflow_pairing`, read from package metadata: nothing is imported), then
    ``import horovod.tensorflow`` in a child of this Python (cached,
    :func:`cached_build_probe`) must succeed and its build flags must include the
    controller; ``horovod`` also needs ``horovodrun``, ``horovod_mpi`` ``mpirun`` and an rsh
    agent (``ssh``/``rsh``, which Open MPI wants even on one host) on ``PATH``.

    Returns:
        :class:`Availability`; when ok, ``reason`` summarises the build (:func:`build_summary`).
    """
    spec = importlib.util.find_spec("horovod")
    if spec is None:
        return Availability(False, "horovod is not installed in this Python: run 'bash scripts/build_horovod.sh "
                                   ".venv' (make setup does)")
    package = horovod_package_dir()
    mismatch = tensorflow_pairing(package).problem() if package else ""
    if mismatch:
        return Availability(False, mismatch)
    if controller == "gloo" and find_horovodrun() is None:
        return Availability(False, "horovodrun not found next to this Python or on PATH (reinstall horovod)")
    python = sys.executable
    with _PROBE_LOCK:  # horovod and horovod_mpi are probed in parallel threads: one probe for both
        if python not in _PROBES:
            _PROBES[python] = cached_build_probe(python, package or Path(spec.origin).parent)
    built = _PROBES[python]
    if not built.ok:
        return built
    flags = parse_build_probe(built.reason)
    name = {"gloo": "Gloo", "mpi": "MPI"}[controller]
    if not flags.get("controllers", {}).get(name):
        return Availability(False, f"Horovod was built without the {name} controller (hvd.{name.lower()}_built() "
                                   f"is False); rebuild with scripts/build_horovod.sh"
                                   + (" after installing Open MPI" if controller == "mpi" else ""))
    if controller == "mpi" and shutil.which("mpirun") is None:
        return Availability(False, "mpirun not found on PATH: install Open MPI (apt-get install openmpi-bin; "
                                   "scripts/setup_system.sh does)")
    if controller == "mpi" and not (shutil.which("ssh") or shutil.which("rsh")):
        return Availability(False, "Open MPI's mpirun needs an rsh agent (ssh or rsh) on PATH even on one host: "
                                   "install openssh-client (scripts/setup_system.sh does)")
    return Availability(True, build_summary(flags))


def build_summary(flags: dict[str, Any]) -> str:
    """One line from :func:`parse_build_probe`'s result, e.g. ``Horovod 0.28.1 build:
    frameworks TensorFlow; controllers MPI, Gloo; tensor ops MPI, Gloo`` (what ``distbench
    env`` shows for an available Horovod strategy)."""
    parts = []
    for title in ("frameworks", "controllers", "tensor ops"):
        names = [n for n, built in (flags.get(title) or {}).items() if built]
        parts.append(f"{title} {', '.join(names) or 'none'}")
    return f"Horovod {flags.get('version', '?')} build: " + "; ".join(parts)


def cache_dir() -> Path:
    """distbench's per-user cache folder (``$XDG_CACHE_HOME/distbench``, else ``~/.cache/distbench``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "distbench"


def cached_build_probe(python: str, package_dir: Path, cache: Path | None = None) -> Availability:
    """:func:`_build_probe`, remembered on disk for as long as the Horovod install is unchanged.

    The probe imports TensorFlow (about 5 s on a small machine); without the cache every
    ``distbench run``/``env`` would pay it. A successful result is stored in
    ``cache/horovod-build-<python's hash>.json`` (one file per interpreter, so two
    virtualenvs do not evict each other's answer) under a key made of ``python``, the path, size and
    modification time of every compiled library (``*.so``) under ``package_dir``, its
    ``metadata.json`` (the TensorFlow Horovod was built against), the installed
    TensorFlow's version and this Python's version, so a rebuilt or reinstalled Horovod,
    another TensorFlow or another Python is probed afresh; failures are never cached. An
    unreadable or corrupt cache file is ignored and rewritten.

    Args:
        python: the interpreter whose ``import horovod.tensorflow`` is probed (the ranks').
        package_dir: the installed ``horovod`` package folder.
        cache: cache folder (default :func:`cache_dir`).

    Returns:
        The :class:`Availability` of :func:`_build_probe` (fresh or remembered).
    """
    import hashlib

    libs = sorted(str(p) for p in package_dir.rglob("*.so"))
    try:
        record = (package_dir / "metadata.json").read_text()
    except OSError:
        record = ""
    sig = [python, f"tensorflow={installed_tensorflow()}", f"python={sys.version}", f"metadata.json={record}"]
    sig += [f"{p}:{os.stat(p).st_size}:{os.stat(p).st_mtime_ns}" for p in libs]
    key = hashlib.sha256("\n".join(sig).encode()).hexdigest()
    path = (cache or cache_dir()) / f"horovod-build-{hashlib.sha256(python.encode()).hexdigest()[:12]}.json"
    try:
        saved = json.loads(path.read_text())
        if isinstance(saved, dict) and saved.get("key") == key and isinstance(saved.get("output"), str) \
                and parse_build_probe(saved["output"]):
            return Availability(True, saved["output"])
    except (OSError, ValueError):
        pass
    result = _build_probe(python)
    if result.ok and libs:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"key": key, "output": result.reason}))
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only home only costs the next run the probe again
    return result


def _build_probe(python: str) -> Availability:
    """``import horovod.tensorflow`` in a child ``python`` and read the build flags it prints
    (:data:`_BUILD_PROBE`: one TensorFlow import, where ``horovodrun --check-build`` spawns
    one per framework and flag, ~30 s on 2 cores); ok carries the printed line as its
    ``reason``, a failure the import's own error and the fix."""
    env = launcher_env(python, {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    try:
        cp = subprocess.run([python, "-c", _BUILD_PROBE], capture_output=True, text=True, timeout=180, env=env,
                            stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Availability(False, f"probing the Horovod build (import horovod.tensorflow) failed: {e}")
    if cp.returncode != 0:
        why = engine_error(cp.stderr) or f"exit code {cp.returncode}"
        return Availability(False, f"import horovod.tensorflow fails here: {why}; {REBUILD_HINT}")
    line = next((ln for ln in reversed(cp.stdout.splitlines()) if ln.startswith(_BUILD_MARK)), "")
    if not parse_build_probe(line):
        tail = cp.stdout.strip().splitlines()[-1:] or [""]
        return Availability(False, f"probing the Horovod build printed no build flags: {clip(tail[0], 200)}")
    return Availability(True, line)


# ------------------------------------------------------ TensorFlow pairing
TF_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu")
"""Distributions that install the ``tensorflow`` module, in the order scripts/build_horovod.sh reads them."""
REBUILD_HINT = "rebuild it with 'make setup' (or 'bash scripts/build_horovod.sh .venv')"


def installed_tensorflow() -> str | None:
    """The installed TensorFlow's version from package metadata (TensorFlow is not imported), or None."""
    for name in TF_DISTRIBUTIONS:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def horovod_package_dir() -> Path | None:
    """The installed ``horovod`` package folder, found without importing it (None if unknown)."""
    spec = importlib.util.find_spec("horovod")
    places = list(getattr(spec, "submodule_search_locations", None) or [])
    return Path(places[0]) if places else None


def same_version(a: str, b: str) -> bool:
    """Whether two version strings name the same release (PEP 440: ``2.22.0-rc1`` = ``2.22.0rc1``)."""
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return a == b
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


@dataclass(frozen=True)
class BuildPairing:
    """Which TensorFlow the installed Horovod was built against, and which is installed.

    Horovod's build writes the TensorFlow version it compiled against into
    ``horovod/metadata.json`` (``{"tensorflow": "2.21.0", ...}``; ``import
    horovod.tensorflow`` checks it too, but only after importing TensorFlow). Its compiled
    ops only load with that TensorFlow, so a different one means a rebuild.

    Attributes:
        horovod: the installed Horovod's version (None if unknown).
        built_against: the TensorFlow version in ``metadata.json`` (None if it names none).
        installed: the installed TensorFlow's version (None if not installed).
        record: the ``metadata.json`` path ("" if there is none).
    """

    horovod: str | None
    built_against: str | None
    installed: str | None
    record: str

    def describe(self) -> str:
        """``Horovod 0.28.1 built against TensorFlow 2.21.0; installed 2.21.0`` (what ``distbench env`` shows)."""
        built = (f"built against TensorFlow {self.built_against}" if self.built_against
                 else "built without TensorFlow" if self.record else "TensorFlow it was built against unknown")
        return f"Horovod {self.horovod or '?'} {built}; installed {self.installed or 'none'}"

    def problem(self) -> str:
        """Why Horovod cannot train with the installed TensorFlow, or "" (also when the
        record is missing: then the import probe decides)."""
        if self.installed is None:
            return "TensorFlow is not installed in this Python: pip install tensorflow (make setup does)"
        if not self.record:
            return ""
        if self.built_against is None:
            return (f"Horovod {self.horovod or '?'} was built without TensorFlow ({self.record} names none): "
                    f"{REBUILD_HINT}")
        if not same_version(self.built_against, self.installed):
            return (f"Horovod {self.horovod or '?'} was built against TensorFlow {self.built_against} but TensorFlow "
                    f"{self.installed} is installed (its compiled ops only load with the TensorFlow they were built "
                    f"against): {REBUILD_HINT}")
        return ""


def tensorflow_pairing(package_dir: Path) -> BuildPairing:
    """Read :class:`BuildPairing` from the ``horovod`` package at ``package_dir`` and the
    installed distributions' metadata (cheap: nothing is imported). An unreadable
    ``metadata.json`` counts as missing."""
    import json

    try:
        horovod_version: str | None = importlib.metadata.version("horovod")
    except importlib.metadata.PackageNotFoundError:
        horovod_version = None
    record = package_dir / "metadata.json"
    try:
        meta = json.loads(record.read_text())
        built = meta.get("tensorflow") if isinstance(meta, dict) else None
        found = str(record) if isinstance(meta, dict) else ""
    except (OSError, ValueError):
        built, found = None, ""
    return BuildPairing(horovod_version, str(built) if built else None, installed_tensorflow(), found)


# ----------------------------------------------------------------------- strategy
class HorovodStrategy(Strategy):
    """Horovod ring-allreduce on ``workers`` ranks of this machine."""

    controller = "gloo"
    needs = ("Horovod built against the installed TensorFlow on every host (cmake, a C++ compiler), and "
             "horovodrun with passwordless ssh between the hosts")
    worker_entries = {"horovod": "distbench.harness.horovod_app:command"}
    run_rank = staticmethod(run_worker)
    configured_threads = staticmethod(configured_threads)

    @classmethod
    def builds(cls) -> list[str]:
        """The TensorFlow Horovod was built against and the installed one (:func:`tensorflow_pairing`)."""
        package = horovod_package_dir()
        return [tensorflow_pairing(package).describe()] if package else []

    def is_available(self, config: ExperimentConfig, workers: int) -> Availability:
        """See :func:`probe` (cached per process)."""
        return probe(self.controller)

    def launch(self, ctx: LaunchContext) -> TrainOutput:
        """Run ``ctx.workers`` ranks under the launcher, return rank 0's output.

        Horovod's stall inspector is set from the configuration's timeout
        (:func:`~distbench.launch.ranks.stall_env`), the ranks record the
        steps they start on a progress board, and a
        :class:`~distbench.launch.ranks.RankWatch` ends the job once a rank
        has been stopped, or waited for, that long: a stalled job ends naming the rank.

        Raises:
            StrategyUnavailable: never here (the harness probes first).
            HorovodJobError: a rank or the launcher failed, a rank stalled, or the time
                ran out; ``failed_process`` names the rank at fault.
        """
        pl = ctx.placement
        python = sys.executable
        # emulated hosts are this machine: its cores are shared by all ranks, as every other
        # strategy's processes share them there, not by each host's local ranks alone
        threads = ctx.threads_per_process(ctx.workers) if pl.kind == PlacementKind.EMULATED else 0
        program = worker_command(pl.python, ctx.run_dir, ctx.key, scenario=ctx.scenario, threads=threads)
        out_dir = ctx.log_dir
        if out_dir.exists():
            shutil.rmtree(out_dir)
        out_dir.mkdir(parents=True)
        hosts = pl.hosts_arg(ctx.workers)
        board = new_progress_board(out_dir / "progress.int64", ctx.workers)
        base = {**os.environ, PROGRESS_ENV: str(board)}
        for k, v in stall_env(ctx.timeout_s).items():  # a user's own HOROVOD_STALL_* settings win
            base.setdefault(k, v)
        if self.controller == "gloo":
            extra, base = pl.horovodrun_args(base)
            argv, env = horovodrun_command(ctx.workers, hosts, program, out_dir, start_timeout(ctx.timeout_s),
                                           python, base_env=base, options=extra)
            name = "horovodrun"
        else:
            argv, env = mpirun_command(ctx.workers, hosts, program, out_dir, python, base_env=base,
                                       mpirun=shutil.which("mpirun") or "mpirun")
            argv = argv[:1] + pl.mpirun_args() + argv[1:]
            name = "mpirun"
        log = out_dir / f"{name}.log"
        limits = []
        for var in (STALL_SHUTDOWN_ENV, STALL_CHECK_ENV):
            try:
                limits.append(float(env[var]))
            except ValueError:
                limits.append(0.0)  # Horovod ignores a value it cannot read; so does the watch
        watch = RankWatch(program[1:], limits[0], board, quiet_s=max(5.0, limits[1]))
        group = process.run_processes([process.ProcSpec(name, argv, env, log)], ctx.timeout_s, watch=watch)
        if not group.ok:
            error = failure_error(name, group, log, out_dir, ctx.timeout_s, watch)
            watch.kill_leftovers()  # a stopped rank never acts on its launcher's SIGTERM
            raise error
        try:
            out = TrainOutput.load(ctx.artifacts_dir)
        except (OSError, ValueError, KeyError) as e:
            raise HorovodJobError(f"{name} exited 0 but rank 0 left no readable result in {ctx.artifacts_dir}: "
                                  f"{e}", "rank 0") from None
        out.extra.update(pl.describe({f"rank {r}": r for r in range(ctx.workers)}))
        return out


@register
class HorovodGloo(HorovodStrategy):
    """Horovod over Gloo, launched by ``horovodrun --gloo``."""

    name = "horovod"
    description = "Horovod ring-allreduce, horovodrun --gloo (Gloo controller), one rank per worker"
    controller = "gloo"


@register
class HorovodMPI(HorovodStrategy):
    """Horovod over Open MPI, launched by ``mpirun``."""

    name = "horovod_mpi"
    description = "Horovod ring-allreduce, mpirun (Open MPI controller), one rank per worker"
    controller = "mpi"
    needs = ("Horovod built with MPI support against the installed TensorFlow, and Open MPI on every host, "
             "started by mpirun with passwordless ssh between the hosts")
