"""The sweep's shared Spark engine: spark_ps configurations run one after another in one
Spark application, and a killed engine costs only the configuration it was running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from distbench.results.store import read_records
from tests.conftest import pids_with

pytestmark = pytest.mark.integration


def test_a_killed_shared_engine_fails_its_configuration_and_the_next_ones_run_ok(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "distbench", "run", "--strategies", "spark_ps:downpour,spark_ps:easgd",
           "--epochs", "40", "--repeats", "1", "--out", str(out)]
    sweep = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed: list[int] = []

    def kill_engine_once_training() -> None:  # the first configuration's job is running: SIGKILL the engine
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and sweep.poll() is None:
            logs = list((out / "logs").glob("spark-engine-*.log")) if (out / "logs").exists() else []
            if any("distbench spark engine: spark_ps-downpour_w2_r0" in p.read_text(errors="replace") for p in logs):
                time.sleep(3)
                for pid in pids_with(f"worker spark-engine --run-dir {out}"):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                return
            time.sleep(0.2)

    t = threading.Thread(target=kill_engine_once_training)
    t.start()
    try:
        stdout, _ = sweep.communicate(timeout=900)
    finally:
        sweep.kill()
        t.join()
    assert sweep.returncode == 0, stdout[-3000:]
    assert killed, "the engine was never seen running the first configuration"
    recs = {r["strategy"]: r for r in read_records(out)}
    first, second = recs["spark_ps:downpour"], recs["spark_ps:easgd"]
    assert first["status"] == "failed", first
    assert f"the shared Spark engine (pid {killed[0]}) died: signal 9 (SIGKILL)" in first["reason"]
    assert second["status"] == "ok", second["reason"]
    assert second["details"]["spark_session"] == "shared" and second["final_test_accuracy"] > 0.5
    assert not pids_with(f"--run-dir {out}")  # no engine, JVM or Python worker left behind
