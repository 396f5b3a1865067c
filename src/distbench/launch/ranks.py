"""Who a failed Horovod (or MPI) job should be blamed on, and in what words.

A launcher (``horovodrun``, ``mpirun``) reports the first rank that *exited*; that is not
always the rank at fault. When rank 1 stops making progress (stopped by SIGSTOP, or alive
but never submitting its next collective), rank 0 is the one that fails or waits: a
stopped rank makes Gloo's receive time out after 30 s ("Timed out waiting 30000ms for
recv operation to complete", naming no peer) and rank 0 exits 1; a live one keeps a Gloo
job waiting forever; under Open MPI neither ever times out. So the evidence comes from
three places, surest first:

1. :class:`RankWatch` looks at the ranks' processes while the job runs (once a second):
   a rank whose process is stopped (state ``T``) is named;
2. :func:`parse_stall` reads Horovod's stall inspector report ("Missing ranks: 1!: [...]",
   ``HOROVOD_STALL_CHECK_TIME_SECONDS`` / ``HOROVOD_STALL_SHUTDOWN_TIME_SECONDS``, which
   :func:`stall_env` derives from the configuration's timeout; Horovod 0.28.1 reports
   under MPI only);
3. the progress board (:func:`new_progress_board`): the steps each rank has started, so
   :class:`RankWatch` names the rank the others wait for, whatever stalls it.

:class:`RankWatch` ends the job once a rank has been stopped or waited for as long as the
stall limit, so it ends naming the rank instead of running into the timeout. Otherwise
blame goes to the first rank the launcher saw exit (:func:`parse_launcher_failure`), with
its own last error (:func:`engine_error`). :func:`failure_error` turns this into a
:class:`HorovodJobError` whose ``reason`` is one line that names the rank at fault and
never ends mid-sentence; the log tails follow.
"""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from distbench.contracts import TrainingFailed
from distbench.text import clip
from distbench.launch import process

STALL_CHECK_ENV = "HOROVOD_STALL_CHECK_TIME_SECONDS"
STALL_SHUTDOWN_ENV = "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"
RANK_ENVS = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
"""Environment variables that carry a rank's number: horovodrun (Gloo), Open MPI, MPICH."""


def stall_env(timeout_s: float) -> dict[str, str]:
    """Horovod's stall inspector settings for a configuration with ``timeout_s`` seconds.

    A warning after ``timeout_s / 8`` seconds (5-60; Horovod's default is 60) and a
    shutdown after ``timeout_s / 4`` seconds (Horovod's default is never), so a stalled job
    ends naming the stalled rank well before the configuration's timeout would end it
    without a name. A healthy job's ranks are never that far apart: they meet at every
    step's allreduce.

    Returns:
        ``{HOROVOD_STALL_CHECK_TIME_SECONDS: "N", HOROVOD_STALL_SHUTDOWN_TIME_SECONDS: "M"}``.
    """
    check = int(min(60, max(5, timeout_s / 8)))
    return {STALL_CHECK_ENV: str(check), STALL_SHUTDOWN_ENV: str(int(max(check, timeout_s / 4)))}


# ------------------------------------------------------------- launcher reports
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


@dataclass(frozen=True)
class StallReport:
    """The last report of Horovod's stall inspector in a log.

    Attributes:
        missing: ranks that had not submitted a collective the others were waiting in,
            each with the first tensor name listed for it.
        shutdown: the ranks marked ``!`` (stalled past the shutdown time: Horovod shut
            the job down).
        seconds: the shutdown time the report names (None for a warning only).
    """

    missing: dict[int, str] = field(default_factory=dict)
    shutdown: tuple[int, ...] = ()
    seconds: int | None = None

    def describe(self) -> str:
        """``rank 1 stalled: Horovod's stall inspector shut the job down after it had not
        submitted <tensor> for more than 25 s`` (or the warning's words)."""
        ranks = list(self.shutdown) or sorted(self.missing)
        who = ", ".join(f"rank {r}" for r in ranks)
        tensor = self.missing.get(ranks[0], "")
        if self.shutdown:
            return (f"{who} stalled: Horovod's stall inspector shut the job down after {who} had not submitted "
                    f"{tensor} for more than {self.seconds} s ({STALL_SHUTDOWN_ENV})")
        return f"Horovod's stall inspector reported {who} missing from collective {tensor}"


_PREFIX = re.compile(r"^\[[\d,]+\]<std(?:out|err)>:")
_MISSING = re.compile(r"^(\d+)(!?): \[([^,\]]*)")
_STALL_SHUTDOWN = re.compile(r"stalled for longer than (\d+) seconds\. Will shutdown")


def _unprefixed(text: str) -> list[str]:
    """Lines of a launcher or rank log without the ``[r]<stderr>:`` / ``[1,r]<stdout>:`` tags."""
    return [_PREFIX.sub("", ln).rstrip() for ln in text.splitlines()]


def parse_stall(text: str) -> StallReport | None:
    """The last stall-inspector report in ``text`` (a launcher or rank-0 log), or None."""
    lines = _unprefixed(text)
    starts = [i for i, ln in enumerate(lines) if ln.endswith("Missing ranks:")]
    if not starts:
        return None
    missing: dict[int, str] = {}
    shutdown: list[int] = []
    seconds = None
    for ln in lines[starts[-1] + 1:]:
        m = _MISSING.match(ln.strip())
        if m:
            missing[int(m.group(1))] = m.group(3).strip()
            if m.group(2):
                shutdown.append(int(m.group(1)))
            continue
        s = _STALL_SHUTDOWN.search(ln)
        if s:
            seconds = int(s.group(1))
        break
    return StallReport(missing, tuple(shutdown), seconds) if missing else None


_NOISE = re.compile(r"All log messages before absl::InitializeLog|\] oneDNN custom operations are on|"
                    r"cudart_stub\.cc:\d+\] Could not find cuda drivers|failed call to cuInit")
_SOURCE = re.compile(r"^\[[^\]]*\.(?:cc|cpp|h):\d+\]\s*(?:\[\d+\]:\s*)?")
_EXCEPTION = re.compile(r"^(?:\w+\.)*(\w+(?:Error|Exception|Interrupt))(?::\s*(.*))?$")
_TRACE = re.compile(r"^(File |\^|~|Traceback|Detected at node|\[\[\{\{node|During handling)")


def engine_error(text: str) -> str:
    """The error a rank's log ends with, in one line (at most 300 characters).

    The last Python exception line (``UnknownError: Graph execution error:``) with the
    engine's own message completed from the lines that follow it (TensorFlow puts Gloo's
    ``Timed out waiting 30000ms for recv operation to complete`` two lines below),
    source-location prefixes (``[.../unbound_buffer.cc:81]``) removed; else the last line
    naming an error or an uncaught exception; else the last line. Empty for an empty log.
    """
    lines = [ln.strip() for ln in _unprefixed(text) if ln.strip() and not _NOISE.search(ln)]
    for i in range(len(lines) - 1, -1, -1):
        m = _EXCEPTION.match(lines[i])
        if not m:
            continue
        msg = f"{m.group(1)}: {m.group(2) or ''}".rstrip()
        for more in lines[i + 1:i + 6]:
            if not msg.endswith(":"):
                break
            if _TRACE.match(more) or more.endswith(":"):
                continue
            msg += " " + _SOURCE.sub("", more)
        return clip(msg.rstrip(": "), 300)
    found = [ln for ln in lines if re.search(r"error|exception|timed out", ln, re.IGNORECASE)]
    return clip(_SOURCE.sub("", (found or lines or [""])[-1]), 300)


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


def clean_tail(path: Path, lines: int, max_chars: int) -> str:
    """The last ``lines`` lines of ``path`` without TensorFlow's CPU-machine start-up
    notices (oneDNN, cuInit, absl), which no environment variable silences."""
    text = process.log_tail(path, lines=lines + 40, max_chars=64 * 1024)
    kept = [ln for ln in text.splitlines() if not _NOISE.search(ln)]
    return clip("\n".join(kept[-lines:]), max_chars) if kept else ""


# ----------------------------------------------------------------- live watch
PROGRESS_ENV = "DISTBENCH_HOROVOD_PROGRESS"
"""Path of the progress board (:func:`new_progress_board`) the ranks of a harness-launched
job write to; unset (no board) when users launch the ranks themselves."""


def new_progress_board(path: Path, ranks: int) -> Path:
    """Create the progress board of a ``ranks``-rank job at ``path``: one int64 per rank,
    the number of training steps it has started (all 0). Returns ``path``."""
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    np.zeros(ranks, dtype=np.int64).tofile(path)
    return path


def open_progress_board(rank: int, size: int) -> Callable[[int], None] | None:
    """In a rank: a function that records ``steps`` started on the board named by
    :data:`PROGRESS_ENV` (a write into a memory-mapped file: no system call, about a
    microsecond), or None when there is no board or it does not fit ``size`` ranks."""
    import numpy as np

    path = os.environ.get(PROGRESS_ENV, "")
    if not path:
        return None
    try:
        if os.path.getsize(path) != size * 8:  # (memmap would grow a short file)
            return None
        board = np.memmap(path, dtype=np.int64, mode="r+", shape=(size,))
    except (OSError, ValueError):
        return None

    def record(steps: int) -> None:
        board[rank] = steps

    return record


class RankWatch:
    """Watches the ranks of one job for one that stopped making progress; a ``watch`` for
    :func:`~distbench.launch.process.run_processes`.

    Once a second it looks at two things. The process table: the processes whose
    command line contains ``marker`` (the rank program's arguments), each one's rank (from
    its environment, :data:`RANK_ENVS`) and state; a rank whose process is stopped (``T``:
    SIGSTOP, SIGTSTP, a debugger) is remembered from the first time it is seen so. And
    the progress ``board`` (:func:`new_progress_board`): the steps each rank has started.
    In synchronous training the ranks meet at every step's allreduce, so when no rank has
    started a step for ``quiet_s`` seconds and some have started fewer than the others,
    those are the ones the others wait for, whatever stalls them (Gloo keeps such a job
    waiting forever: its controller stays busy, so no receive times out). Once a rank has
    been stopped, or the board still, for ``stall_s`` seconds, the call returns a reason
    naming the rank, which ends the job.

    Args:
        marker: arguments every rank's command line contains, in order (e.g.
            ``-m distbench worker horovod --run-dir DIR --key KEY``).
        stall_s: seconds a rank may stay stopped (or the others wait for it) before the
            job is ended (0: never end it, only name the rank if the job fails).
        board: the job's progress board (None: none).
        quiet_s: seconds without any step started before a laggard on the board counts
            as stalled (a crash is reported within a second: it is not blamed on a
            rank that was merely one step behind).
        every_s: seconds between two looks.
    """

    def __init__(self, marker: list[str], stall_s: float, board: Path | None = None, quiet_s: float = 5.0,
                 every_s: float = 1.0) -> None:
        self.marker = list(marker)
        self.stall_s = stall_s
        self.board = board
        self.quiet_s = quiet_s
        self.every_s = every_s
        self.pids: dict[int, tuple[int, float]] = {}  # rank -> (pid, create_time)
        self.stopped_since: dict[int, float] = {}  # rank -> monotonic time first seen stopped
        self.related: set[tuple[int, float]] = set()  # (pid, create_time) of every process seen
        self.steps: list[int] = []  # the board as last read
        self.steps_since = time.monotonic()  # when the board last changed
        self._ranks: dict[tuple[int, float], int | None] = {}
        self._next = 0.0

    def __call__(self) -> str:
        """Look at the ranks if a second has passed; a reason once one has been stopped
        (or waited for) for ``stall_s`` seconds, else ``""``."""
        now = time.monotonic()
        if now < self._next:
            return ""
        self._next = now + self.every_s
        self.scan(now)
        found = self.stopped_rank(now)
        if found and self.stall_s > 0 and found[2] >= self.stall_s:
            return (f"{found[1]}, past the stall limit of {self.stall_s:g} s ({STALL_SHUTDOWN_ENV}), "
                    "so the job was ended")
        return ""

    def scan(self, now: float | None = None, full: bool = False) -> None:
        """Update :attr:`pids`, :attr:`stopped_since` and :attr:`steps`. The whole process
        table is read until every rank of the board has been found (or when ``full``);
        then only those ranks' states (about 12 ms vs 0.1 ms a look on a loaded 2-core
        machine)."""
        import psutil

        now = time.monotonic() if now is None else now
        self.read_board(now)
        if not full and self.steps and len(self.pids) >= len(self.steps):
            for rank, (pid, created) in list(self.pids.items()):
                try:
                    proc = psutil.Process(pid)
                    stopped = proc.create_time() == created and proc.status() in (psutil.STATUS_STOPPED,
                                                                                   psutil.STATUS_TRACING_STOP)
                except psutil.Error:
                    stopped = False
                if stopped:
                    self.stopped_since.setdefault(rank, now)
                else:
                    self.stopped_since.pop(rank, None)
            return
        n, text = len(self.marker), " ".join(self.marker)
        for p in psutil.process_iter(["pid", "cmdline", "status", "create_time"]):
            cmd = p.info["cmdline"] or []
            if text not in " ".join(cmd):
                continue
            ident = (p.pid, p.info["create_time"])
            self.related.add(ident)  # the rank, or a shell a launcher runs it in
            if not any(cmd[i:i + n] == self.marker for i in range(len(cmd) - n + 1)):
                continue
            if ident not in self._ranks:
                self._ranks[ident] = _rank_of(p)
            rank = self._ranks[ident]
            if rank is None:
                continue
            self.pids[rank] = ident
            if p.info["status"] in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP):
                self.stopped_since.setdefault(rank, now)
            else:
                self.stopped_since.pop(rank, None)

    def read_board(self, now: float) -> None:
        """Read the progress board; note when it last changed."""
        import numpy as np

        if self.board is None:
            return
        try:
            steps = [int(v) for v in np.fromfile(self.board, dtype=np.int64)]
        except (OSError, ValueError):
            return
        if steps != self.steps:
            self.steps, self.steps_since = steps, now

    def stopped_rank(self, now: float | None = None) -> tuple[int, str, float] | None:
        """``(rank, description, seconds)`` of the rank that stopped making progress, or
        None: the rank stopped longest (process state ``T``), else the laggard of a board
        that has been still for ``quiet_s`` seconds."""
        now = time.monotonic() if now is None else now
        if self.stopped_since:
            rank = min(self.stopped_since, key=lambda r: self.stopped_since[r])
            pid = self.pids.get(rank, (0, 0.0))[0]
            still = now - self.stopped_since[rank]
            return rank, (f"rank {rank} stopped making progress: its process (pid {pid}) was stopped "
                          f"(state T, e.g. by SIGSTOP) for {still:.0f} s"), still
        self.read_board(now)
        still = now - self.steps_since
        if len(set(self.steps)) < 2 or still < self.quiet_s:
            return None
        low, high = min(self.steps), max(self.steps)
        behind = [r for r, v in enumerate(self.steps) if v == low]
        who = " and ".join(f"rank {r}" for r in behind)
        return behind[0], (f"{who} stopped making progress: {'it' if len(behind) == 1 else 'they'} started "
                           f"{low} training steps while the others started up to {high} and waited for "
                           f"{'it' if len(behind) == 1 else 'them'}; no rank started a step for {still:.0f} s"), still

    def kill_leftovers(self) -> list[int]:
        """SIGKILL every process seen (ranks and the shells they run in) that is still
        alive: a stopped process never acts on the SIGTERM its launcher sends, and
        horovodrun itself SIGSTOPs a rank's shell before killing it. Returns the pids killed."""
        import psutil

        self.scan(full=True)
        killed = []
        for pid, created in sorted(self.related):
            try:
                p = psutil.Process(pid)
                if p.create_time() == created:
                    p.kill()
                    killed.append(pid)
            except psutil.Error:
                pass
        return killed


def _rank_of(p: object) -> int | None:
    """The rank of process ``p`` (a ``psutil.Process``) from its environment, or None."""
    import psutil

    try:
        env = p.environ()  # type: ignore[attr-defined]
    except psutil.Error:
        return None
    for name in RANK_ENVS:
        if env.get(name, "").isdigit():
            return int(env[name])
    return None


# ------------------------------------------------------------------ the error
class HorovodJobError(TrainingFailed):
    """A Horovod (or MPI) job failed.

    Attributes:
        failed_process: the rank at fault (``rank 1``) or the launcher.
        reason: one line naming who failed and how (the message's first line); the rest
            of the message is log tails.
    """

    def __init__(self, message: str, failed_process: str | None, reason: str | None = None) -> None:
        super().__init__(message, failed_process, reason=reason)


def failure_error(launcher: str, group: process.GroupResult, launcher_log: Path, output_dir: Path,
                  timeout_s: float, watch: RankWatch | None = None) -> HorovodJobError:
    """Build the exception for a failed, stalled or timed-out launcher run.

    Blame goes, in this order, to a rank ``watch`` saw stopped, to the ranks Horovod's
    stall inspector names (:func:`parse_stall`), then to the first rank the launcher saw
    fail, with its exit code and its own last error (:func:`engine_error`). The first line
    (the ``reason``) says who and how; then come the launcher's last lines and the blamed
    ranks' log tails.

    Args:
        launcher: ``horovodrun`` or ``mpirun``.
        group: how :func:`~distbench.launch.process.run_processes` ended.
        launcher_log: the launcher's log file.
        output_dir: the launcher's ``--output-filename`` directory (per-rank logs).
        timeout_s: the configuration's timeout, seconds.
        watch: the job's :class:`RankWatch`, if one ran.
    """
    text = process.log_tail(launcher_log, lines=400, max_chars=60000)
    stopped = watch.stopped_rank() if watch is not None else None
    stall = parse_stall(text)
    if stall is None and output_dir.exists():
        for f in rank_log_files(output_dir, 0):
            stall = stall or parse_stall(process.log_tail(f, lines=400, max_chars=60000))
    evidence: tuple[int, str] | None = None
    if stopped and watch is not None and stopped[0] in watch.stopped_since:  # a stopped process: the surest sign
        evidence = (stopped[0], stopped[1])
    elif stall is not None:  # Horovod's own word
        evidence = ((list(stall.shutdown) or sorted(stall.missing))[0], stall.describe())
    elif stopped:  # the progress board
        evidence = (stopped[0], stopped[1])
    launcher_rc = group.failed.returncode if group.failed else None
    tail_ranks: list[int] = []
    if group.stopped:
        head, who = group.stopped, launcher
        if evidence:
            who, tail_ranks = f"rank {evidence[0]}", [evidence[0]]
    elif group.timed_out:
        head, who = f"{launcher} {group.reason(timeout_s)}", launcher
        if evidence:
            head, who, tail_ranks = f"{evidence[1]}; {head}", f"rank {evidence[0]}", [evidence[0]]
    else:
        failure = parse_launcher_failure(text)
        if failure is None or failure.rank is None:
            last = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "")
            head, who = (f"{launcher} failed with exit code {launcher_rc} before any rank reported a failure: "
                         f"{clip(last.strip(), 300)}"), launcher
            if evidence:
                head, who, tail_ranks = f"{evidence[1]}; then {head}", f"rank {evidence[0]}", [evidence[0]]
        else:
            cause = next((engine_error(process.log_tail(f, lines=200, max_chars=60000))
                          for f in rank_log_files(output_dir, failure.rank)), "")
            head = f"{failure.describe()} under {launcher} (launcher exit code {launcher_rc})"
            head += f": {cause}" if cause else ""
            who, tail_ranks = f"rank {failure.rank}", [failure.rank]
            if evidence and evidence[0] != failure.rank:
                head, who = f"{evidence[1]}; then {head}", f"rank {evidence[0]}"
                tail_ranks = [evidence[0], failure.rank]
    head += f"; rank logs in {output_dir}"
    parts = [head, f"--- {launcher} log tail ({launcher_log}) ---", clean_tail(launcher_log, 8, 1500)]
    for rank in tail_ranks:
        for f in rank_log_files(output_dir, rank):
            tail = clean_tail(f, 15, 2000)
            if tail.strip():
                parts += [f"--- rank {rank} {f.name} ({f}) ---", tail]
    return HorovodJobError("\n".join(parts), who, head)
