"""Launch commands as pure functions, and the one runner that executes them.

Builders return ``(argv, env)`` and do nothing else, so they are tested exactly. The
runner :func:`run_processes` starts each process in a new session (its own process
group), writes its output to a log file, applies a timeout, and terminates every
group (SIGTERM, then SIGKILL after a grace period) as soon as one process fails, the
time is up, or the caller is interrupted. It reports which process failed first, its
exit code and its log tail.

:func:`supervise` runs one engine process under a small pure-Python parent that bounds
each stage of its start-up and ends it on SIGTERM/SIGINT: engines such as TensorFlow
block in C++ calls that hold the GIL (no Python signal handler or thread runs) and
install their own SIGTERM handler, so only a parent can guarantee either.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from distbench.text import clip

GRACE_S = 5.0
STAGE_FD_ENV = "DISTBENCH_STAGE_FD"  # a supervised child writes one byte there per stage reached
STALLED_EXIT = 3  # supervise(): a stage was not reached in time
_live_groups: set[int] = set()
PR_SET_PDEATHSIG = 1
try:  # loaded once here, so the child between fork and exec only makes one libc call
    _libc: ctypes.CDLL | None = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
except OSError:  # not Linux/glibc: children are still killed by group, just not on a SIGKILLed parent
    _libc = None


def _die_with_parent() -> None:
    """In a freshly forked child: ask the kernel to SIGKILL it when its parent dies (Linux
    PR_SET_PDEATHSIG), so a SIGKILLed ``distbench run`` leaves no orphaned training behind."""
    if _libc is not None:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


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
        failed: the first process to fail (None if ok, timed out or stopped by ``watch``).
        results: every process's end.
        stopped: why the ``watch`` of :func:`run_processes` ended the group ("" if it did not).
    """

    ok: bool
    timed_out: bool
    elapsed_s: float
    failed: ProcResult | None = None
    results: list[ProcResult] = field(default_factory=list)
    stopped: str = ""

    def reason(self, timeout_s: float) -> str:
        """A one-line reason for a failure or timeout."""
        if self.stopped:
            return self.stopped
        if self.timed_out:
            return f"timed out after {timeout_s:g} s (all processes killed)"
        if self.failed is not None:
            return f"{self.failed.name} failed with {describe_exit(self.failed.returncode)}"
        return ""


def log_tail(path: Path, lines: int = 40, max_chars: int = 4000) -> str:
    """The last ``lines`` whole lines of a log file, as many of them as fit in ``max_chars``
    characters (a single last line longer than that is cut at its start)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    kept: list[str] = []
    size = 0
    for line in reversed(text.splitlines()[-lines:]):
        size += len(line) + 1
        if size > max_chars + 1 and kept:
            break
        kept.append(line)
    return "\n".join(reversed(kept))[-max_chars:]


def describe_exit(rc: int | None) -> str:
    """``exit code 3`` or ``signal 9 (SIGKILL)`` for a Popen return code."""
    if rc is not None and rc < 0:
        try:
            return f"signal {-rc} ({signal.Signals(-rc).name})"
        except ValueError:
            return f"signal {-rc}"
    return f"exit code {rc}"


NOISE = ("failed call to cuInit",)
"""Error lines every TensorFlow process prints on a machine without a GPU driver: never the cause."""

FATAL = re.compile(r"^F\d{4} |Check failed|Fatal Python error|Segmentation fault|Aborted|Killed")
"""A C++ abort (absl/glog ``F`` lines, ``CHECK``), a crash or a kill: the cause over any earlier error line."""


def last_error_line(text: str) -> str:
    """The last line of ``text`` that says why a process ended: a fatal line (:data:`FATAL`),
    else one naming an error or exception (not :data:`NOISE`), else its last non-empty line;
    :func:`clip`-ped to 400 characters."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    fatal = [ln for ln in lines if FATAL.search(ln)]
    errors = [ln for ln in lines if ("Error" in ln or "Exception" in ln or "error:" in ln)
              and not any(n in ln for n in NOISE)]
    return clip((fatal or errors or lines or [""])[-1], 400)


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def terminate_groups(pids: list[int], grace_s: float = GRACE_S) -> None:
    """SIGTERM each process group, wait up to ``grace_s``, then SIGKILL what is left; then
    remove what a killed ``mpirun`` leader left in the temporary directory
    (:func:`remove_mpirun_session_dir`)."""
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
        remove_mpirun_session_dir(pid)


def remove_mpirun_session_dir(pid: int) -> None:
    """Remove Open MPI's session directory of an ``mpirun`` whose pid was ``pid``
    (``$TMPDIR/ompi.<host>.<uid>/pid.<pid>/``: contact file, topology and PMIx shared-memory
    files), if there is one. ``mpirun`` removes it when it ends normally; one stopped by a
    signal (an interrupted sweep, a timeout, a failed rank) leaves it behind, one more per
    interruption. Call it only once ``pid`` is dead: a leader of a group just SIGKILLed.

    Args:
        pid: the process id the ``mpirun`` had (any other pid: nothing to remove).
    """
    base = Path(os.environ.get("TMPDIR") or "/tmp")
    for d in base.glob(f"ompi.*.{os.getuid()}/pid.{int(pid)}"):
        shutil.rmtree(d, ignore_errors=True)


def kill_session(sid: int) -> list[int]:
    """SIGKILL every process of session ``sid`` (a process started with
    ``start_new_session=True`` leads the session of its pid): ``mpirun`` puts each rank in a
    process group of its own, so killing its group does not reach a rank that outlived it.

    Returns:
        The pids signalled.
    """
    killed: list[int] = []
    if sid == os.getsid(0):  # never this process's own session
        return killed
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.getsid(int(entry)) == sid:
                os.kill(int(entry), signal.SIGKILL)
                killed.append(int(entry))
        except (ProcessLookupError, PermissionError):
            pass
    return killed


def install_cleanup_handler() -> None:
    """In a child that starts its own groups: on SIGTERM, kill them, then exit 143."""

    def handler(signum: int, frame: object) -> None:
        terminate_groups(list(_live_groups), grace_s=2.0)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


class ProcessGroup:
    """Processes started together, each in a new session (its own process group), and
    terminated together.

    Args:
        specs: the processes (see :class:`ProcSpec`); stdout+stderr go to each ``log``.
    """

    def __init__(self, specs: list[ProcSpec]) -> None:
        self.specs = specs
        self.procs: list[subprocess.Popen[bytes]] = []
        self.t0 = time.monotonic()

    def start(self) -> "ProcessGroup":
        """Start every process; on a start failure, kill those already started and re-raise."""
        try:
            for spec in self.specs:
                spec.log.parent.mkdir(parents=True, exist_ok=True)
                with open(spec.log, "ab") as log:
                    p = subprocess.Popen(spec.argv, env=spec.env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True,
                                         preexec_fn=_die_with_parent)
                _live_groups.add(p.pid)
                self.procs.append(p)
        except BaseException:
            self.terminate(grace_s=1.0)
            raise
        return self

    def first_failure(self) -> ProcResult | None:
        """The first process (in start order) that has exited non-zero, if any."""
        for spec, p in zip(self.specs, self.procs):
            if p.poll() not in (None, 0):
                return ProcResult(spec.name, p.returncode, spec.log)
        return None

    def all_succeeded(self) -> bool:
        """Every process has exited with code 0."""
        return all(p.poll() == 0 for p in self.procs)

    def results(self) -> list[ProcResult]:
        """Each process's current exit code (None while running)."""
        return [ProcResult(s.name, p.poll(), s.log) for s, p in zip(self.specs, self.procs)]

    def terminate(self, grace_s: float = GRACE_S) -> None:
        """SIGTERM every group, SIGKILL after ``grace_s``; reap the processes."""
        terminate_groups([p.pid for p in self.procs], grace_s)
        for p in self.procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass


def run_processes(specs: list[ProcSpec], timeout_s: float, poll_s: float = 0.1,
                  watch: Callable[[], str] | None = None) -> GroupResult:
    """Start ``specs`` (each in a new session), wait for all, kill all on first failure.

    Args:
        specs: processes to start.
        timeout_s: wall-clock limit for the whole group, seconds.
        poll_s: polling interval, seconds.
        watch: called at every poll while the group runs; a non-empty return value (a
            one-line reason, e.g. "rank 1 stopped making progress") ends the group, and
            becomes :attr:`GroupResult.stopped`.

    Returns:
        :class:`GroupResult`; no process of the group is left running when it returns.
    """
    group = ProcessGroup(specs).start()
    try:
        while True:
            first = group.first_failure()
            if first is not None:
                group.terminate()
                return GroupResult(False, False, time.monotonic() - group.t0, first, group.results())
            if group.all_succeeded():
                group.terminate(grace_s=0.0)  # reap stragglers of each group (daemons left behind)
                return GroupResult(True, False, time.monotonic() - group.t0, None, group.results())
            if time.monotonic() - group.t0 > timeout_s:
                group.terminate()
                return GroupResult(False, True, time.monotonic() - group.t0, None, group.results())
            stopped = watch() if watch else ""
            if stopped:
                group.terminate()
                return GroupResult(False, False, time.monotonic() - group.t0, None, group.results(), stopped)
            time.sleep(poll_s)
    except BaseException:
        group.terminate(grace_s=1.0)
        raise


def report_stage() -> None:
    """In a child started by :func:`supervise`: tell the parent the next stage is reached
    (one byte on the pipe named by ``DISTBENCH_STAGE_FD``; nothing when not supervised)."""
    fd = os.environ.get(STAGE_FD_ENV, "")
    if fd.isdigit():
        try:
            os.write(int(fd), b"+")
        except OSError:  # the parent is gone: PR_SET_PDEATHSIG ends this process
            pass


def _ignore_sigint_and_die_with_parent() -> None:
    """In a freshly forked supervised child: the parent handles Ctrl-C for both."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()


def supervise(argv: list[str], env: dict[str, str], stages: list[tuple[float, Callable[[], str]]],
              grace_s: float = 1.0, poll_s: float = 0.2) -> int:
    """Run ``argv`` as a child in this process group and return how it ended, bounding
    its start-up stage by stage and ending it on SIGTERM or SIGINT.

    The child reports each stage reached with :func:`report_stage`; stage ``k`` must be
    reached within ``stages[k][0]`` seconds of the previous one (of the start for the
    first). When one is not, ``stages[k][1]()`` gives a one-line reason, printed to
    stderr as ``distbench: error: <reason>``; the child is stopped (SIGTERM, SIGKILL after
    ``grace_s``) and the result is :data:`STALLED_EXIT`. After the last stage the child
    runs until it exits. On SIGTERM/SIGINT this process stops the child the same way and
    ends with that signal. The child dies with this process (PR_SET_PDEATHSIG) and ignores
    SIGINT (Ctrl-C reaches the whole process group; this process handles it).

    Args:
        argv, env: the child's command and complete environment (``DISTBENCH_STAGE_FD`` is added).
        stages: ``(seconds allowed, reason when it runs out)`` per stage.
        grace_s: seconds between SIGTERM and SIGKILL when stopping the child.
        poll_s: polling interval, seconds.

    Returns:
        The child's exit code, or :data:`STALLED_EXIT`. A child killed by a signal makes
        this process die of the same signal (so its own parent sees the real cause).
    """
    read_fd, write_fd = os.pipe()
    child: subprocess.Popen[bytes] | None = None

    def stop_child() -> None:  # bounded polls only: a signal may interrupt a poll holding Popen's lock
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if child is None or child.poll() is not None:
                return
            child.send_signal(sig)
            deadline = time.monotonic() + grace_s
            while child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)

    def die_of(signum: int) -> None:
        if signum not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)  # not reached: the default action ends the process

    def on_signal(signum: int, frame: object) -> None:
        stop_child()
        die_of(signum)

    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            child = subprocess.Popen(argv, env={**env, STAGE_FD_ENV: str(write_fd)}, pass_fds=(write_fd,),
                                     preexec_fn=_ignore_sigint_and_die_with_parent)
        finally:
            os.close(write_fd)  # the child holds its copy: EOF on read_fd once it exits
        for allowed_s, reason in stages:
            deadline = time.monotonic() + allowed_s
            reached = False
            while not reached and child.poll() is None:
                if time.monotonic() > deadline:
                    print(f"distbench: error: {reason()}", file=sys.stderr, flush=True)
                    stop_child()
                    return STALLED_EXIT
                if select.select([read_fd], [], [], poll_s)[0]:
                    reached = os.read(read_fd, 1) != b""  # b"": the child closed the pipe (it is ending)
                    if not reached:
                        time.sleep(poll_s)
            if not reached:
                break
        while child.poll() is None:
            time.sleep(poll_s)
    finally:
        os.close(read_fd)
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if child.returncode < 0:
        die_of(-child.returncode)
    return child.returncode


