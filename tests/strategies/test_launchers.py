"""Launch builders (exact argv/env) and the process-group runner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distbench.launch.commands import config_child_command
from distbench.launch.process import (STALLED_EXIT, ProcessGroup, ProcSpec, last_error_line, log_tail,
                                     run_processes, supervise)
from distbench.text import clip


def test_config_child_command_exact():
    argv, env = config_child_command(Path("/runs/x"), "mirrored_w2_r0", "mirrored", 2, 1234.5,
                                     base_env={"PATH": "/bin"})
    assert argv == [sys.executable, "-m", "distbench", "worker", "config", "--run-dir", "/runs/x",
                    "--key", "mirrored_w2_r0", "--strategy", "mirrored", "--workers", "2"]
    assert env == {"PATH": "/bin", "TF_CPP_MIN_LOG_LEVEL": "1", "PYTHONUNBUFFERED": "1",
                   "DISTBENCH_SPAWN_UNIX": "1234.5"}


def _py(code: str, log: Path, name: str = "p") -> ProcSpec:
    return ProcSpec(name, [sys.executable, "-c", code], dict(os.environ), log)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ok_group(tmp_path):
    res = run_processes([_py("print('hi')", tmp_path / "a.log"), _py("pass", tmp_path / "b.log")], 30)
    assert res.ok and not res.timed_out and log_tail(tmp_path / "a.log") == "hi"


def test_first_failure_kills_the_rest(tmp_path):
    pidfile = tmp_path / "pid"
    sleeper = f"import os,time; open({str(pidfile)!r},'w').write(str(os.getpid())); time.sleep(60)"
    t0 = time.monotonic()
    res = run_processes([_py(sleeper, tmp_path / "s.log", "worker 0"),
                         _py("import sys,time; time.sleep(1); print('dying'); sys.exit(7)", tmp_path / "f.log",
                             "worker 1")], 60)
    assert time.monotonic() - t0 < 20
    assert not res.ok and res.failed.name == "worker 1" and res.failed.returncode == 7
    assert res.reason(60) == "worker 1 failed with exit code 7"
    assert not _alive(int(pidfile.read_text()))


def test_timeout_kills_grandchildren(tmp_path):
    pidfile = tmp_path / "gc"
    code = ("import subprocess,sys,time;"
            f"p=subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)']);"
            f"open({str(pidfile)!r},'w').write(str(p.pid)); time.sleep(60)")
    res = run_processes([_py(code, tmp_path / "t.log")], timeout_s=2)
    assert res.timed_out and "timed out after 2 s" in res.reason(2)
    time.sleep(0.2)
    assert not _alive(int(pidfile.read_text()))


# supervise(): a stand-in child that behaves as TensorFlow does while its cluster forms
# (reports stages, then blocks; SIGTERM ignored, as TensorFlow's own handler swallows it).
_CHILD = ("import os, signal, sys, time\n"
          "from distbench.launch.process import report_stage\n"
          "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
          "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
          "for _ in range(int(sys.argv[2])): report_stage()\n"
          "time.sleep(float(sys.argv[3])); sys.exit(int(sys.argv[4]))\n")


def _child_argv(tmp_path: Path, stages: int, sleep_s: float, code: int = 0) -> list[str]:
    return [sys.executable, "-c", _CHILD, str(tmp_path / "child.pid"), str(stages), str(sleep_s), str(code)]


def test_supervise_passes_stages_and_the_exit_code(tmp_path):
    stages = [(30.0, lambda: "never"), (30.0, lambda: "never")]
    assert supervise(_child_argv(tmp_path, 2, 0.2, 7), dict(os.environ), stages) == 7


def test_supervise_stops_a_child_stuck_at_a_stage_with_one_line(tmp_path, capfd):
    t0 = time.monotonic()
    rc = supervise(_child_argv(tmp_path, 1, 60), dict(os.environ),
                   [(30.0, lambda: "never"), (1.0, lambda: "worker 0: stage 2 not reached")], grace_s=0.5)
    assert rc == STALLED_EXIT and time.monotonic() - t0 < 10
    assert capfd.readouterr().err == "distbench: error: worker 0: stage 2 not reached\n"
    time.sleep(0.2)
    assert not _alive(int((tmp_path / "child.pid").read_text()))


_SUPERVISOR = ("import os, sys\n"
               "from distbench.launch.process import supervise\n"
               "sys.exit(supervise(sys.argv[1:], dict(os.environ), [(60.0, lambda: 'x')] * 2, grace_s=1.0))\n")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_supervisor_ends_on_signal_with_a_child_that_ignores_it(tmp_path, sig):
    sup = subprocess.Popen([sys.executable, "-c", _SUPERVISOR, *_child_argv(tmp_path, 1, 60)])
    pidfile = tmp_path / "child.pid"
    t0 = time.monotonic()
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() - t0 < 30 and sup.poll() is None
        time.sleep(0.05)
    time.sleep(0.3)
    t1 = time.monotonic()
    sup.send_signal(sig)
    assert sup.wait(10) == -sig and time.monotonic() - t1 < 4
    time.sleep(0.2)
    assert not _alive(int(pidfile.read_text()))


def test_supervisor_dies_of_the_signal_that_killed_its_child(tmp_path):
    sup = subprocess.Popen([sys.executable, "-c", _SUPERVISOR, sys.executable, "-c",
                            "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert sup.wait(30) == -signal.SIGKILL


def test_watch_ends_the_group_with_its_reason(tmp_path):
    calls = []

    def watch() -> str:
        calls.append(1)
        return "rank 1 stopped making progress" if len(calls) >= 3 else ""

    res = run_processes([_py("import time; time.sleep(60)", tmp_path / "w.log")], 30, poll_s=0.05, watch=watch)
    assert not res.ok and not res.timed_out and res.failed is None and len(calls) == 3
    assert res.stopped == res.reason(30) == "rank 1 stopped making progress"


def test_log_tail_keeps_whole_lines(tmp_path):
    log = tmp_path / "l.log"
    log.write_text("first line that is long\nsecond\nthird line\n")
    assert log_tail(log, lines=40, max_chars=20) == "second\nthird line"
    assert log_tail(log, lines=1) == "third line"
    log.write_text("x" * 50)
    assert log_tail(log, max_chars=10) == "x" * 10  # one line longer than the limit: its end


def test_clip_cuts_at_sentence_ends_only():
    text = ("RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus causing the "
            "job to be terminated. The first process to do so was: Process name: 0 Exit code: 1")
    assert clip(text, 500) == text
    assert clip(text, 170) == ("RuntimeError: Horovod detected that one or more processes exited with non-zero status, "
                               "thus causing the job to be terminated. [...]")  # never "...was: [...]"
    assert clip("a first line.\nsecond line here, longer than the rest", 30) == "a first line. [...]"
    assert clip("one; two; three four five", 20) == "one; two; [...]"
    assert clip("see e.g. the log. More follows here", 28) == "see e.g. the log. [...]"  # e.g. is no end
    short = clip("word " * 200, 100)  # not even one sentence fits: cut at a space, marked
    assert len(short) <= 100 and short.endswith("word [...]")
    assert clip("x" * 2000, 500) == "x" * 494 + " [...]"
    for n in range(20, 200, 7):
        assert len(clip(text, n)) <= n


def test_last_error_line_is_clipped_not_cut():
    line = "ValueError: " + "bad value. " * 60
    out = last_error_line("noise\n" + line)
    assert len(out) <= 400 and out.endswith("bad value. [...]")


def test_last_error_line_skips_the_gpu_probe_and_prefers_a_fatal_line():
    # a tf_ps worker's reason in CI was TensorFlow's cuInit line, printed by every process
    # on a machine without a GPU driver, not what ended it
    probe = "E0000 00:00:1796304036.508584   22920 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error"
    assert last_error_line(f"{probe}\ntf-server worker 1 listening on 10.0.0.3:23457") == \
        "tf-server worker 1 listening on 10.0.0.3:23457"
    fatal = "F0000 00:00:17.1 1 grpc_server_lib.cc:9] Check failed: ok"
    assert last_error_line(f"{probe}\n{fatal}\nValueError: later, not the cause") == fatal
    assert last_error_line(f"{probe}\nRuntimeError: x\nlast words") == "RuntimeError: x"


def test_kill_session_reaches_processes_in_other_process_groups(tmp_path):
    """mpirun puts each rank in a process group of its own: killing the session kills them."""
    from distbench.launch.process import kill_session

    pidfile = tmp_path / "gc"
    code = ("import os,subprocess,sys,time;"
            "p=subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)'], process_group=0);"
            f"open({str(pidfile)!r},'w').write(str(p.pid)); time.sleep(60)")
    leader = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not (pidfile.exists() and pidfile.read_text()):
            assert time.monotonic() < deadline, "the grandchild never started"
            time.sleep(0.05)
        grandchild = int(pidfile.read_text())
        assert os.getpgid(grandchild) != leader.pid and os.getsid(grandchild) == leader.pid
        assert sorted(kill_session(leader.pid)) == sorted([leader.pid, grandchild])
        assert leader.wait(10) == -signal.SIGKILL
        time.sleep(0.2)
        assert not _running(grandchild)  # (orphaned, it may stay a zombie until init reaps it)
        assert kill_session(os.getsid(0)) == []  # never the caller's own session
    finally:
        leader.kill()
        leader.wait()


def _running(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_mpirun_leaves_no_session_directory(tmp_path, monkeypatch):
    # the user test: every interrupted mpi_ps sweep left /tmp/ompi.<host>.<uid>/pid.<mpirun pid>/
    # (contact file, topology, PMIx shared memory) behind; mpirun only removes it when it ends itself
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    log = tmp_path / "mpirun.log"
    spec = ProcSpec("mpirun", ["mpirun", "--allow-run-as-root", "-np", "1", "sleep", "60"], dict(os.environ), log)
    group = ProcessGroup([spec]).start()
    pid = group.procs[0].pid
    deadline = time.monotonic() + 30
    while not list(tmp_path.glob(f"ompi.*.{os.getuid()}/pid.{pid}")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(tmp_path.glob(f"ompi.*.{os.getuid()}/pid.{pid}")), log_tail(log)  # mpirun made it
    group.procs[0].send_signal(signal.SIGKILL)  # as a SIGKILL after the grace period would
    group.procs[0].wait(10)
    assert list(tmp_path.glob(f"ompi.*.{os.getuid()}/pid.{pid}"))  # left behind by the dead mpirun
    group.terminate(grace_s=1.0)
    assert not list(tmp_path.glob(f"ompi.*.{os.getuid()}/pid.{pid}"))
