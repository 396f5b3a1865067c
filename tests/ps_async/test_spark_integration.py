"""Spark integration: every spark_ps optimizer on local[2], spark-submit on a local
standalone cluster, and a cluster too small for the barrier stage."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distbench.results.store import read_records
from tests.conftest import distbench, requires

pytestmark = [pytest.mark.integration, requires(executable="java", module="pyspark")]

OPTIMIZERS = ["downpour", "adag", "dynsgd", "aeasgd", "eamsgd", "easgd", "averaging"]
DEFAULT_WINDOWS = {"downpour": 5, "adag": 12, "dynsgd": 5, "aeasgd": 32, "eamsgd": 32, "easgd": 32,
                   "averaging": None}
BIN = Path(sys.executable).parent


def test_every_optimizer_on_local_spark(tmp_path):
    out = tmp_path / "run"
    cp = distbench("run", "--strategies", "single," + ",".join(f"spark_ps:{o}" for o in OPTIMIZERS),
                   "--workers", "2", "--out", str(out), timeout=1500)
    assert cp.returncode == 0, cp.stderr[-3000:]
    recs = {r["strategy"]: r for r in read_records(out)}
    sha = recs["single"]["initial_weights_sha256"]
    for o in OPTIMIZERS:
        r = recs[f"spark_ps:{o}"]
        assert r["status"] == "ok", (o, r["reason"], r.get("log_tail", "")[-2000:])
        d = r["details"]
        assert r["initial_weights_sha256"] == sha
        if o != "eamsgd":  # the accuracy bar covers every optimizer but EAMSGD
            assert r["final_test_accuracy"] >= 0.8, (o, r["final_test_accuracy"])
        assert d["communication_window"] == DEFAULT_WINDOWS[o]
        assert d["per_worker_steps"] == [200, 200]  # 20 steps/epoch x 10 epochs, each replica
        assert d["spark_master"] == "local[2]" and d["rejected"]["total"] == 0
        assert len(r["curve"]) == 10 and r["curve"][-1]["epoch"] == 10
        if o in ("easgd", "averaging"):
            assert d["sync_rounds"] == d["centre_clock"] > 0 and d["commits"] == 0
        else:
            exchanges = -(-200 // DEFAULT_WINDOWS[o])  # the last partial window is committed too
            assert d["per_worker_exchanges"] == [exchanges, exchanges]
            assert d["commits"] == 2 * exchanges == d["staleness"]["count"]
            assert sum(d["staleness"]["histogram"].values()) == d["commits"]
        assert d["bytes_received"] > 0 and d["bytes_sent"] > 0
    assert "spark_ps:adag" in (out / "report.md").read_text()


def test_too_few_slots_fails_clearly(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[spark]\nmaster = "local[1]"\n[training]\nepochs = 1\n')
    out = tmp_path / "run"
    cp = distbench("run", str(cfg), "--strategies", "spark_ps:adag", "--workers", "2", "--out", str(out))
    assert cp.returncode == 0, cp.stderr[-2000:]
    (r,) = read_records(out)
    assert r["status"] == "failed"
    assert "offers 1 task slots but 2 replicas must run at once" in r["reason"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(path: Path, text: str, proc: subprocess.Popen, timeout: float = 90) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited {proc.returncode}: {path.read_text()[-2000:]}")
        time.sleep(0.5)
    raise TimeoutError(f"{text!r} not in {path} after {timeout} s: {path.read_text()[-2000:]}")


@pytest.fixture
def standalone_cluster(tmp_path):
    """A Spark standalone master and one 2-core worker on 127.0.0.1, stopped afterwards."""
    port = _free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    logs = []
    procs = []
    try:
        for name, args, ready in (
            ("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                        "--webui-port", str(_free_port())], "I have been elected leader"),
            ("worker", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "2",
                        "--memory", "4g", "--webui-port", str(_free_port()), f"spark://127.0.0.1:{port}"],
             "Successfully registered with master"),
        ):
            log = tmp_path / f"{name}.log"
            logs.append(log)
            p = subprocess.Popen([str(BIN / "spark-class"), *args], env=env, stdout=open(log, "wb"),
                                 stderr=subprocess.STDOUT, start_new_session=True)
            procs.append(p)
            _wait_for(log, ready, p)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for p in reversed(procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def test_spark_submit_on_standalone_cluster(tmp_path, standalone_cluster):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[run]\nstrategies = ["spark_ps:adag"]\n')
    out = tmp_path / "run"
    app = distbench("where", "spark-app").stdout.strip()
    assert app.endswith("spark_app.py") and Path(app).exists()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    cp = subprocess.run([str(BIN / "spark-submit"), "--master", standalone_cluster, app, "--config", str(cfg),
                         "--out", str(out)], capture_output=True, text=True, timeout=600, env=env)
    assert cp.returncode == 0, cp.stderr[-3000:]
    (r,) = read_records(out)
    assert r["status"] == "ok", r["reason"]
    assert r["details"]["spark_master"] == standalone_cluster
    assert r["final_test_accuracy"] >= 0.8 and r["provenance"]["launcher"] == "spark-submit"
    cp = distbench("report", str(out))
    assert cp.returncode == 0 and "spark_ps:adag" in cp.stdout
