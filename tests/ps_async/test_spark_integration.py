"""Spark integration: every spark_ps optimizer on local[2], spark-submit on a local
standalone cluster, masters too small for the barrier stage (failed in seconds, before
any session where the master fixes the slots), and an unreachable master."""

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
from tests.conftest import distbench, pids_with, requires

pytestmark = [pytest.mark.integration, requires(executable="java", module="pyspark")]

DEFAULT_WINDOWS = {"downpour": 5, "adag": 12, "dynsgd": 5, "aeasgd": 32, "eamsgd": 32, "easgd": 32,
                   "averaging": None}
BIN = Path(sys.executable).parent


def test_every_optimizer_on_local_spark(tmp_path, optimizers):
    out, tmp = tmp_path / "run", tmp_path / "tmp"
    tmp.mkdir()
    cp = distbench("run", "--strategies", "single," + ",".join(f"spark_ps:{o}" for o in optimizers),
                   "--workers", "2", "--epochs", "10", "--repeats", "1", "--out", str(out), timeout=1500,
                   env={"TMPDIR": str(tmp)})
    assert cp.returncode == 0, cp.stderr[-3000:]
    # AutoGraph's sources are removed by every process that wrote them, Spark's Python workers
    # included (they end with os._exit, which skips AutoGraph's own clean-up: 2 files a replica)
    assert not list(tmp.glob("__autograph_generated_file*.py"))
    recs = {r["strategy"]: r for r in read_records(out)}
    sha = recs["single"]["initial_weights_sha256"]
    for o in optimizers:
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
        assert d["bytes_received"] > 0 and d["bytes_sent"] > 0 and d["server_busy_s"] > 0  # the record has it too
    assert f"spark_ps:{optimizers[0]}" in (out / "report.md").read_text()


def _run_one(tmp_path, toml: str, strategies: str) -> tuple[list[dict], float]:
    cfg = tmp_path / "c.toml"
    cfg.write_text(toml)
    out = tmp_path / "run"
    t0 = time.monotonic()
    cp = distbench("run", str(cfg), "--strategies", strategies, "--workers", "2", "--out", str(out))
    # every configuration of these fails: exit status 1, which CI reads
    assert cp.returncode == 1 and "no configuration of this sweep ended ok (" in cp.stderr, cp.stderr[-2000:]
    return read_records(out), time.monotonic() - t0


def test_too_few_cores_fail_before_any_session(tmp_path):
    (r,), _ = _run_one(tmp_path, '[spark]\nmaster = "local[1]"\n[training]\nepochs = 1\n', "spark_ps:adag")
    assert r["status"] == "failed"
    assert ("Spark master 'local[1]' offers 1 barrier task slot (1 core of local[1] // spark.task.cpus 1) "
            "but 2 replicas must run at once") in r["reason"]
    assert r["timings"]["total_s"] < 30, r["timings"]
    log = (tmp_path / "run" / r["log"]).read_text()  # the shared Spark engine's log
    assert "log4j" not in log and "SparkContext" not in log  # no JVM was started


def test_task_cpus_slots_fail_in_seconds(tmp_path):
    # 2 cores // spark.task.cpus 2 = 1 barrier slot: Spark would retry its slot check 40 x 15 s
    (r,), _ = _run_one(tmp_path, '[spark]\nmaster = "local[2]"\nconf = { "spark.task.cpus" = "2" }\n'
                       '[training]\nepochs = 1\n', "spark_ps:downpour")
    assert r["status"] == "failed"
    assert ("offers 1 barrier task slot (2 cores of local[2] // spark.task.cpus 2) but 2 replicas must run at once"
            in r["reason"])
    assert r["timings"]["total_s"] < 30, r["timings"]


def test_unreachable_master_fails_naming_it_and_the_sweep_goes_on(tmp_path):
    port = _free_port()  # nothing listens there
    recs, wall = _run_one(tmp_path, f'[spark]\nmaster = "spark://127.0.0.1:{port}"\n[training]\nepochs = 1\n',
                          "spark_ps:adag,spark_ps:downpour")
    assert [r["strategy"] for r in recs] == ["spark_ps:adag", "spark_ps:downpour"]
    for r in recs:
        assert r["status"] == "failed"
        assert f"Spark master 'spark://127.0.0.1:{port}' is unreachable (127.0.0.1:{port}: " in r["reason"]
        assert r["timings"]["total_s"] < 30, r["timings"]
    assert wall < 120


def test_session_start_is_bounded_and_leaves_no_jvm():
    marker = f"distbench-bound-{os.getpid()}-{time.monotonic_ns()}"
    code = ("import time\nfrom distbench.ps_async.spark import make_session\nt0 = time.monotonic()\n"
            f"try:\n    make_session('local[1]', {{}}, app_name={marker!r}, start_timeout_s=1.0)\n"
            "except Exception as e:\n    print(type(e).__name__, e, round(time.monotonic() - t0, 1))\n")
    t0 = time.monotonic()
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert ("SparkSpecError the Spark session on master 'local[1]' did not start within 1 s: check that the master "
            "runs and accepts applications") in cp.stdout, cp.stdout + cp.stderr[-2000:]
    assert float(cp.stdout.split()[-1]) < 2.5 and time.monotonic() - t0 < 60
    deadline = time.monotonic() + 30  # the half-started JVM dies with its Python process
    while pids_with(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not pids_with(marker)


def test_spark_gives_up_on_its_own_barrier_check_in_seconds():
    """Past distbench's checks (executors lost after them), Spark's own barrier slot check
    gives up in seconds, and the count is Spark's: executor cores // spark.task.cpus."""
    from distbench.config import DataConfig, ModelConfig, TrainingConfig
    from distbench.ps_async import spark as engine
    from distbench.ps_async.spark_spec import SparkSpecError
    from distbench.ps_async.worker import ReplicaSpec

    spark = engine.make_session("local[2]", {"spark.task.cpus": "2"})
    try:
        assert engine.barrier_slots(spark) == 1 and engine.executor_count(spark) == 1
        with pytest.raises(SparkSpecError, match=r"offers 1 barrier task slot \(2 cores of local\[2\] // "):
            engine.require_slots(spark, 2)
        assert engine.require_slots(spark, 1) == 1
        spec = ReplicaSpec(DataConfig(), "", ModelConfig(), (8, 8, 1), 10, [], TrainingConfig(), num_workers=2,
                           steps_per_epoch=1,
                           optimizer="adag", params={}, address="tcp://127.0.0.1:1", secret=b"unused")
        t0 = time.monotonic()
        with pytest.raises(SparkSpecError, match=r"offers 1 barrier task slot \(Spark's count, when its barrier "
                                                 r"check gave up\) but 2 replicas must run at once"):
            engine.run_replicas(spark, spec)  # a 2-task barrier stage, never launched
        assert time.monotonic() - t0 < 30  # Spark's defaults: 40 retries x 15 s
    finally:
        spark.stop()


def test_shard_rdd_puts_shard_i_alone_in_partition_i():
    """The barrier stage's input: shard i alone in partition i for any N (a range sliced by
    position: no shuffle stage)."""
    from distbench.ps_async import spark as engine

    spark = engine.make_session("local[2]", {})
    try:
        for n in (1, 2, 3, 5, 8):
            rdd = engine.shard_rdd(spark, n)
            assert rdd.getNumPartitions() == n
            assert rdd.glom().collect() == [[i] for i in range(n)], n
    finally:
        spark.stop()


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
    # the keys the README says tools may rely on, as distbench run writes them
    assert r["log"] is None and set(r["timings"]["phases"]) >= {"engine_start_s", "train_s", "eval_s"}
    assert "[1/1] spark_ps:adag (2 workers): ok test acc " in cp.stdout, cp.stdout[-3000:]
    cp = distbench("report", str(out))
    assert cp.returncode == 0 and "spark_ps:adag" in cp.stdout


def test_spark_submit_app_checks_the_master_and_conf_it_is_given(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[run]\nstrategies = ["spark_ps:adag", "spark_ps:downpour"]\n[training]\nepochs = 1\n')
    app = distbench("where", "spark-app").stdout.strip()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    out = tmp_path / "run"
    cp = subprocess.run([str(BIN / "spark-submit"), "--master", "local[2]", "--conf", "spark.task.cpus=2", app,
                         "--config", str(cfg), "--out", str(out), "--workers", "2"],
                        capture_output=True, text=True, timeout=600, env=env, check=False)
    assert cp.returncode == 1, cp.stderr[-3000:]  # spark-submit's exit status says no configuration ended ok
    assert (f"distbench spark-app: no configuration of this sweep ended ok (2 failed): 'distbench report {out}' lists "
            "each one's reason") in cp.stdout + cp.stderr  # (spark-submit's driver writes its stderr to stdout)
    recs = read_records(out)
    assert [r["strategy"] for r in recs] == ["spark_ps:adag", "spark_ps:downpour"]  # the sweep goes on
    for r in recs:
        assert r["status"] == "failed" and r["timings"]["total_s"] < 10, (r["reason"], r["timings"])
        assert ("Spark master 'local[2]' offers 1 barrier task slot (2 cores of local[2] // spark.task.cpus 2) "
                "but 2 replicas must run at once") in r["reason"]
        assert "check_planned_slots" in (out / r["log"]).read_text()  # the traceback: in the log, not the console
    # the user test: a traceback per configuration on the console, and config ids as names
    assert "Traceback" not in cp.stdout + cp.stderr, cp.stdout[-3000:]
    assert "distbench spark-app: " + str(out) + ": 2 of 2 configuration(s) to run" in cp.stdout
    assert "[2/2] spark_ps:downpour (2 workers): failed SparkSpecError: Spark master 'local[2]'" in cp.stdout
    # re-submitting continues the sweep, and says what it skipped (it printed nothing before)
    cp = subprocess.run([str(BIN / "spark-submit"), "--master", "local[2]", "--conf", "spark.task.cpus=2", app,
                         "--config", str(cfg), "--out", str(out), "--workers", "2"],
                        capture_output=True, text=True, timeout=600, env=env, check=False)
    assert cp.returncode == 0 and len(read_records(out)) == 2, cp.stdout[-3000:]
    assert ": 0 of 2 configuration(s) to run, 2 already recorded (skipped)" in cp.stdout
    assert "sweep: nothing to run" in cp.stdout
    # a property Spark reads only when a job needs it: rejected once the session exists
    cp = subprocess.run([str(BIN / "spark-submit"), "--master", "local[2]", "--conf", "spark.default.parallelism=0",
                         app, "--config", str(cfg), "--out", str(tmp_path / "run2")],
                        capture_output=True, text=True, timeout=600, env=env, check=False)
    assert cp.returncode == 2, cp.stderr[-3000:]
    # spark-submit merges the app's stderr into its stdout
    assert ("distbench spark-app: error: spark.conf spark.default.parallelism = '0': expected a positive integer"
            in cp.stdout), cp.stdout[-3000:]
    assert not (tmp_path / "run2" / "results.jsonl").exists()
