"""Launch builders (exact argv/env) and the process-group runner."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from distbench.strategies.launchers import ProcSpec, config_child_command, log_tail, run_processes


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
