"""Launch builders (exact argv/env) and the process-group runner."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from distbench.strategies.launchers import (ProcSpec, clip, config_child_command, last_error_line, log_tail,
                                             run_processes)


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
