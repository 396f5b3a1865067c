"""Horovod launch side without an engine: exact argv/env of the builders, failure
parsing of real horovodrun/mpirun output, the Horovod build probe's parser, test hooks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from distbench.config import ConfigError
from distbench.launch import commands as C
from distbench.launch import ranks as Rk
from distbench.strategies import horovod as H
from distbench.strategies import horovod_rank as R
from distbench.strategies import registry
from tests.plugins import faults
from distbench.launch.process import GroupResult, ProcResult

PY = "/venv/bin/python"
BASE = {"PATH": "/usr/bin:/bin", "HOME": "/root"}


def test_worker_command_exact():
    assert H.worker_command(PY, Path("/runs/x"), "horovod_w2_r0") == [
        PY, "-m", "distbench", "worker", "horovod", "--run-dir", "/runs/x", "--key", "horovod_w2_r0"]
    assert H.worker_command(PY, Path("/runs/x"), config_file="cfg.toml") == [
        PY, "-m", "distbench", "worker", "horovod", "--run-dir", "/runs/x", "--config", "cfg.toml"]
    assert H.worker_command(PY, Path("/runs/x"), "k", threads=1)[-2:] == ["--threads", "1"]


def test_horovodrun_command_exact():
    prog = H.worker_command(PY, Path("/runs/x"), "horovod_w2_r0")
    argv, env = C.horovodrun_command(2, C.localhost_hosts(2), prog, Path("/runs/x/logs/horovod_w2_r0"), 60, PY,
                                     base_env=BASE, horovodrun="/venv/bin/horovodrun")
    assert argv == ["/venv/bin/horovodrun", "-np", "2", "-H", "localhost:2", "--gloo", "--start-timeout", "60",
                    "--output-filename", "/runs/x/logs/horovod_w2_r0",
                    PY, "-m", "distbench", "worker", "horovod", "--run-dir", "/runs/x", "--key", "horovod_w2_r0"]
    assert env == {"PATH": "/venv/bin:/usr/bin:/bin", "HOME": "/root", "TF_CPP_MIN_LOG_LEVEL": "1",
                   "PYTHONUNBUFFERED": "1"}


def test_horovodrun_by_default_runs_horovods_command_line_without_its_gloo_check(monkeypatch):
    argv, _ = C.horovodrun_command(2, "a:1,b:1", ["prog"], Path("/o"), 60, PY, base_env=BASE, options=["-p", "2222"])
    assert argv == [PY, "-m", "distbench.launch.horovodrun", "-p", "2222", "-np", "2", "-H", "a:1,b:1", "--gloo",
                    "--start-timeout", "60", "--output-filename", "/o", "prog"]
    launch = pytest.importorskip("horovod.runner.launch")
    from distbench.launch import horovodrun

    import horovod.common.util as hvd_util

    monkeypatch.setattr(launch, "gloo_built", launch.gloo_built)  # restored afterwards
    monkeypatch.setattr(hvd_util, "_check_extension_lambda", lambda *a: pytest.fail("horovodrun's own check ran"))
    monkeypatch.setattr(sys, "argv", ["/x/horovodrun.py", "-np", "2"])
    seen = []
    monkeypatch.setattr(launch, "run_commandline", lambda: seen.append((launch.gloo_built(verbose=True), sys.argv)))
    horovodrun.main()  # Horovod's own check imports horovod.tensorflow in a forked child: it must not run
    assert seen == [(True, ["horovodrun", "-np", "2"])]


def test_mpirun_command_exact():
    prog = H.worker_command(PY, Path("/runs/x"), "horovod_mpi_w2_r0")
    base = {**BASE, "PYTHONPATH": "/src", "TF_CPP_MIN_LOG_LEVEL": "2", "DISTBENCH_HOROVOD_PLAIN_TAPE": "1",
            "HOROVOD_CYCLE_TIME": "1", "UNRELATED": "x"}
    argv, env = C.mpirun_command(2, "localhost:2", prog, Path("/runs/x/logs/k"), PY, base_env=base,
                                 mpirun="/usr/bin/mpirun")
    assert argv == ["/usr/bin/mpirun", "--allow-run-as-root", "-np", "2", "-H", "localhost:2", "--oversubscribe",
                    "-bind-to", "none", "-map-by", "slot", "--tag-output", "--output-filename", "/runs/x/logs/k", "--mca", "mpi_yield_when_idle", "1",
                    "-x", "PATH", "-x", "PYTHONPATH", "-x", "TF_CPP_MIN_LOG_LEVEL", "-x", "PYTHONUNBUFFERED",
                    "-x", "DISTBENCH_HOROVOD_PLAIN_TAPE", "-x", "HOROVOD_CYCLE_TIME", *prog]
    assert env == {**base, "PATH": "/venv/bin:/usr/bin:/bin", "PYTHONUNBUFFERED": "1"}


def test_mpirun_command_leaves_a_users_yield_setting_to_open_mpi():
    argv, env = C.mpirun_command(2, "localhost:2", ["p"], Path("/o"), PY,
                                 base_env={**BASE, "OMPI_MCA_mpi_yield_when_idle": "0"})
    assert "mpi_yield_when_idle" not in argv and env["OMPI_MCA_mpi_yield_when_idle"] == "0"


def test_launcher_env_keeps_venv_first_once():
    env = C.launcher_env(PY, {"PATH": "/usr/bin:/venv/bin:/bin"})
    assert env["PATH"] == "/venv/bin:/usr/bin:/bin"
    assert C.launcher_env(PY, {"PATH": "/venv/bin:/bin"})["PATH"] == "/venv/bin:/bin"
    assert C.launcher_env(PY, {})["PATH"] == "/venv/bin"


def test_hosts_and_start_timeout():
    assert C.localhost_hosts(4) == "localhost:4"
    with pytest.raises(ConfigError, match="at least 1 rank"):
        C.localhost_hosts(0)
    assert [C.start_timeout(t) for t in (10, 300, 900, 5000)] == [30, 100, 300, 300]


# Real launcher output (docs: captured on the 2-core CI machine).
GLOO_KILLED = """\
[1]<stderr>:test hook DISTBENCH_HOROVOD_TEST_EXIT: rank 1 exits after epoch 1 (kill)
[1]<stderr>:Killed
[0]<stderr>:[2026-11-30 02:08:25.700390: E horovod/common/operations.cc:697] [0]: Horovod background loop \
uncaught exception: [gloo/transport/tcp/pair.cc:589] Read error [127.0.0.1]:39830: Connection reset by peer
Process 1 exit with status code 137.
Terminating remaining workers after failure of Process 1.
[0]<stderr>:Terminated
Process 0 exit with status code 143.
Traceback (most recent call last):
RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus causing the job \
to be terminated. The first process to do so was:
Process name: 1
Exit code: 137
"""

MPI_EXIT = """\
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[28560,1],1]
  Exit code:    9
--------------------------------------------------------------------------
"""

MPI_SIGNAL = """\
--------------------------------------------------------------------------
mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).
--------------------------------------------------------------------------
"""


def test_parse_launcher_failure():
    assert Rk.parse_launcher_failure(GLOO_KILLED) == Rk.RankFailure(1, exit_code=137)
    assert Rk.parse_launcher_failure(MPI_EXIT) == Rk.RankFailure(1, exit_code=9)
    assert Rk.parse_launcher_failure(MPI_SIGNAL) == Rk.RankFailure(1, signal=9)
    assert Rk.parse_launcher_failure("Process name: 0\nExit code: 1\n") == Rk.RankFailure(0, exit_code=1)
    assert Rk.parse_launcher_failure("all good") is None


def test_rank_failure_describe():
    assert Rk.RankFailure(1, exit_code=137).describe() == "rank 1 failed with exit code 137 (128 + SIGKILL)"
    assert Rk.RankFailure(0, exit_code=1).describe() == "rank 0 failed with exit code 1"
    assert Rk.RankFailure(1, signal=9).describe() == "rank 1 was killed by signal 9 (SIGKILL)"
    assert Rk.RankFailure(2, exit_code=-15).describe() == "rank 2 failed with exit code -15 (SIGTERM)"


def test_rank_log_files_both_layouts(tmp_path):
    for d in ("g/rank.0", "g/rank.1", "m/1/rank.0", "m/1/rank.1"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "stdout").write_text("out\n")
        (tmp_path / d / "stderr").write_text("err\n")
    assert Rk.rank_log_files(tmp_path / "g", 1) == [tmp_path / "g/rank.1/stderr", tmp_path / "g/rank.1/stdout"]
    assert Rk.rank_log_files(tmp_path / "m", 0) == [tmp_path / "m/1/rank.0/stderr", tmp_path / "m/1/rank.0/stdout"]
    assert Rk.rank_log_files(tmp_path / "m", 5) == []


def test_failure_error_names_rank_exit_code_and_tail(tmp_path):
    log = tmp_path / "horovodrun.log"
    log.write_text(GLOO_KILLED)
    (tmp_path / "rank.1").mkdir()
    (tmp_path / "rank.1" / "stderr").write_text(
        "[1]<stderr>:I0000 00:00:1.0 1 port.cc:153] oneDNN custom operations are on. blah\n"
        "[1]<stderr>:ValueError: boom\n")
    (tmp_path / "rank.1" / "stdout").write_text("")
    group = GroupResult(False, False, 3.0, ProcResult("horovodrun", 1, log), [])
    e = Rk.failure_error("horovodrun", group, log, tmp_path, 60)
    first = str(e).splitlines()[0]
    assert first.startswith("rank 1 failed with exit code 137 (128 + SIGKILL) under horovodrun (launcher exit code 1)")
    assert e.failed_process == "rank 1"
    assert "ValueError: boom" in str(e) and "oneDNN" not in str(e) and "rank 1 stdout" not in str(e)


def test_failure_error_without_rank_and_timeout(tmp_path):
    log = tmp_path / "mpirun.log"
    log.write_text("mpirun was unable to launch the specified application\n")
    e = Rk.failure_error("mpirun", GroupResult(False, False, 1.0, ProcResult("mpirun", 1, log)), log, tmp_path, 60)
    assert str(e).startswith("mpirun failed with exit code 1 before any rank reported a failure: mpirun was unable")
    assert e.failed_process == "mpirun"
    e = Rk.failure_error("mpirun", GroupResult(False, True, 61.0), log, tmp_path, 60)
    assert str(e).startswith("mpirun timed out after 60 s") and e.failed_process == "mpirun"


BUILD_LINE = ("noise before\ndistbench-horovod-build " + json.dumps({
    "version": "0.28.1", "frameworks": {"TensorFlow": True}, "controllers": {"MPI": True, "Gloo": False},
    "tensor ops": {"NCCL": False, "DDL": False, "CCL": False, "MPI": True, "Gloo": True}}))


def test_parse_build_probe():
    s = H.parse_build_probe("WARNING: noise\nI0000 port.cc] oneDNN\n" + BUILD_LINE)
    assert s["controllers"] == {"MPI": True, "Gloo": False} and s["tensor ops"]["Gloo"] is True
    assert H.parse_build_probe("nothing here") == {}
    assert H.parse_build_probe("distbench-horovod-build {not json") == {}
    assert H.parse_build_probe("distbench-horovod-build [1, 2]") == {}


def test_build_summary():
    assert H.build_summary(H.parse_build_probe(BUILD_LINE)) == (
        "Horovod 0.28.1 build: frameworks TensorFlow; controllers MPI; tensor ops MPI, Gloo")


def test_probe_reads_the_controller_flags(monkeypatch):
    monkeypatch.setattr(H, "find_horovodrun", lambda: "/fake/horovodrun")
    monkeypatch.setattr(H, "_PROBES", {sys.executable: H.Availability(True, BUILD_LINE.splitlines()[-1])})
    monkeypatch.setattr(H.importlib.util, "find_spec", lambda name: type("S", (), {"origin": "/x/__init__.py"})())
    monkeypatch.setattr(H, "horovod_package_dir", lambda: None)
    gloo = H.probe("gloo")
    assert not gloo.ok and "without the Gloo controller" in gloo.reason
    monkeypatch.setattr(H.shutil, "which", lambda name: None)
    mpi = H.probe("mpi")
    assert not mpi.ok and "mpirun not found" in mpi.reason
    monkeypatch.setattr(H.shutil, "which", lambda name: "/usr/bin/mpirun" if name == "mpirun" else None)
    assert "rsh agent" in H.probe("mpi").reason
    monkeypatch.setattr(H.shutil, "which", lambda name: "/usr/bin/" + name)
    assert H.probe("mpi") == H.Availability(True, H.build_summary(H.parse_build_probe(BUILD_LINE)))


def test_build_probe_failures_say_why(monkeypatch):
    class ImportFails:
        returncode, stdout = 1, ""
        stderr = ("Traceback (most recent call last):\nhorovod.common.exceptions.HorovodVersionMismatchError: "
                  "Framework tensorflow installed with version 2.21.0 but found version 2.22.0.\n")

    class Silent:
        returncode, stdout, stderr = 0, "something else\n", ""

    monkeypatch.setattr(H.subprocess, "run", lambda argv, **k: ImportFails())
    a = H._build_probe("/fake/python")
    assert not a.ok and a.reason.startswith("import horovod.tensorflow fails here: HorovodVersionMismatchError: "
                                            "Framework tensorflow installed with version 2.21.0 but found version "
                                            "2.22.0") and "make setup" in a.reason
    monkeypatch.setattr(H.subprocess, "run", lambda argv, **k: Silent())
    a = H._build_probe("/fake/python")
    assert not a.ok and "printed no build flags: something else" in a.reason


def test_build_probe_is_cached_until_the_install_changes(tmp_path):
    calls = tmp_path / "calls"
    out = tmp_path / "out.txt"
    out.write_text(BUILD_LINE + "\n")
    fake = tmp_path / "python"  # stands in for the interpreter: counts its runs, prints the probe's line
    fake.write_text(f"#!/bin/sh\necho x >> {calls}\ncat {out}\n")
    fake.chmod(0o755)
    pkg = tmp_path / "horovod"
    (pkg / "tensorflow").mkdir(parents=True)
    lib = pkg / "tensorflow" / "mpi_lib.so"
    lib.write_bytes(b"v1")
    cache = tmp_path / "cache"

    def probe() -> H.Availability:
        return H.cached_build_probe(str(fake), pkg, cache)

    first = probe()
    assert first == H.Availability(True, BUILD_LINE.splitlines()[-1])
    assert probe() == first and calls.read_text().count("x") == 1  # second answer from the cache
    lib.write_bytes(b"v2, rebuilt")  # a rebuilt Horovod is probed again
    assert probe().ok and calls.read_text().count("x") == 2
    (saved,) = cache.glob("horovod-build-*.json")
    saved.write_text("{not json")  # corrupt cache: probed, rewritten
    assert probe().ok and calls.read_text().count("x") == 3
    assert probe().ok and calls.read_text().count("x") == 3
    other = tmp_path / "other-venv-python"  # another interpreter keeps its own answer: no eviction
    other.write_bytes(fake.read_bytes())
    other.chmod(0o755)
    assert H.cached_build_probe(str(other), pkg, cache).ok and calls.read_text().count("x") == 4
    assert probe().ok and H.cached_build_probe(str(other), pkg, cache).ok and calls.read_text().count("x") == 4
    out.write_text("no flags")  # failures are not cached
    lib.write_bytes(b"v3")
    assert not probe().ok and not probe().ok and calls.read_text().count("x") == 6


def test_parallel_probes_run_one_build_probe(monkeypatch):
    # distbench env probes horovod and horovod_mpi in parallel threads: they ran the probe twice at once
    import threading
    import time

    from distbench.strategies.base import Availability

    if H.find_horovodrun() is None or H.horovod_package_dir() is None:
        pytest.skip("horovod is not installed")
    calls = []

    def slow_probe(python, package):
        calls.append(python)
        time.sleep(0.3)
        return Availability(False, "probe stand-in")

    monkeypatch.setattr(H, "cached_build_probe", slow_probe)
    monkeypatch.setattr(H, "_PROBES", {})
    monkeypatch.setattr(H, "tensorflow_pairing", lambda package: type("P", (), {"problem": lambda self: ""})())
    threads = [threading.Thread(target=H.probe, args=(c,)) for c in ("gloo", "mpi")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1  # (fails with the lock replaced by a no-op: 2)


def test_registered_names():
    assert {"horovod", "horovod_mpi"} <= set(registry.names())
    assert registry.get("horovod").controller == "gloo" and registry.get("horovod_mpi").controller == "mpi"
    assert registry.get("horovod").replicas(4) == 4


def test_test_exit_hook_parsing():
    assert faults.parse("1:2:kill", 1) == (1, 2, "kill") and faults.parse("1:2:kill", 0) is None
    assert faults.parse("0:1", 0) == (0, 1, "9")
    with pytest.raises(ConfigError, match="REPLICA:EPOCH"):
        faults.parse("one", 0)


def test_configured_threads(tmp_path):
    assert R.configured_threads(tmp_path) == 0
    cfg = tmp_path / "c.toml"
    cfg.write_text("[training]\nthreads = 3\n")
    assert R.configured_threads(tmp_path, str(cfg)) == 3
    (tmp_path / "config.json").write_text(json.dumps({"training": {"threads": 5}}))
    assert R.configured_threads(tmp_path, str(cfg)) == 5
