"""Engines shared by a sweep's configurations: the parent's handle on one, and the sweep's
one running engine.

Starting an engine (a Spark application, an ``mpirun`` job whose ranks import
TensorFlow) is most of a small configuration's wall time. So ``distbench run`` starts one
*engine* for a run of configurations that can share it and sends it those configurations
one at a time: the Spark engine (:mod:`distbench.harness.spark_engine`, ``[spark]
share_session``) for ``spark_ps``, the MPI engine (:mod:`distbench.harness.mpi_engine`,
``[mpi] share_engine``) for ``mpi_ps``; only on this machine (not under ``[cluster]``,
where each configuration gets its own placement). At most one engine runs at a time: a
configuration that needs another engine, or none, stops the running one first, so no
idle engine process ever runs beside another configuration.

Parent and engine talk one JSON object per line, the messages of the ground floor: an
:class:`~distbench.contracts.EngineRequest` (``key``, ``strategy``, ``workers``, ``window``,
``spawn_unix``, ``scenario``) on the engine's request channel, and an
:class:`~distbench.contracts.EngineReply` (``key``) on its reply channel once the
configuration's result is written to its artifacts directory
(:func:`~distbench.harness.child.run_configuration`), as a child process's would be;
``closing`` in the reply says the engine ends after it (the next configuration starts a
new one). Each side checks what it reads field by field. If the engine dies or a configuration runs past its
timeout, counted from the configuration's spawn as for a child process, the engine's
processes are killed, that configuration's record says so, and the next configuration
starts a fresh engine.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from distbench.contracts import EngineReply, EngineRequest
from distbench.launch import process


@dataclass
class EngineResult:
    """What the parent learned about one configuration sent to an engine.

    Attributes:
        ok: the engine answered (the child result is in the artifacts directory).
        timed_out: the configuration ran past its timeout (the engine was killed).
        reason: why there is no answer (the engine died, with how, or timed out).
        elapsed_s: seconds from the configuration's spawn to the answer (or the failure).
        failed_process: the engine's process at fault when it died (``rank 2``), else None.
    """

    ok: bool
    timed_out: bool
    reason: str
    elapsed_s: float
    failed_process: str | None = None


class SharedEngine:
    """The parent's handle on one engine (see the module docstring).

    A subclass starts the engine in :meth:`_spawn` (setting :attr:`proc`, the request
    writer and the reply descriptor) and may explain a death in :meth:`describe_death`.

    Args:
        run_dir: the run directory (the engine loads its workload).
        log: the engine's log file (its stdout and stderr).
    """

    kind = "engine"
    """How reasons name it: ``Spark engine``, ``MPI engine``."""
    pid_words = "pid"
    """How reasons introduce the engine's process id (``mpirun pid``)."""

    def __init__(self, run_dir: Path, log: Path) -> None:
        self.run_dir, self.log = run_dir, log
        self.proc: subprocess.Popen[bytes] | None = None
        self._requests: IO[bytes] | None = None
        self._reply = -1
        self._buf = b""
        self.started_unix = 0.0

    def _spawn(self, log: IO[bytes]) -> None:
        """Start the engine with stdout and stderr on ``log``, in its own session."""
        raise NotImplementedError

    def start(self) -> "SharedEngine":
        """Start the engine (killed with the sweep: see :meth:`close`)."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self._spawn(log)
        if self.proc is None:
            raise RuntimeError(f"{type(self).__name__}._spawn started no process")
        process._live_groups.add(self.proc.pid)
        self.started_unix = time.time()
        return self

    @property
    def alive(self) -> bool:
        """The engine process is running."""
        return self.proc is not None and self.proc.poll() is None

    def run(self, key: str, strategy: str, workers: int, window: int | None, spawn_unix: float,
            timeout_s: float, scenario: Any = None) -> EngineResult:
        """Send one configuration and wait for its answer, until ``timeout_s`` seconds after
        ``spawn_unix`` (``scenario``: its straggler :class:`~distbench.config.scenario.Scenario`, or None).

        On a timeout or the engine's death the engine is stopped (:meth:`close`); the
        caller starts a new one for the next configuration.
        """
        t0 = time.monotonic() - max(0.0, time.time() - spawn_unix)
        req = EngineRequest(key, strategy, workers, window, spawn_unix,
                            scenario.to_arg() if scenario is not None else None)
        if self.proc is None or self._requests is None:
            return self._failed(t0, key, False)
        try:
            self._requests.write(req.to_line())
            self._requests.flush()
        except OSError:  # BrokenPipeError: the engine is gone
            return self._failed(t0, key, True)
        while True:
            left = timeout_s - (time.monotonic() - t0)
            if left <= 0:
                self.close(grace_s=2.0)
                return EngineResult(False, True, f"timed out after {timeout_s:.0f} s (the shared {self.kind} "
                                    "was stopped; the next configuration starts a new one)", time.monotonic() - t0)
            ready, _, _ = select.select([self._reply], [], [], min(left, 0.5))
            if ready:
                try:
                    chunk = os.read(self._reply, 4096)
                except BlockingIOError:
                    continue
                if not chunk:
                    return self._failed(t0, key, True)
                self._buf += chunk
                while b"\n" in self._buf:
                    line, self._buf = self._buf.split(b"\n", 1)
                    answer = EngineReply.from_line(line)
                    if answer.key == key:
                        if answer.closing:  # it ends after this one: the next starts a new one
                            self.close(grace_s=10.0)
                        return EngineResult(True, False, "", time.monotonic() - t0)
            elif not self.alive:
                return self._failed(t0, key, True)

    def describe_death(self, rc: int | None, key: str) -> tuple[str, str | None]:
        """How the engine ended while running configuration ``key``, and the process at
        fault (None: the engine itself): ``("signal 9 (SIGKILL)", None)`` by default."""
        return (process.describe_exit(rc) if rc is not None else "stopped answering"), None

    def _failed(self, t0: float, key: str, died: bool) -> EngineResult:
        rc = None
        if self.proc is not None and died:
            try:  # its reply channel closes a moment before the kernel reports the exit
                rc = self.proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                rc = None
        how, who = self.describe_death(rc, key) if died else ("it was not running", None)
        self.close(grace_s=1.0)
        pid = self.proc.pid if self.proc else "?"
        return EngineResult(False, False, f"the shared {self.kind} ({self.pid_words} {pid}) "
                            f"{'died' if died else 'could not take the configuration'}: {how}; the next "
                            "configuration starts a new one", time.monotonic() - t0, who)

    def close(self, grace_s: float = 10.0) -> None:
        """End the engine: close its request channel (it ends its session and exits), then
        kill whatever of it is left after ``grace_s`` (its process group and its session)."""
        if self.proc is None:
            return
        try:
            if self._requests is not None:
                self._requests.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        process.terminate_groups([self.proc.pid], grace_s=1.0)
        process.kill_session(self.proc.pid)
        if self._reply >= 0:
            os.close(self._reply)
            self._reply = -1
        self._cleanup()

    def _cleanup(self) -> None:
        """Remove what :meth:`_spawn` made besides the processes (nothing by default)."""
