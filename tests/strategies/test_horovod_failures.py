"""Blaming the right rank: engine errors, Horovod's stall report, the rank watch (stopped
processes, progress board) and the one-line reason, on real captured launcher output;
then for real: a SIGSTOPped rank (Gloo) and a rank that stalls alive (MPI) each end their
job within the stall limit, named, with nothing left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from distbench.harness.child import failure_reason
from distbench.results.store import read_records
from distbench.launch import ranks as F
from tests.plugins import faults
from distbench.launch.process import GroupResult, ProcResult
from tests.conftest import requires

# rank 0's stderr (horovodrun --output-filename) after rank 1 was SIGSTOPped: Gloo's
# receive timeout, which names no peer; horovodrun then blamed rank 0.
GLOO_RANK0_TIMEOUT = """\
[0]<stderr>:[2026-11-30 15:57:12.179641: E /tmp/pip-install-rgu5xup_/horovod/common/operations.cc:697] [0]: \
Horovod background loop uncaught exception: Application timeout caused pair closure
[0]<stderr>:Traceback (most recent call last):
[0]<stderr>:  File "/work/src/distbench/strategies/horovod_rank.py", line 210, in train_step
[0]<stderr>:  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
[0]<stderr>:tensorflow.python.framework.errors_impl.UnknownError: Graph execution error:
[0]<stderr>:
[0]<stderr>:Detected at node DistributedGradientTape_Allreduce/cond_3/HorovodAllreduce_grad_0 defined at (most recent \
call last):
[0]<stderr>:[/tmp/pip-install-rgu5xup_/third_party/compatible17_gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out \
waiting 30000ms for recv operation to complete
[0]<stderr>:\t [[{{node DistributedGradientTape_Allreduce/cond_3/HorovodAllreduce_grad_0}}]] [Op:__inference_train_step_226]
"""
GLOO_LAUNCHER_TIMEOUT = """\
Process 0 exit with status code 1.
Terminating remaining workers after failure of Process 0.
Process 1 exit with status code 137.
RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus causing the job \
to be terminated. The first process to do so was:
Process name: 0
Exit code: 1
"""
# mpirun --tag-output with HOROVOD_STALL_CHECK_TIME_SECONDS=5, ..._SHUTDOWN_... = 12 and
# rank 1 asleep (alive) instead of submitting its allreduce (note the tag mid-line).
MPI_STALL = """\
[1,0]<stderr>:[2026-11-30 16:27:36.273127: W /tmp/pip-install-rgu5xup_/horovod/common/stall_inspector.cc:107] One or \
more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder \
of ranks for more than 5 seconds. This may indicate that different ranks are trying to submit different tensors or \
that only subset of ranks is submitting tensors, which will cause deadlock. 
[1,0]<stderr>:Missing ranks:
[1,0]<stderr>:1: [HorovodAllreduce][1,0]<stderr>:
[1,0]<stderr>:[2026-11-30 16:27:41.274331: E /tmp/pip-install-rgu5xup_/horovod/common/stall_inspector.cc:105] One or \
more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder \
of ranks for more than 5 seconds. This may indicate that different ranks are trying to submit different tensors or \
that only subset of ranks is submitting tensors, which will cause deadlock. 
[1,0]<stderr>:Missing ranks:
[1,0]<stderr>:1!: [HorovodAllreduce]
[1,0]<stderr>:One or more rank (marked by "!") is stalled for longer than 12 seconds. Will shutdown.
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[31671,1],0]
  Exit code:    1
--------------------------------------------------------------------------
"""


def test_engine_error_completes_tensorflow_s_announcing_line():
    assert F.engine_error(GLOO_RANK0_TIMEOUT) == ("UnknownError: Graph execution error: Timed out waiting 30000ms "
                                                  "for recv operation to complete")
    assert F.engine_error("[1]<stderr>:ValueError: boom\n") == "ValueError: boom"
    assert F.engine_error("[0]<stderr>:[x.cc:1] [0]: Horovod background loop uncaught exception: pair closed\n") == \
        "Horovod background loop uncaught exception: pair closed"
    assert F.engine_error("test hook: rank 1 exits after epoch 1 (kill)\n") == "test hook: rank 1 exits after epoch 1 (kill)"
    assert F.engine_error("") == ""


def test_parse_stall_reads_the_last_report():
    s = F.parse_stall(MPI_STALL)
    assert s == F.StallReport({1: "HorovodAllreduce"}, (1,), 12)
    assert s.describe() == ("rank 1 stalled: Horovod's stall inspector shut the job down after rank 1 had not "
                            "submitted HorovodAllreduce for more than 12 s (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS)")
    warning = F.parse_stall(MPI_STALL.split("[1,0]<stderr>:[2026-11-30 16:27:41")[0])
    assert warning == F.StallReport({1: "HorovodAllreduce"}, (), None)
    assert "reported rank 1 missing" in warning.describe()
    assert F.parse_stall(GLOO_LAUNCHER_TIMEOUT) is None


def test_stall_env_from_the_timeout():
    assert F.stall_env(120) == {F.STALL_CHECK_ENV: "15", F.STALL_SHUTDOWN_ENV: "30"}
    assert F.stall_env(900) == {F.STALL_CHECK_ENV: "60", F.STALL_SHUTDOWN_ENV: "225"}
    assert F.stall_env(20) == {F.STALL_CHECK_ENV: "5", F.STALL_SHUTDOWN_ENV: "5"}


def _job(tmp_path: Path, launcher_log: str, rank_logs: dict[int, str], name: str = "horovodrun") -> Path:
    (tmp_path / f"{name}.log").write_text(launcher_log)
    for rank, text in rank_logs.items():
        (tmp_path / f"rank.{rank}").mkdir()
        (tmp_path / f"rank.{rank}" / "stderr").write_text(text)
    return tmp_path / f"{name}.log"


def _board(path: Path, steps: list[int]) -> Path:
    np.asarray(steps, dtype=np.int64).tofile(path)
    return path


def test_gloo_timeout_of_rank0_is_blamed_on_the_rank_it_waited_for(tmp_path):
    log = _job(tmp_path, GLOO_LAUNCHER_TIMEOUT, {0: GLOO_RANK0_TIMEOUT, 1: "[1]<stderr>:started\n"})
    group = GroupResult(False, False, 80.0, ProcResult("horovodrun", 1, log), [])
    before = F.failure_error("horovodrun", group, log, tmp_path, 120)  # no watch: the launcher's word
    assert before.reason.startswith("rank 0 failed with exit code 1 under horovodrun (launcher exit code 1): "
                                    "UnknownError: Graph execution error: Timed out waiting 30000ms")
    watch = F.RankWatch(["--never-matches"], 30, _board(tmp_path / "p", [0, 0]), quiet_s=5)
    watch.read_board(time.monotonic() - 40)
    _board(tmp_path / "p", [101, 100])  # rank 0 started step 101, rank 1 did not, 31 s ago
    watch.read_board(time.monotonic() - 31)
    e = F.failure_error("horovodrun", group, log, tmp_path, 120, watch)
    assert e.failed_process == "rank 1"
    assert e.reason.startswith("rank 1 stopped making progress: it started 100 training steps while the others "
                               "started up to 101 and waited for it; no rank started a step for 31 s; then rank 0 "
                               "failed with exit code 1 under horovodrun (launcher exit code 1): UnknownError: Graph "
                               "execution error: Timed out waiting 30000ms for recv operation to complete; rank logs in ")
    assert "--- rank 1 stderr" in str(e) and "--- rank 0 stderr" in str(e)
    reason = failure_reason(e)
    assert reason.startswith("HorovodJobError: rank 1 stopped making progress") and len(reason) <= 500
    assert not reason.removesuffix(" [...]").endswith(":") and "The first process to do so was" not in reason


def test_a_rank_one_step_behind_a_crash_is_not_blamed(tmp_path):
    log = _job(tmp_path, GLOO_LAUNCHER_TIMEOUT, {0: "[0]<stderr>:ValueError: rank 0's own bug\n"})
    watch = F.RankWatch(["--never-matches"], 30, _board(tmp_path / "p", [101, 100]), quiet_s=5)
    watch.read_board(time.monotonic())  # the board moved a moment ago
    e = F.failure_error("horovodrun", GroupResult(False, False, 9.0, ProcResult("horovodrun", 1, log)), log,
                        tmp_path, 120, watch)
    assert e.failed_process == "rank 0" and e.reason.startswith("rank 0 failed with exit code 1")
    assert "ValueError: rank 0's own bug" in e.reason


def test_stall_inspector_shutdown_is_blamed_on_the_stalled_rank(tmp_path):
    (tmp_path / "1" / "rank.0").mkdir(parents=True)
    (tmp_path / "1" / "rank.0" / "stderr").write_text(
        "[1,0]<stderr>:tensorflow.python.framework.errors_impl.UnknownError: Horovod has been shut down. This was "
        "caused by an exception on one of the ranks or an attempt to allreduce after one of the ranks finished.\n")
    log = tmp_path / "mpirun.log"
    log.write_text(MPI_STALL)
    e = F.failure_error("mpirun", GroupResult(False, False, 50.0, ProcResult("mpirun", 1, log)), log, tmp_path, 120)
    assert e.failed_process == "rank 1"
    assert e.reason.startswith("rank 1 stalled: Horovod's stall inspector shut the job down after rank 1 had not "
                               "submitted HorovodAllreduce for more than 12 s (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS); "
                               "then rank 0 failed with exit code 1 under mpirun (launcher exit code 1): "
                               "UnknownError: Horovod has been shut down.")


def test_timeout_names_the_stalled_rank_when_known(tmp_path):
    log = _job(tmp_path, "", {})
    watch = F.RankWatch(["--never-matches"], 0, _board(tmp_path / "p", [7, 6]), quiet_s=5)
    watch.read_board(time.monotonic() - 50)
    e = F.failure_error("mpirun", GroupResult(False, True, 121.0), log, tmp_path, 120, watch)
    assert e.failed_process == "rank 1"
    assert e.reason.startswith("rank 1 stopped making progress: it started 6 training steps")
    assert "; mpirun timed out after 120 s (all processes killed)" in e.reason


def test_watch_names_a_stopped_process_ends_the_job_and_kills_it(tmp_path):
    marker = ["-c", "import time; time.sleep(120)", "--distbench-test-marker", str(tmp_path)]
    p = subprocess.Popen([sys.executable, *marker], env={**os.environ, "HOROVOD_RANK": "1"})
    try:
        watch = F.RankWatch(marker[:1] + marker[1:], stall_s=1.0, every_s=0.0)
        time.sleep(0.5)
        assert watch() == "" and watch.pids[1][0] == p.pid and not watch.stopped_since
        os.kill(p.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        reason = ""
        while not reason and time.monotonic() < deadline:
            reason = watch()
            time.sleep(0.2)
        assert reason.startswith(f"rank 1 stopped making progress: its process (pid {p.pid}) was stopped (state T, "
                                 "e.g. by SIGSTOP) for ")
        assert reason.endswith("past the stall limit of 1 s (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS), so the job was ended")
        assert p.pid in watch.kill_leftovers()
        assert p.wait(5) == -signal.SIGKILL
    finally:
        if p.poll() is None:
            p.kill()


def test_progress_board_round_trip(tmp_path, monkeypatch):
    board = F.new_progress_board(tmp_path / "logs" / "progress.int64", 3)
    monkeypatch.setenv(F.PROGRESS_ENV, str(board))
    record = F.open_progress_board(2, 3)
    record(41)
    assert list(np.fromfile(board, dtype=np.int64)) == [0, 0, 41]
    assert F.open_progress_board(0, 4) is None  # a board for another world size is not used
    monkeypatch.delenv(F.PROGRESS_ENV)
    assert F.open_progress_board(0, 3) is None


def test_stall_test_hook_parses():
    assert faults.parse("1:2:stall", 1) == (1, 2, "stall")


# ---------------------------------------------------------------- for real
def _rank_process(out: Path, rank: int) -> psutil.Process | None:
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "worker" in cmd and "horovod" in cmd and str(out) in cmd:
            try:
                env = p.environ()
            except psutil.Error:
                continue
            if str(rank) in (env.get("HOROVOD_RANK"), env.get("OMPI_COMM_WORLD_RANK")):
                return p
    return None


def _leftovers(out: Path) -> list[str]:
    return [" ".join(p.info["cmdline"]) for p in psutil.process_iter(["cmdline"])
            if str(out) in " ".join(p.info["cmdline"] or []) and p.pid != os.getpid()]


@pytest.mark.integration
@requires(module="horovod")
def test_sigstopped_rank_is_named_within_the_stall_limit(tmp_path):
    """The issue's input: horovod, 2 ranks, rank 1 SIGSTOPped mid-run. Before: `failed`,
    "rank 0 failed with exit code 1" (cut at "The first process to do so was:")."""
    out = tmp_path / "run"
    run = subprocess.Popen([sys.executable, "-m", "distbench", "run", "--strategies", "horovod", "--workers", "2",
                            "--epochs", "100000", "--timeout", "100", "--out", str(out)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stopped = None
    try:
        board = out / "logs" / "horovod_w2_r0" / "progress.int64"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and run.poll() is None:
            if board.exists() and np.fromfile(board, dtype=np.int64)[1] > 0:  # rank 1 trains
                stopped = _rank_process(out, 1)
                if stopped is not None:
                    break
            time.sleep(0.2)
        assert stopped is not None, "rank 1 never started training"
        stopped.send_signal(signal.SIGSTOP)
        t_stop = time.monotonic()
        assert run.wait(timeout=100) == 1, run.stderr.read()[-3000:]  # its only configuration failed
        ended_after = time.monotonic() - t_stop
    finally:
        if run.poll() is None:
            run.kill()
        if stopped is not None and stopped.is_running():
            stopped.kill()
    (r,) = read_records(out)
    assert r["status"] == "failed" and r["failed_process"] == "rank 1", r["reason"]
    assert r["reason"].startswith(f"HorovodJobError: rank 1 stopped making progress: its process (pid {stopped.pid}) "
                                  "was stopped (state T, e.g. by SIGSTOP) for "), r["reason"]
    assert ended_after < 25 + 20, ended_after  # the stall limit (a quarter of 100 s) plus teardown
    assert _leftovers(out) == []


@pytest.mark.integration
@requires(module="horovod", executable="mpirun")
def test_rank_stalled_alive_under_mpi_is_named_not_a_bare_timeout(tmp_path):
    """Rank 1 sleeps after epoch 1 (alive: its Horovod thread keeps answering) and Open
    MPI never times out. Before: `timeout`, "timed out after 100 s (all processes killed)"."""
    from tests.conftest import distbench

    out = tmp_path / "run"
    cp = distbench("run", "--strategies", "horovod_mpi", "--workers", "2", "--epochs", "3", "--timeout", "100",
                   "--out", str(out), env=faults.env("1:1:stall"), timeout=200)
    assert cp.returncode == 1, cp.stderr[-3000:]  # its only configuration failed
    (r,) = read_records(out)
    assert r["status"] == "failed" and r["failed_process"] == "rank 1", r["reason"]
    assert r["reason"].startswith("HorovodJobError: rank 1 stopped making progress: it started "), r["reason"]
    assert "past the stall limit of 25 s (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS)" in r["reason"]
    assert r["timings"]["total_s"] < 100
    assert "rank 1 exits after epoch 1 (stall)" in r["log_tail"] or "(stall)" in Path(
        out / "logs" / "horovod_mpi_w2_r0.log").read_text()
    assert _leftovers(out) == []
