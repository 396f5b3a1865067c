"""``horovod`` and ``horovod_mpi``: synchronous data parallelism with Horovod's
ring-allreduce, launched by ``horovodrun --gloo`` (Gloo controller) or by ``mpirun``
(Open MPI controller).

How it trains (every rank, :func:`distbench.strategies.horovod_rank.run_worker`):
``hvd.init()``; intra-op threads = ``training.threads`` or cores // local ranks; rank 0
loads the run's workload and broadcasts it (config, initial weights, hashes) so every
rank builds the same Keras 3 model from the same initial weights, then
``hvd.broadcast_variables`` from rank 0 as Horovod users do. The loop is the shared batch
schedule (:mod:`distbench.training.schedule`): each epoch's seeded permutation, ``n // G``
steps, rank ``r`` takes the ``r``-th ``G/N`` slice of every global batch; its loss is the
mean over that local slice and ``hvd.DistributedGradientTape`` averages the gradients
over the ranks (ring-allreduce), which is the gradient of the global-batch mean: the same
optimizer steps as ``single`` and ``mirrored``. Keras 3 traps (docs/horovod_build.md):
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
:func:`~distbench.strategies.launchers.run_processes` call runs the launcher in a new
process group with the configuration's timeout and kills it on failure. Per-rank logs go
to ``DIR/logs/<key>/`` (``--output-filename``); a failure is reported with the failing
rank, its exit code and its log tail (:func:`parse_launcher_failure`).

Test hooks: see :mod:`distbench.strategies.horovod_rank`.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from distbench.config import ConfigError, ExperimentConfig
from distbench.strategies import launchers
from distbench.strategies.base import Availability, LaunchContext, Strategy
from distbench.strategies.registry import register
from distbench.training import TrainOutput

MPI_EXPORTS = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "TF_CPP_MIN_LOG_LEVEL",
               "PYTHONUNBUFFERED", "KERAS_BACKEND", "OMP_NUM_THREADS")
"""Variables ``mpirun -x`` forwards to the ranks when set (plus every ``DISTBENCH_*`` and
``HOROVOD_*`` variable); on one host the ranks inherit mpirun's environment anyway,
across hosts only exported variables arrive."""
EXPORT_PREFIXES = ("DISTBENCH_", "HOROVOD_")


# ----------------------------------------------------------------- pure builders
def localhost_hosts(ranks: int) -> str:
    """The ``-H`` value for ``ranks`` slots on this machine: ``localhost:N``.

    Raises:
        ConfigError: ``ranks`` < 1.
    """
    if ranks < 1:
        raise ConfigError(f"Horovod needs at least 1 rank, got {ranks}")
    return f"localhost:{ranks}"


def worker_command(python: str, run_dir: Path, key: str | None = None,
                   config_file: str | None = None) -> list[str]:
    """argv of one rank: ``PYTHON -m distbench worker horovod --run-dir DIR [--key K] [--config F]``."""
    argv = [python, "-m", "distbench", "worker", "horovod", "--run-dir", str(run_dir)]
    if key:
        argv += ["--key", key]
    if config_file:
        argv += ["--config", str(config_file)]
    return argv


def launcher_env(python: str, base_env: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a launcher and its ranks: :func:`launchers.child_env` of
    ``base_env`` with the directory of ``python`` (the virtualenv's ``bin``) first on
    ``PATH``, so ``horovodrun``/``mpirun`` and their ranks find this interpreter."""
    env = launchers.child_env(None, base_env)
    bindir = str(Path(python).parent)
    parts = [p for p in env.get("PATH", "").split(os.pathsep) if p]
    if not parts or parts[0] != bindir:
        env["PATH"] = os.pathsep.join([bindir] + [p for p in parts if p != bindir])
    return env


def horovodrun_command(ranks: int, hosts: str, program: list[str], output_dir: Path, start_timeout_s: int,
                       python: str, base_env: dict[str, str] | None = None,
                       horovodrun: str = "horovodrun") -> tuple[list[str], dict[str, str]]:
    """``horovodrun`` with the Gloo controller running ``program`` on ``ranks`` ranks.

    Args:
        ranks: number of ranks (``-np``).
        hosts: ``-H`` value, e.g. ``localhost:2`` or ``host1:2,host2:2``.
        program: argv every rank runs (e.g. :func:`worker_command`).
        output_dir: ``--output-filename``: per-rank ``rank.<r>/stdout|stderr`` files.
        start_timeout_s: ``--start-timeout``: seconds for all ranks to start.
        python: the interpreter whose ``bin`` directory goes first on ``PATH``.
        base_env: environment to start from (default ``os.environ``).
        horovodrun: the ``horovodrun`` executable.

    Returns:
        ``(argv, env)``. ``--gloo`` is explicit: a Horovod built with MPI picks MPI otherwise.
    """
    argv = [horovodrun, "-np", str(ranks), "-H", hosts, "--gloo", "--start-timeout", str(int(start_timeout_s))]
    if ranks > 1:  # Horovod 0.28.1 crashes on --output-filename with -np 1 (math.log10(0) in _pad_rank)
        argv += ["--output-filename", str(output_dir)]
    argv += list(program)
    return argv, launcher_env(python, base_env)


def mpi_exports(env: dict[str, str]) -> list[str]:
    """Names ``mpirun -x`` forwards: those of :data:`MPI_EXPORTS` set in ``env`` (in that
    order), then every set ``DISTBENCH_*``/``HOROVOD_*`` variable, sorted."""
    fixed = [k for k in MPI_EXPORTS if k in env]
    return fixed + sorted(k for k in env if k.startswith(EXPORT_PREFIXES) and k not in fixed)


def mpirun_command(ranks: int, hosts: str, program: list[str], output_dir: Path, python: str,
                   base_env: dict[str, str] | None = None,
                   mpirun: str = "mpirun") -> tuple[list[str], dict[str, str]]:
    """Open MPI ``mpirun`` running ``program`` on ``ranks`` ranks (Horovod's MPI controller).

    ``--allow-run-as-root`` (containers and CI run as root), ``--oversubscribe`` (more
    ranks than cores is allowed, as with horovodrun), ``-bind-to none -map-by slot``
    (Horovod's documented settings: no pinning of a rank's threads to one core),
    ``--tag-output`` (each line labelled with its rank), ``--output-filename`` (per-rank
    ``<output_dir>/1/rank.<r>/stdout|stderr`` files) and ``-x NAME`` for every variable of
    :func:`mpi_exports`.

    Args:
        ranks, hosts, program, output_dir, python, base_env: as :func:`horovodrun_command`.
        mpirun: the ``mpirun`` executable.

    Returns:
        ``(argv, env)``.
    """
    env = launcher_env(python, base_env)
    argv = [mpirun, "--allow-run-as-root", "-np", str(ranks), "-H", hosts, "--oversubscribe",
            "-bind-to", "none", "-map-by", "slot", "--tag-output", "--output-filename", str(output_dir)]
    for name in mpi_exports(env):
        argv += ["-x", name]
    return argv + list(program), env


def start_timeout(timeout_s: float) -> int:
    """``--start-timeout`` for a configuration with ``timeout_s`` seconds: a third of it,
    between 30 and 300 seconds (TensorFlow's import alone takes ~5-10 s per rank on a
    loaded 2-core machine)."""
    return int(min(300, max(30, timeout_s / 3)))


# ------------------------------------------------------------ failure reporting
@dataclass(frozen=True)
class RankFailure:
    """The first rank a launcher saw fail.

    Attributes:
        rank: global rank (None if the launcher named no rank).
        exit_code: its exit code as the launcher reported it (None if unknown).
        signal: the signal that killed it, if the launcher said so.
    """

    rank: int | None
    exit_code: int | None = None
    signal: int | None = None

    def describe(self) -> str:
        """``rank 1 failed with exit code 137 (128 + SIGKILL)`` and the like."""
        who = f"rank {self.rank}" if self.rank is not None else "a rank"
        if self.signal is not None:
            return f"{who} was killed by signal {self.signal} ({_signame(self.signal)})"
        if self.exit_code is None:
            return f"{who} failed"
        how = f"exit code {self.exit_code}"
        if self.exit_code > 128 and _signame(self.exit_code - 128) != "?":
            how += f" (128 + {_signame(self.exit_code - 128)})"
        elif self.exit_code < 0:
            how += f" ({_signame(-self.exit_code)})"
        return f"{who} failed with {how}"


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return "?"


_FAILURE_PATTERNS = (
    # horovodrun --gloo, as each rank ends: "Process 1 exit with status code 137."
    (re.compile(r"Process (\d+) exit with status code (-?\d+)"), "code"),
    # horovodrun's final RuntimeError: "Process name: 1\nExit code: 137"
    (re.compile(r"Process name: (\d+)\s*\n\s*Exit code:\s*(-?\d+)"), "code"),
    # mpirun: "Process name: [[28560,1],1]\n  Exit code:    1"
    (re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]\s*\n\s*Exit code:\s*(-?\d+)"), "code"),
    # mpirun: "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)."
    (re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)"), "signal"),
)


def parse_launcher_failure(text: str) -> RankFailure | None:
    """Find the first failing rank in a ``horovodrun`` or ``mpirun`` log.

    Returns:
        The earliest (by position in ``text``) failure report, or None if there is none.
    """
    best: tuple[int, RankFailure] | None = None
    for pattern, kind in _FAILURE_PATTERNS:
        m = pattern.search(text)
        if m and (best is None or m.start() < best[0]):
            rank, value = int(m.group(1)), int(m.group(2))
            f = RankFailure(rank, signal=value) if kind == "signal" else RankFailure(rank, exit_code=value)
            best = (m.start(), f)
    return best[1] if best else None


def rank_log_files(output_dir: Path, rank: int) -> list[Path]:
    """The ``stderr`` and ``stdout`` files of ``rank`` under a launcher's
    ``--output-filename`` directory (horovodrun: ``rank.<r>/``; mpirun: ``<job>/rank.<r>/``),
    stderr first; empty if there are none."""
    out: list[Path] = []
    for d in sorted(output_dir.glob("rank.*")) + sorted(output_dir.glob("*/rank.*")):
        suffix = d.name.split(".", 1)[1]
        if d.is_dir() and suffix.isdigit() and int(suffix) == rank:
            out += [p for p in (d / "stderr", d / "stdout") if p.exists()]
    return out


_NOISE = re.compile(r"All log messages before absl::InitializeLog|\] oneDNN custom operations are on|"
                    r"cudart_stub\.cc:\d+\] Could not find cuda drivers|failed call to cuInit")


def clean_tail(path: Path, lines: int, max_chars: int) -> str:
    """The last ``lines`` lines of ``path`` without TensorFlow's CPU-machine start-up
    notices (oneDNN, cuInit, absl), which no environment variable silences."""
    text = launchers.log_tail(path, lines=lines + 40, max_chars=64 * 1024)
    kept = [ln for ln in text.splitlines() if not _NOISE.search(ln)]
    return "\n".join(kept[-lines:])[-max_chars:]


class HorovodJobError(RuntimeError):
    """A Horovod job failed. ``failed_process`` names the failing rank (``rank 1``) or the
    launcher; the message's first line says who failed and how, the rest is log tails."""

    def __init__(self, message: str, failed_process: str | None) -> None:
        super().__init__(message)
        self.failed_process = failed_process


def failure_error(launcher: str, group: launchers.GroupResult, launcher_log: Path, output_dir: Path,
                  timeout_s: float) -> HorovodJobError:
    """Build the exception for a failed or timed-out launcher run: which rank failed,
    its exit code, the launcher's last lines and the rank's log tail."""
    if group.timed_out:
        return HorovodJobError(f"{launcher} {group.reason(timeout_s)}\n{clean_tail(launcher_log, 15, 2000)}",
                               launcher)
    text = launchers.log_tail(launcher_log, lines=400, max_chars=60000)
    failure = parse_launcher_failure(text)
    launcher_rc = group.failed.returncode if group.failed else None
    if failure is None or failure.rank is None:
        last = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "")
        return HorovodJobError(f"{launcher} failed with exit code {launcher_rc} before any rank reported a "
                               f"failure: {last.strip()[:300]}\n{clean_tail(launcher_log, 25, 3000)}", launcher)
    parts = [f"{failure.describe()} under {launcher} (launcher exit code {launcher_rc}); "
             f"rank logs in {output_dir}", f"--- {launcher} log tail ({launcher_log}) ---",
             clean_tail(launcher_log, 6, 1200)]
    for f in rank_log_files(output_dir, failure.rank):
        tail = clean_tail(f, 15, 2000)
        if tail.strip():
            parts += [f"--- rank {failure.rank} {f.name} ({f}) ---", tail]
    return HorovodJobError("\n".join(parts), f"rank {failure.rank}")


# ------------------------------------------------------------------- availability
_PROBES: dict[str, Availability] = {}


def parse_check_build(text: str) -> dict[str, dict[str, bool]]:
    """Parse ``horovodrun --check-build`` output into ``{section: {name: built}}``, e.g.
    ``{"Available Frameworks": {"TensorFlow": True, ...}, "Available Controllers": {...}}``.
    Lines that are not ``[X] name`` / ``[ ] name`` under a ``...:`` header are ignored."""
    out: dict[str, dict[str, bool]] = {}
    section = None
    for line in text.splitlines():
        s = line.strip()
        m = re.fullmatch(r"\[([ Xx])\]\s+(\S.*)", s)
        if m and section is not None:
            out[section][m.group(2).strip()] = m.group(1) != " "
        elif re.fullmatch(r"Available [A-Za-z ]+:", s):
            section = s[:-1]
            out[section] = {}
    return out


def find_horovodrun() -> str | None:
    """``horovodrun`` next to this interpreter (the virtualenv), else on ``PATH``."""
    local = Path(sys.executable).parent / "horovodrun"
    return str(local) if local.exists() else shutil.which("horovodrun")


def probe(controller: str) -> Availability:
    """Whether Horovod can train TensorFlow here with ``controller`` (``gloo`` | ``mpi``).

    Real probe: ``horovod`` importable, ``horovodrun --check-build`` (cached, :func:`cached_check_build`)
    shows ``[X] TensorFlow`` (the framework line: its ``[X] PyTorch`` is a false positive
    when PyTorch is absent, docs/horovod_build.md) and the controller; for ``mpi`` also
    ``mpirun`` and an rsh agent (``ssh``/``rsh``, which Open MPI wants even on one host)
    on ``PATH``.

    Returns:
        :class:`Availability`; when ok, ``reason`` summarises the build (:func:`build_summary`).
    """
    if importlib.util.find_spec("horovod") is None:
        return Availability(False, "horovod is not installed in this Python: run 'bash scripts/build_horovod.sh "
                                   ".venv' (make setup does)")
    hvdrun = find_horovodrun()
    if hvdrun is None:
        return Availability(False, "horovodrun not found next to this Python or on PATH (reinstall horovod)")
    if hvdrun not in _PROBES:
        _PROBES[hvdrun] = cached_check_build(hvdrun, Path(importlib.util.find_spec("horovod").origin).parent)
    built = _PROBES[hvdrun]
    if not built.ok:
        return built
    sections = parse_check_build(built.reason)
    name = {"gloo": "Gloo", "mpi": "MPI"}[controller]
    if not sections.get("Available Controllers", {}).get(name):
        return Availability(False, f"Horovod was built without the {name} controller (horovodrun --check-build: "
                                   f"[ ] {name}); rebuild with scripts/build_horovod.sh"
                                   + (" after installing Open MPI" if controller == "mpi" else ""))
    if controller == "mpi" and shutil.which("mpirun") is None:
        return Availability(False, "mpirun not found on PATH: install Open MPI (apt-get install openmpi-bin; "
                                   "scripts/setup_system.sh does)")
    if controller == "mpi" and not (shutil.which("ssh") or shutil.which("rsh")):
        return Availability(False, "Open MPI's mpirun needs an rsh agent (ssh or rsh) on PATH even on one host: "
                                   "install openssh-client (scripts/setup_system.sh does)")
    return Availability(True, build_summary(sections))


def build_summary(sections: dict[str, dict[str, bool]]) -> str:
    """One line from :func:`parse_check_build`'s result, e.g. ``horovodrun --check-build:
    frameworks TensorFlow; controllers MPI, Gloo; tensor ops MPI, Gloo`` (what ``distbench
    env`` shows for an available Horovod strategy)."""
    parts = []
    for title, key in (("frameworks", "Available Frameworks"), ("controllers", "Available Controllers"),
                       ("tensor ops", "Available Tensor Operations")):
        names = [n for n, built in sections.get(key, {}).items() if built and n != "PyTorch"]
        parts.append(f"{title} {', '.join(names) or 'none'}")
    return "horovodrun --check-build: " + "; ".join(parts)


def cache_dir() -> Path:
    """distbench's per-user cache folder (``$XDG_CACHE_HOME/distbench``, else ``~/.cache/distbench``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "distbench"


def cached_check_build(hvdrun: str, package_dir: Path, cache: Path | None = None) -> Availability:
    """:func:`_check_build`, remembered on disk for as long as the Horovod install is unchanged.

    ``horovodrun --check-build`` imports every framework and costs ~20 s on a small
    machine, on every ``distbench run``/``env``. A successful result is stored in
    ``cache/horovod-check-build.json`` under a key made of ``hvdrun`` and the path, size
    and modification time of every compiled library (``*.so``) under ``package_dir``, so a
    rebuilt or reinstalled Horovod is probed afresh; failures are never cached. An
    unreadable or corrupt cache file is ignored and rewritten.

    Args:
        hvdrun: path of the ``horovodrun`` to probe.
        package_dir: the installed ``horovod`` package folder.
        cache: cache folder (default :func:`cache_dir`).

    Returns:
        The :class:`Availability` of :func:`_check_build` (fresh or remembered).
    """
    import hashlib
    import json

    libs = sorted(str(p) for p in package_dir.rglob("*.so"))
    sig = [hvdrun] + [f"{p}:{os.stat(p).st_size}:{os.stat(p).st_mtime_ns}" for p in libs]
    key = hashlib.sha256("\n".join(sig).encode()).hexdigest()
    path = (cache or cache_dir()) / "horovod-check-build.json"
    try:
        saved = json.loads(path.read_text())
        if isinstance(saved, dict) and saved.get("key") == key and isinstance(saved.get("output"), str):
            return Availability(True, saved["output"])
    except (OSError, ValueError):
        pass
    result = _check_build(hvdrun)
    if result.ok and libs:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"key": key, "output": result.reason}))
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only home only costs the next run the probe again
    return result


def _check_build(hvdrun: str) -> Availability:
    """Run ``horovodrun --check-build``; ok carries the output as its ``reason``."""
    env = launcher_env(sys.executable, {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    try:
        cp = subprocess.run([hvdrun, "--check-build"], capture_output=True, text=True, timeout=180, env=env,
                            stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Availability(False, f"{hvdrun} --check-build failed: {e}")
    sections = parse_check_build(cp.stdout)
    if cp.returncode != 0 or not sections:
        tail = (cp.stderr or cp.stdout).strip().splitlines()[-1:] or [""]
        return Availability(False, f"{hvdrun} --check-build exited {cp.returncode}: {tail[0][:200]}")
    if not sections.get("Available Frameworks", {}).get("TensorFlow"):
        return Availability(False, "Horovod was built without TensorFlow (horovodrun --check-build: [ ] TensorFlow); "
                                   "rebuild with scripts/build_horovod.sh")
    return Availability(True, cp.stdout)


# ----------------------------------------------------------------------- strategy
class HorovodStrategy(Strategy):
    """Horovod ring-allreduce on ``workers`` ranks of this machine."""

    family = "horovod"
    controller = "gloo"

    def is_available(self, config: ExperimentConfig, workers: int) -> Availability:
        """See :func:`probe` (cached per process)."""
        return probe(self.controller)

    def launch(self, ctx: LaunchContext) -> TrainOutput:
        """Run ``ctx.workers`` ranks under the launcher, return rank 0's output.

        Raises:
            StrategyUnavailable: never here (the harness probes first).
            HorovodJobError: a rank or the launcher failed, or the time ran out;
                ``failed_process`` names the rank.
        """
        python = sys.executable
        program = worker_command(python, ctx.run_dir, ctx.key)
        out_dir = ctx.log_dir
        if out_dir.exists():
            shutil.rmtree(out_dir)
        out_dir.mkdir(parents=True)
        hosts = localhost_hosts(ctx.workers)
        if self.controller == "gloo":
            exe = find_horovodrun() or "horovodrun"
            argv, env = horovodrun_command(ctx.workers, hosts, program, out_dir, start_timeout(ctx.timeout_s),
                                           python, horovodrun=exe)
            name = "horovodrun"
        else:
            argv, env = mpirun_command(ctx.workers, hosts, program, out_dir, python,
                                       mpirun=shutil.which("mpirun") or "mpirun")
            name = "mpirun"
        log = out_dir / f"{name}.log"
        group = launchers.run_processes([launchers.ProcSpec(name, argv, env, log)], ctx.timeout_s)
        if not group.ok:
            raise failure_error(name, group, log, out_dir, ctx.timeout_s)
        try:
            return TrainOutput.load(ctx.artifacts_dir)
        except (OSError, ValueError, KeyError) as e:
            raise HorovodJobError(f"{name} exited 0 but rank 0 left no readable result in {ctx.artifacts_dir}: "
                                  f"{e}", "rank 0") from None


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
