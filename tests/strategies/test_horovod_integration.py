"""Horovod for real on localhost with 2 ranks on digits: horovodrun --gloo and mpirun.

The session's shared ``distbench run`` (``shared_sweep``: single, horovod, horovod_mpi and
others, 3 epochs) serves the accuracy,
fairness and in-sync assertions; the failure cases (a killed rank, averaging switched
off) each need their own run because they set test hooks in the environment.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from distbench.results.store import read_records
from distbench.launch import commands as C
from distbench.launch import ranks as Rk
from distbench.strategies import horovod as H
from distbench.launch.process import ProcSpec, log_tail, run_processes
from tests.conftest import distbench, requires
from tests.plugins import faults

pytestmark = [pytest.mark.integration, requires(module="horovod")]
needs_mpi = requires(executable="mpirun")


def _by_strategy(out: Path) -> dict[str, dict]:
    return {r["strategy"]: r for r in read_records(out)}


def _leftovers(marker: str) -> list[str]:
    """Command lines of live processes that mention ``marker`` (the run directory)."""
    import psutil

    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if marker in cmd and p.pid != os.getpid():
            found.append(f"{p.pid}: {cmd}")
    return found


@pytest.fixture(scope="module")
def main_run(shared_sweep: Path) -> Path:
    return shared_sweep


@pytest.mark.parametrize("name,controller", [("horovod", "gloo"),
                                             pytest.param("horovod_mpi", "mpi", marks=needs_mpi)])
def test_horovod_trains_like_single(main_run, name, controller):
    recs = _by_strategy(main_run)
    single, r = recs["single"], recs[name]
    assert r["status"] == "ok", (r["reason"], r.get("log_tail"))
    assert r["final_test_accuracy"] >= 0.85
    # Same optimizer steps on the same global batches as single: same accuracy up to float rounding.
    assert abs(r["final_test_accuracy"] - single["final_test_accuracy"]) <= 0.02
    assert r["initial_weights_sha256"] == single["initial_weights_sha256"]
    assert r["steps"] == single["steps"] and r["samples"] == single["samples"]
    assert r["replicas"] == 2 and r["per_replica_batch_size"] == 32 and r["global_batch_size"] == 64
    d = r["details"]
    assert d["replicas_in_sync_check"] == "passed"
    assert len(d["rank_weights_sha256"]) == 2 and len(set(d["rank_weights_sha256"])) == 1
    assert d["controller"] == controller and d["ranks"] == 2 and len(d["hosts"]) == 2
    assert d["intra_op_threads"] == max(1, (os.cpu_count() or 1) // 2)
    assert d["ring_bytes_per_rank_per_step"] == d["allreduce_bytes_per_step"]  # 2(N-1)/N = 1 for N = 2
    assert len(r["curve"]) == 3 and 0 < r["timings"]["train_s"] < r["timings"]["total_s"]
    logs = main_run / "logs" / f"{name}_w2_r0"
    assert Rk.rank_log_files(logs, 0) and Rk.rank_log_files(logs, 1)


def test_allreduce_rank_plus_one(tmp_path):
    script = tmp_path / "allreduce.py"
    script.write_text(textwrap.dedent("""
        import os
        import horovod.tensorflow as hvd
        import tensorflow as tf
        hvd.init()
        v = hvd.allreduce(tf.constant(float(hvd.rank() + 1)), op=hvd.Average).numpy()
        os.write(1, f"ALLREDUCE rank={hvd.rank()} size={hvd.size()} value={v}\\n".encode())
    """))
    prog = [sys.executable, str(script)]
    launchers = [("gloo", C.horovodrun_command(2, "localhost:2", prog, tmp_path / "g", 60, sys.executable))]
    if H.shutil.which("mpirun"):
        launchers.append(("mpi", C.mpirun_command(2, "localhost:2", prog, tmp_path / "m", sys.executable)))
    for name, (argv, env) in launchers:
        log = tmp_path / f"{name}.log"
        res = run_processes([ProcSpec(name, argv, env, log)], timeout_s=180)
        text = log.read_text()
        assert res.ok, log_tail(log)
        for rank in (0, 1):
            assert f"ALLREDUCE rank={rank} size=2 value=1.5" in text, text[-2000:]


def test_killed_rank_fails_naming_it_and_leaves_nothing(tmp_path):
    out = tmp_path / "run"
    strategies = "horovod,horovod_mpi" if H.shutil.which("mpirun") else "horovod"
    cp = distbench("run", "--strategies", strategies, "--workers", "2", "--epochs", "2", "--out", str(out),
                   env=faults.env("1:1:kill"))
    assert cp.returncode == 1 and f"ended ok ({len(strategies.split(','))} failed)" in cp.stderr, cp.stderr[-3000:]
    recs = _by_strategy(out)
    assert set(recs) == set(strategies.split(","))
    for name, r in recs.items():
        assert r["status"] == "failed", name
        assert r["reason"].startswith("HorovodJobError: rank 1 "), r["reason"]
        assert ("exit code 137" in r["reason"]) or ("signal 9" in r["reason"]), r["reason"]
        assert r["failed_process"] == "rank 1"
        assert "rank 1 exits after epoch 1" in r["log_tail"]
    assert _leftovers(str(out)) == []


def test_plain_tape_is_reported_as_diverged(tmp_path):
    out = tmp_path / "run"
    cp = distbench("run", "--strategies", "horovod", "--workers", "2", "--epochs", "1", "--out", str(out),
                   env={"DISTBENCH_HOROVOD_PLAIN_TAPE": "1"})
    assert cp.returncode == 1, cp.stderr[-3000:]  # its only configuration failed
    (r,) = read_records(out)
    assert r["status"] == "failed" and r["reason"].startswith("ranks diverged"), r["reason"]
    d = r["details"]
    assert d["replicas_in_sync_check"] == "failed" and len(set(d["rank_weights_sha256"])) == 2
    assert d["gradient_averaging"].startswith("none")


def test_cluster_entry_appends_a_record(tmp_path):
    """What a platform team runs: their own horovodrun on the worker entry, no harness."""
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[training]\nepochs = 3\n")
    out = tmp_path / "cluster"
    prog = H.worker_command(sys.executable, out, config_file=str(cfg))
    argv, env = C.horovodrun_command(2, "localhost:2", prog, tmp_path / "logs", 60, sys.executable,
                                     horovodrun=H.find_horovodrun())
    log = tmp_path / "horovodrun.log"
    res = run_processes([ProcSpec("horovodrun", argv, env, log)], timeout_s=240)
    assert res.ok, log_tail(log)
    (r,) = read_records(out)
    assert r["status"] == "ok" and r["strategy"] == "horovod" and r["workers"] == 2 and r["repeat"] == 0
    assert r["final_test_accuracy"] >= 0.85 and r["details"]["replicas_in_sync_check"] == "passed"
    assert r["provenance"]["launcher"].startswith("user (horovodrun") and len(r["curve"]) == 3
    assert "distbench: horovod (2 workers): ok test acc " in log.read_text()
    assert "record appended" in log.read_text()
    # the user test: keys the README says tools may rely on were missing from such a record
    t = r["timings"]
    assert r["log"] is None and set(t["phases"]) == {"engine_start_s", "trace_s", "train_s", "off_clock_s", "eval_s"}
    assert sum(t["phases"].values()) == pytest.approx(t["total_s"] + t["eval_s"], abs=0.01)
    cp = distbench("report", str(out))
    assert cp.returncode == 0 and "horovod" in cp.stdout
