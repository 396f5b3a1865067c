"""The sweep's shared MPI engine: mpi_ps configurations run one after another on one
mpirun job, record what separate mpirun jobs record, and a killed engine costs only the
configuration it was running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from distbench import config
from distbench.harness import engines as shared_engine
from distbench.harness.matrix import ConfigPoint
from distbench.harness.mpi_engine import SharedMPIEngine, mpirun_engine_command
from distbench.results.store import read_records
from tests.conftest import pids_with, requires


def test_mpirun_engine_command_exact():
    argv, env = mpirun_engine_command(3, Path("/r"), Path("/t/requests"), Path("/t/replies"), Path("/r/logs/e"),
                                      "/v/bin/python", base_env={"PATH": "/usr/bin"})
    assert argv == ["mpirun", "--allow-run-as-root", "-np", "3", "-H", "localhost:3", "--oversubscribe",
                    "-bind-to", "none", "-map-by", "slot", "--tag-output", "--output-filename", "/r/logs/e", "--mca", "mpi_yield_when_idle", "1",
                    "-x", "PATH", "-x", "TF_CPP_MIN_LOG_LEVEL", "-x", "PYTHONUNBUFFERED",
                    "/v/bin/python", "-m", "distbench", "worker", "mpi-ps-engine", "--run-dir", "/r",
                    "--requests", "/t/requests", "--replies", "/t/replies"]
    assert env["PATH"].split(os.pathsep)[0] == "/v/bin"


def test_rank_output_goes_to_the_configuration_s_rank_files_and_back(tmp_path):
    script = ("import os, sys\n"
              "from pathlib import Path\n"
              "from distbench.harness.mpi_engine import rank_output\n"
              "print('before', flush=True)\n"
              "with rank_output(Path(sys.argv[1]), 2):\n"
              "    print('inside')\n"
              "    os.write(2, b'native stderr\\n')\n"
              "print('after', flush=True)\n")
    cp = subprocess.run([sys.executable, "-c", script, str(tmp_path / "ranks")], capture_output=True, text=True,
                        timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == ["before", "after"] and cp.stderr == ""
    where = tmp_path / "ranks" / "1" / "rank.2"  # where mpirun --output-filename puts rank 2's
    assert (where / "stdout").read_text() == "inside\n" and (where / "stderr").read_text() == "native stderr\n"


def _workload(tmp_path: Path, toml: str = "") -> SimpleNamespace:
    p = tmp_path / "c.toml"
    p.write_text(toml)
    return SimpleNamespace(config=config.load(p), run_dir=tmp_path)


def test_engine_for_starts_none_where_configurations_run_alone(tmp_path):
    point = ConfigPoint("mpi_ps:adag", 2, 0)
    assert shared_engine.engine_for(_workload(tmp_path, "[mpi]\nshare_engine = false\n"), point) is None
    assert shared_engine.engine_for(_workload(tmp_path), ConfigPoint("mirrored", 2, 0)) is None
    clustered = _workload(tmp_path, '[cluster]\nhosts = ["10.0.0.2:2", "10.0.0.3:2"]\n')
    assert shared_engine.engine_for(clustered, point) is None  # each configuration its own placement


def test_engine_for_keeps_one_engine_per_rank_count_and_stops_it_for_others(tmp_path, monkeypatch):
    started, closed = [], []

    def start(self):
        self.proc = SimpleNamespace(pid=0, poll=lambda: None)
        started.append(self)
        return self

    monkeypatch.setattr(SharedMPIEngine, "start", start)
    monkeypatch.setattr(SharedMPIEngine, "close", lambda self, grace_s=10.0: closed.append(self))
    wl = _workload(tmp_path)
    a = shared_engine.engine_for(wl, ConfigPoint("mpi_ps:adag", 2, 0))
    assert isinstance(a, SharedMPIEngine) and a.ranks == 3 and a.log.name.startswith("mpi-engine-")
    assert shared_engine.engine_for(wl, ConfigPoint("mpi_ps:easgd", 2, 0, window=4)) is a  # same launch: shared
    b = shared_engine.engine_for(wl, ConfigPoint("mpi_ps:easgd", 4, 0))  # another -np: a new job
    assert b is not a and b.ranks == 5 and closed == [a]
    assert shared_engine.engine_for(wl, ConfigPoint("single", 1, 0)) is None and closed == [a, b]
    assert started == [a, b]


def _sweep(out: Path, *args: str, toml: str = "", timeout: float = 900) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "distbench", "run", "--repeats", "1"]
    if toml:
        (out.parent / f"{out.name}.toml").write_text(toml)
        cmd.append(str(out.parent / f"{out.name}.toml"))
    return subprocess.run(cmd + [*args, "--out", str(out)], capture_output=True, text=True, timeout=timeout)


@pytest.mark.integration
@requires(executable="mpirun", module="mpi4py")
def test_shared_engine_records_what_separate_jobs_record(tmp_path):
    # The separate run has only the configuration that reused the shared engine (the second):
    # the first runs on a fresh engine either way.
    shared, separate = tmp_path / "shared", tmp_path / "separate"
    # both with a config file: plain distbench run trains the embedded default's larger model
    for out, toml, names in ((shared, "[mpi]\nshare_engine = true\n", "mpi_ps:easgd,mpi_ps:averaging"),
                             (separate, "[mpi]\nshare_engine = false\n", "mpi_ps:averaging")):
        cp = _sweep(out, "--strategies", names, "--epochs", "2", toml=toml)
        assert cp.returncode == 0, cp.stderr[-3000:]
        assert not pids_with(f"--run-dir {out}")  # no mpirun or rank left behind
    sh, sep = ({r["strategy"]: r for r in read_records(d)} for d in (shared, separate))
    assert sh["mpi_ps:easgd"]["status"] == "ok" and sh["mpi_ps:easgd"]["details"]["mpi_engine"] == "shared"
    a, b = sh["mpi_ps:averaging"], sep["mpi_ps:averaging"]  # synchronous: deterministic
    assert a["status"] == b["status"] == "ok", (a["reason"], b["reason"])
    assert a["final_test_accuracy"] == b["final_test_accuracy"]
    assert [p["test_accuracy"] for p in a["curve"]] == [p["test_accuracy"] for p in b["curve"]]
    assert a["initial_weights_sha256"] == b["initial_weights_sha256"]
    assert a["details"]["per_worker_steps"] == b["details"]["per_worker_steps"] == [40, 40]
    assert a["details"]["mpi_engine"] == "shared" and "mpi_engine" not in b["details"]
    assert a["details"]["placement"] == b["details"]["placement"]
    assert a["log"].startswith("logs/mpi-engine-") and b["log"] == f"logs/{b['config_id']}_r0.log"
    for run in (shared, separate):  # each configuration's rank logs where a separate mpirun puts them
        assert "epoch 2/2 done" in (run / "logs" / f"{a['config_id']}_r0" / "ranks" / "1" / "rank.1" /
                                    "stdout").read_text()
    assert sh["mpi_ps:easgd"]["log"] == sh["mpi_ps:averaging"]["log"]  # one engine for both
    later = sh["mpi_ps:averaging"]["timings"]["phases"]
    assert later["workload_s"] == 0.0 and later["process_start_s"] < 1.0  # the engine was already up


def _rank_pid(out: Path, rank: int) -> int | None:
    for pid in pids_with(f"worker mpi-ps-engine --run-dir {out}"):
        try:
            if f"OMPI_COMM_WORLD_RANK={rank}\0".encode() in Path(f"/proc/{pid}/environ").read_bytes():
                return pid
        except OSError:
            pass
    return None


def _mpirun_pid(out: Path) -> int | None:
    for pid in pids_with(f"--run-dir {out}"):
        try:
            if os.path.basename(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()) == "mpirun":
                return pid
        except OSError:
            pass
    return None


@pytest.mark.integration
@requires(executable="mpirun", module="mpi4py")
@pytest.mark.parametrize("victim", ["rank 2", "mpirun"])
def test_a_killed_shared_engine_fails_its_configuration_and_the_next_ones_run_ok(tmp_path, victim, request):
    if victim == "mpirun" and not request.config.getoption("--long"):
        pytest.skip("--long: killing mpirun itself (the default run kills a rank, which mpirun then reports)")
    out = tmp_path / "run"
    sweep = subprocess.Popen([sys.executable, "-m", "distbench", "run", "--strategies",
                              "mpi_ps:downpour,mpi_ps:easgd", "--epochs", "40", "--repeats", "1", "--out", str(out)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed: list[int] = []

    def kill_once_training() -> None:  # the first configuration's replicas train: SIGKILL the victim
        log = out / "logs" / "mpi_ps-downpour_w2_r0" / "ranks" / "1" / "rank.2" / "stdout"
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and sweep.poll() is None:
            if log.exists() and "epoch 1/" in log.read_text(errors="replace"):
                pid = _rank_pid(out, 2) if victim == "rank 2" else _mpirun_pid(out)
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                return
            time.sleep(0.2)

    t = threading.Thread(target=kill_once_training)
    t.start()
    try:
        stdout, _ = sweep.communicate(timeout=900)
    finally:
        sweep.kill()
        t.join()
    assert sweep.returncode == 0, stdout[-3000:]
    assert killed, "the victim was never seen running the first configuration"
    recs = {r["strategy"]: r for r in read_records(out)}
    first, second = recs["mpi_ps:downpour"], recs["mpi_ps:easgd"]
    assert first["status"] == "failed", first
    assert "the shared MPI engine (mpirun pid " in first["reason"], first["reason"]
    if victim == "rank 2":
        assert "died: rank 2 was killed by signal 9 (SIGKILL) under mpirun" in first["reason"], first["reason"]
        assert first["failed_process"] == "rank 2"
    else:
        assert f"(mpirun pid {killed[0]}) died: signal 9 (SIGKILL)" in first["reason"], first["reason"]
    assert first["reason"].endswith("the next configuration starts a new one")
    assert second["status"] == "ok", second["reason"]
    assert second["details"]["mpi_engine"] == "shared" and second["final_test_accuracy"] > 0.5
    assert second["log"] != first["log"]  # a fresh engine
    assert not pids_with(f"--run-dir {out}")  # no mpirun or rank left behind


@pytest.mark.integration
@requires(executable="mpirun", module="mpi4py")
def test_a_configuration_past_its_timeout_gets_a_timeout_record_and_no_engine_is_left(tmp_path):
    out = tmp_path / "run"
    t0 = time.monotonic()
    cp = _sweep(out, "--strategies", "mpi_ps:downpour", "--epochs", "3000", "--timeout", "30")
    assert cp.returncode == 1, cp.stderr[-3000:]  # its only configuration timed out
    assert time.monotonic() - t0 < 200
    (rec,) = read_records(out)
    assert rec["status"] == "timeout", rec
    assert rec["reason"].startswith("timed out after 30 s (the shared MPI engine was stopped; the next configuration "
                                    "starts a new one); it was "), rec["reason"]
    assert rec["reason"].endswith(" when stopped") and ("training, epoch" in rec["reason"] or "starting" in rec["reason"])
    assert 30 <= rec["timings"]["total_s"] < 45  # counted from the configuration's spawn, engine start included
    assert not pids_with(f"--run-dir {out}")


def test_a_previous_engine_is_stopped_before_the_next_configuration_s_clock(tmp_path, monkeypatch):
    """Stopping the previous shared engine (seconds for Spark) is on no configuration's clock:
    a user's default sweep showed single's start-up above its total after a spark_ps row."""
    from distbench.harness import runner

    events = []
    running = SimpleNamespace(alive=True, close=lambda grace_s=10.0: events.append(("closed", time.time())))
    monkeypatch.setattr(shared_engine, "_RUNNING", [(("spark", "local[2]", 1), running)])
    spawned = []

    def no_child(run_dir, key, strategy, workers, spawn_unix, **kw):  # the clock's start, then stop there
        spawned.append(spawn_unix)
        raise RuntimeError("stop here")

    monkeypatch.setattr(runner.commands, "config_child_command", no_child)
    wl = SimpleNamespace(config=config.load(None), run_dir=tmp_path)
    monkeypatch.setattr(runner.registry, "get", lambda name: SimpleNamespace(
        is_available=lambda cfg, workers: SimpleNamespace(ok=True)))
    with pytest.raises(RuntimeError, match="stop here"):
        runner.run_point(wl, ConfigPoint("single", 1, 0), "r", {}, lambda: None)
    assert events and spawned and events[0][1] <= spawned[0] and shared_engine._RUNNING == []
    assert shared_engine.stop_unless_reused(wl, ConfigPoint("mpi_ps:adag", 2, 0)) is False
