"""End to end: ``distbench run`` starts real TensorFlow children on digits."""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from distbench.results.store import read_records
from tests.conftest import ROOT, distbench

pytestmark = pytest.mark.integration
PLUGIN_ENV = {"DISTBENCH_PLUGINS": "tests.plugins.faulty",
              "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def test_single_mirrored_tpu_and_a_crash(tmp_path):
    out = tmp_path / "run"
    cp = distbench("run", "--strategies", "single,mirrored,tpu,test_crash,test_segfault", "--workers", "2",
                   "--epochs", "3", "--repeats", "1", "--out", str(out), env=PLUGIN_ENV)
    assert cp.returncode == 0, cp.stderr[-3000:]
    recs = {r["strategy"]: r for r in read_records(out)}
    assert set(recs) == {"single", "mirrored", "tpu", "test_crash", "test_segfault"}
    for name in ("single", "mirrored"):
        r = recs[name]
        assert r["status"] == "ok", r["reason"]
        assert r["final_test_accuracy"] >= 0.85
        assert len(r["curve"]) == 3 and r["curve"][-1]["epoch"] == 3
        assert 0 < r["timings"]["train_s"] < r["timings"]["total_s"]
        assert r["samples_per_s"] > 0 and r["per_replica_batch_size"] * r["replicas"] == r["global_batch_size"]
        assert r["provenance"]["cpu_count"] == os.cpu_count()
        t = r["timings"]  # every second of the configuration is in one phase
        assert set(t["phases"]) == {"process_start_s", "workload_s", "engine_start_s", "trace_s", "train_s",
                                    "off_clock_s", "exit_s", "eval_s"}
        assert t["phases"]["train_s"] == pytest.approx(t["train_s"], abs=1e-3)
        assert sum(t["phases"].values()) == pytest.approx(t["total_s"] + t["eval_s"], abs=0.05)
    assert recs["single"]["initial_weights_sha256"] == recs["mirrored"]["initial_weights_sha256"]
    # the evaluated snapshots are not kept (their curve is in the record); the final weights are
    assert not list(out.glob("artifacts/*/snapshots.npz")) and len(list(out.glob("artifacts/*/final_weights.npz"))) == 2
    assert recs["mirrored"]["details"]["devices"] == ["/cpu:0", "/cpu:1"]
    assert recs["mirrored"]["replicas"] == 2 and recs["mirrored"]["per_replica_batch_size"] == 32
    assert recs["tpu"]["status"] == "unavailable" and "TPUClusterResolver" in recs["tpu"]["reason"]
    crash = recs["test_crash"]
    assert crash["status"] == "failed" and "exit code 3" in crash["reason"] and "about to crash" in crash["log_tail"]
    assert "dataset cache present: True" in crash["log_tail"]  # the configurations read the sweep's copy
    assert not (out / "workload" / "dataset-cache.npz").exists()  # removed when the sweep ends
    seg = recs["test_segfault"]  # a crash in native code: the signal, and where Python was (faulthandler)
    assert seg["status"] == "failed" and "signal 11 (SIGSEGV)" in seg["reason"], seg["reason"]
    assert "Fatal Python error: Segmentation fault" in seg["log_tail"] and "in launch" in seg["log_tail"], \
        seg["log_tail"]
    report = (out / "report.md").read_text()
    assert "| single | 1 | ok" in report and "- tpu (2 workers) (unavailable)" in report
    assert "single" in cp.stdout and "mirrored" in cp.stdout  # the table is printed
    assert re.search(r"^sweep: 5 configuration\(s\) in [\d.]+ s: training [\d.]+ s \(\d+%\)", cp.stdout, re.M)

    # --resume skips everything recorded: no new record, fast
    t0 = time.monotonic()
    cp = distbench("run", "--strategies", "single,mirrored,tpu,test_crash,test_segfault", "--workers", "2",
                   "--epochs", "3", "--out", str(out), "--resume", env=PLUGIN_ENV)
    assert cp.returncode == 0, cp.stderr[-2000:]
    assert len(read_records(out)) == 5 and time.monotonic() - t0 < 60


def test_timeout_record_and_no_process_left(tmp_path):
    out = tmp_path / "run"
    cp = distbench("run", "--strategies", "test_hang", "--epochs", "1", "--timeout", "20", "--out", str(out),
                   env=PLUGIN_ENV)
    assert cp.returncode == 1, cp.stderr[-2000:]  # nothing ended ok: no answer, which CI must see
    assert (f"distbench: no configuration of this sweep ended ok (1 timeout): each one's reason is under 'Not run "
            f"or failed' in {out / 'report.md'}") in cp.stderr
    cp = distbench("run", "--out", str(out), "--resume", env=PLUGIN_ENV)  # a CI retry step: still no answer
    assert cp.returncode == 1 and (f"no configuration of {out} ended ok (1 timeout), and --resume runs only what is "
                                   "not recorded (a new --out runs them again)") in cp.stderr, cp.stderr[-2000:]
    (rec,) = read_records(out)
    assert rec["status"] == "timeout" and "timed out after 20 s" in rec["reason"]
    assert rec["reason"].endswith("; it was starting when stopped"), rec["reason"]  # the hang never trained
    pid = int((out / "artifacts" / "test_hang_w2_r0" / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_bad_input_exits_2_with_one_line(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[run]\nworkers = [0]\n")
    cp = distbench("run", str(cfg), "--out", str(tmp_path / "x"))
    assert cp.returncode == 2 and "Traceback" not in cp.stderr
    assert cp.stderr.strip() == "distbench: error: run.workers = 0: must be >= 1"
    assert not (tmp_path / "x").exists()
    cp = distbench("run", "--workers", "two")
    assert cp.returncode == 2 and "--workers 'two'" in cp.stderr
    cp = distbench("run", "--strategies", "nope", "--out", str(tmp_path / "y"))
    assert cp.returncode == 2 and "unknown strategy 'nope'" in cp.stderr and not (tmp_path / "y").exists()
    cp = distbench("report", str(tmp_path))
    assert cp.returncode == 2 and "holds no results.jsonl" in cp.stderr


def test_env_and_list():
    cp = distbench("list")
    assert cp.returncode == 0 and "mirrored" in cp.stdout and "digits" in cp.stdout
    cp = distbench("env", "--json")
    assert cp.returncode == 0, cp.stderr
    info = json.loads(cp.stdout)
    by = {s["name"]: s for s in info["strategies"]}
    assert by["single"]["available"] and by["mirrored"]["available"]
    assert not by["tpu"]["available"] and "TPUClusterResolver" in by["tpu"]["reason"]
    assert info["provenance"]["versions"]["tensorflow"].startswith("2.21")
