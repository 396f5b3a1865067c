"""Launch commands as pure functions, and the one runner that executes them.

Builders return ``(argv, env)`` and do nothing else, so they are tested exactly. The
runner :func:`run_processes` starts each process in a new session (its own process
group), writes its output to a log file, applies a timeout, and terminates every
group (SIGTERM, then SIGKILL after a grace period) as soon as one process fails, the
time is up, or the caller is interrupted. It reports which process failed first, its
exit code and its log tail.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

GRACE_S = 5.0
_live_groups: set[int] = set()


@dataclass
class ProcSpec:
    """One process to start: a ``name`` for reports (``rank 1``, ``worker 0``...),
    its ``argv``, its complete ``env`` and the ``log`` file for stdout+stderr."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path


@dataclass
class ProcResult:
    """How one process ended: ``returncode`` (None if it was killed by the runner)."""

    name: str
    returncode: int | None
    log: Path


@dataclass
class GroupResult:
    """How a group of processes ended.

    Attributes:
        ok: every process exited 0.
        timed_out: the runner killed the group at the timeout.
        elapsed_s: wall seconds from the first start to the end.
        failed: the first process to fail (None if ok or timed out).
        results: every process's end.
    """

    ok: bool
    timed_out: bool
    elapsed_s: float
    failed: ProcResult | None = None
    results: list[ProcResult] = field(default_factory=list)

    def reason(self, timeout_s: float) -> str:
        """A one-line reason for a failure or timeout."""
        if self.timed_out:
            return f"timed out after {timeout_s:g} s (all processes killed)"
        if self.failed is not None:
            rc = self.failed.returncode
            how = f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exit code {rc}"
            return f"{self.failed.name} failed with {how}"
        return ""


def log_tail(path: Path, lines: int = 40, max_chars: int = 4000) -> str:
    """The last ``lines`` lines (at most ``max_chars`` characters) of a log file."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])[-max_chars:]


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def terminate_groups(pids: list[int], grace_s: float = GRACE_S) -> None:
    """SIGTERM each process group, wait up to ``grace_s``, then SIGKILL what is left."""
    for pid in pids:
        _kill_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                os.killpg(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        _kill_group(pid, signal.SIGKILL)
        _live_groups.discard(pid)


def install_cleanup_handler() -> None:
    """In a child that starts its own groups: on SIGTERM, kill them, then exit 143."""

    def handler(signum: int, frame: object) -> None:
        terminate_groups(list(_live_groups), grace_s=2.0)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def run_processes(specs: list[ProcSpec], timeout_s: float, poll_s: float = 0.1) -> GroupResult:
    """Start ``specs`` (each in a new session), wait for all, kill all on first failure.

    Args:
        specs: processes to start.
        timeout_s: wall-clock limit for the whole group, seconds.
        poll_s: polling interval, seconds.

    Returns:
        :class:`GroupResult`; no process of the group is left running when it returns.
    """
    t0 = time.monotonic()
    procs: list[tuple[ProcSpec, subprocess.Popen[bytes]]] = []
    try:
        for spec in specs:
            spec.log.parent.mkdir(parents=True, exist_ok=True)
            with open(spec.log, "ab") as log:
                p = subprocess.Popen(spec.argv, env=spec.env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
            _live_groups.add(p.pid)
            procs.append((spec, p))
        while True:
            codes = [p.poll() for _, p in procs]
            bad = [(s, p) for (s, p), c in zip(procs, codes) if c not in (None, 0)]
            if bad:
                s, p = bad[0]
                first = ProcResult(s.name, p.returncode, s.log)
                terminate_groups([q.pid for _, q in procs])
                res = [ProcResult(sp.name, q.poll(), sp.log) for sp, q in procs]
                return GroupResult(False, False, time.monotonic() - t0, first, res)
            if all(c == 0 for c in codes):
                for _, p in procs:  # reap stragglers of each group (daemons left behind)
                    terminate_groups([p.pid], grace_s=0.0)
                res = [ProcResult(s.name, 0, s.log) for s, _ in procs]
                return GroupResult(True, False, time.monotonic() - t0, None, res)
            if time.monotonic() - t0 > timeout_s:
                terminate_groups([p.pid for _, p in procs])
                res = [ProcResult(s.name, p.poll(), s.log) for s, p in procs]
                return GroupResult(False, True, time.monotonic() - t0, None, res)
            time.sleep(poll_s)
    except BaseException:
        terminate_groups([p.pid for _, p in procs], grace_s=1.0)
        raise


def child_env(extra: dict[str, str] | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a child Python process: ``base`` (default ``os.environ``) plus
    quiet TensorFlow C++ logs (level 1 keeps errors and warnings) and ``extra``."""
    env = dict(os.environ if base is None else base)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def config_child_command(run_dir: Path, key: str, strategy: str, workers: int,
                         spawn_unix: float, base_env: dict[str, str] | None = None,
                         window: int | None = None) -> tuple[list[str], dict[str, str]]:
    """argv and env of the harness child that runs one configuration in a fresh process.

    ``spawn_unix`` (Unix seconds) is passed as ``DISTBENCH_SPAWN_UNIX`` so the child can
    measure start-up from the moment it was spawned.
    """
    argv = [sys.executable, "-m", "distbench", "worker", "config", "--run-dir", str(run_dir),
            "--key", key, "--strategy", strategy, "--workers", str(workers)]
    if window:
        argv += ["--window", str(window)]
    return argv, child_env({"DISTBENCH_SPAWN_UNIX": repr(spawn_unix)}, base_env)
