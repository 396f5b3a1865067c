"""The Spark engine for the parameter-server optimizers.

The parameter server runs on the Spark driver; the model replicas run in the tasks of
one **barrier** stage (``rdd.barrier().mapPartitions(...)``), so all N replicas run at
once or not at all. Task i holds shard id i (:func:`shard_rdd`; each task checks it),
reads that shard of the training split itself and trains with
:func:`distbench.ps_async.worker.train_replica`.

Executors run the interpreter named by ``PYSPARK_PYTHON``; :func:`make_session` sets it
to this interpreter so tasks import the same packages.

Every wait is bounded: a cluster master is probed before the session starts, session
start-up is limited (:data:`SESSION_START_S`), the barrier slots are counted before any
data is built (:func:`require_slots`, at most :data:`SLOT_WAIT_S` for executors to
register), and Spark's own barrier slot check gives up in seconds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Any


from distbench.config.spark import BARRIER_CHECK_DEFAULTS, parse_master, slots_message
from distbench.ps_async.spark_spec import SparkSpecError, check_planned_slots, probe_master
from distbench.procinfo import remove_autograph_sources
from distbench.ps_async.worker import ReplicaSpec, train_replica
from distbench.text import clip
from distbench.training.output import TrainingFailed


class SparkJobError(TrainingFailed):
    """The Spark job failed; the message carries the failing task's Python traceback tail,
    ``details`` the parameter server's accounting at the failure when the caller knows it."""


def spark_probe() -> tuple[bool, str]:
    """Whether Spark can start here: pyspark importable and a Java runtime found.

    Returns:
        ``(ok, reason)``; ``reason`` names what is missing and how to get it.
    """
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        return False, "pyspark is not installed: pip install 'distbench[spark]' (make setup does)"
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else shutil.which("java")
    if not java or not os.path.exists(java):
        return False, "no Java runtime: install Java 17 (make setup installs openjdk-17-jre-headless) or set JAVA_HOME"
    try:
        cp = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"{java} -version failed: {e}"
    m = re.search(r'version "(\d+)', cp.stderr)
    if cp.returncode != 0 or not m:
        return False, f"{java} -version failed: {clip(cp.stderr.strip(), 200)}"
    if int(m.group(1)) < 17:
        return False, f"Java {m.group(1)} found at {java}; PySpark 4 needs Java 17 or newer"
    return True, ""


SESSION_START_S = 90.0  # bound on SparkSession start-up (JVM launch; on a cluster, registering the app)
SLOT_WAIT_S = 30.0  # how long a cluster may take to register enough executors for the barrier stage


def make_session(master: str | None, conf: dict[str, str], app_name: str = "distbench",
                 start_timeout_s: float = SESSION_START_S) -> Any:
    """Start (or get) a SparkSession on ``master`` with executors on this interpreter.

    A ``spark://`` or ``k8s://`` master is first probed with a TCP connect
    (:func:`~distbench.ps_async.spark_spec.probe_master`), and start-up is bounded by
    ``start_timeout_s``, so an unreachable master fails in seconds, naming it. Spark's
    own barrier slot check is set to give up after a few seconds
    (:data:`~distbench.config.spark.BARRIER_CHECK_DEFAULTS`; ``conf`` may override).

    Args:
        master: Spark master URL (``local[N]``, ``spark://host:7077``, ``yarn``, ``k8s://...``);
            ``None`` keeps the one ``spark-submit`` set.
        conf: extra Spark properties (override the defaults set here; on a cluster whose
            executors have the project elsewhere, set ``spark.pyspark.python``).
        start_timeout_s: seconds the session may take to start.

    Returns:
        The SparkSession.

    Raises:
        distbench.ps_async.spark_spec.SparkSpecError: the master is unreachable, the session
            did not start within ``start_timeout_s`` or failed to start, or the master
            stopped the application; the message names the master.
    """
    import threading

    if master is not None:
        probe_master(parse_master(master))
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    b = SparkSession.builder if master is None else SparkSession.builder.master(master)
    b = (b.appName(app_name)
         .config("spark.ui.enabled", "false")
         .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
         .config("spark.executorEnv.TF_CPP_MIN_LOG_LEVEL", os.environ.get("TF_CPP_MIN_LOG_LEVEL", "1")))
    for k, v in {**BARRIER_CHECK_DEFAULTS, **conf}.items():
        b = b.config(k, v)
    where = repr(master) if master else "(from spark-submit)"
    box: dict[str, Any] = {}

    def start() -> None:
        try:
            box["spark"] = b.getOrCreate()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = e

    starter = threading.Thread(target=start, name="spark-session-start", daemon=True)
    starter.start()
    starter.join(start_timeout_s)
    if starter.is_alive():
        raise SparkSpecError(f"the Spark session on master {where} did not start within {start_timeout_s:g} s: "
                             "check that the master runs and accepts applications")
    if "error" in box:  # a Py4JJavaError's first line only names the call: keep the JVM's cause
        e = box["error"]
        lines = [ln.strip().lstrip(": ") for ln in str(e).splitlines() if ln.strip()]
        causes = [ln for ln in lines[1:] if re.match(r"^[\w.$]+(Exception|Error)\b", ln)]
        why = causes[-1] if causes else f"{type(e).__name__}: {lines[0] if lines else ''}"
        raise SparkSpecError(f"the Spark session on master {where} did not start ({why}); see the log") from e
    spark = box["spark"]
    if spark.sparkContext._jsc.sc().isStopped():
        raise SparkSpecError(f"Spark master {where} stopped the application as it started; see the log")
    return spark


def barrier_slots(spark: Any) -> int:
    """Task slots a barrier stage may use now, as Spark's own check counts them: the sum
    over executors of ``executor cores // spark.task.cpus`` (``maxNumConcurrentTasks``)."""
    sc = spark.sparkContext._jsc.sc()
    return int(sc.maxNumConcurrentTasks(sc.resourceProfileManager().defaultResourceProfile()))


def require_slots(spark: Any, replicas: int, wait_s: float = SLOT_WAIT_S) -> int:
    """Wait (at most ``wait_s``) until the session offers ``replicas`` barrier slots.

    First the master and conf the session runs with are checked
    (:func:`~distbench.ps_async.spark_spec.check_planned_slots`: local masters fail at
    once); then Spark's live count (:func:`barrier_slots`) is polled, since a cluster's
    executors register after the session starts.

    Returns:
        The slots offered (>= ``replicas``).

    Raises:
        distbench.ps_async.spark_spec.SparkSpecError: too few slots; the message says how
            many Spark offers and how they are counted.
    """
    sc = spark.sparkContext
    master = parse_master(sc.master)
    conf = dict(sc.getConf().getAll())
    check_planned_slots(master, conf, replicas)
    deadline = time.monotonic() + (0.0 if master.is_local else wait_s)
    while True:
        slots = barrier_slots(spark)
        if slots >= replicas or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    if slots < replicas:
        waited = "" if master.is_local else f", after waiting {wait_s:g} s for executors"
        raise SparkSpecError(slots_message(
            sc.master, slots, f"Spark's count: executor cores // spark.task.cpus "
            f"{conf.get('spark.task.cpus', '1')} over {executor_count(spark)} executor(s){waited}", replicas))
    return slots


def executor_count(spark: Any) -> int:
    """Executors known to the driver (in local mode: 1, the driver itself; elsewhere the
    driver's own entry is not counted)."""
    infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    return 1 if parse_master(spark.sparkContext.master).is_local else max(0, len(infos) - 1)


def shard_rdd(spark: Any, num_shards: int) -> Any:
    """An RDD of ``num_shards`` elements (the shard ids 0..N-1), element i alone in partition i.

    It carries no data: each barrier task reads its own shard of the training split (in
    memory, or block by block from Parquet with pyarrow), so the data never pass through
    the driver, and every engine reads the same shards (:func:`~distbench.ps_async.worker.train_replica`).

    ``parallelize(range(N), N)`` slices a range by position (slice i is
    ``[i*N/N, (i+1)*N/N)``), so shard i is alone in partition i with no shuffle (each task
    checks it holds exactly its shard). A plain RDD, not a DataFrame: a session's first
    Spark SQL query and first Arrow UDF (``mapInArrow``) cost 3-5 s of start-up on 2 cores
    that a barrier RDD job does not (benchmarks/startup_floor.py); Spark SQL's hash and
    range repartitioning also put 2 shards into one partition.
    """
    return spark.sparkContext.parallelize(range(num_shards), num_shards)


def _task(spec: ReplicaSpec):  # noqa: ANN202 - returns a barrier mapPartitions function
    def run(shards: Any) -> Any:
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        pid = ctx.partitionId()
        shard_ids = sorted(set(shards))
        if shard_ids != [pid]:
            raise RuntimeError(f"partition {pid} holds shards {shard_ids}; expected exactly shard {pid}")
        # No ctx.barrier(): it releases each task on its own one-second poll (up to 1.0 s
        # apart, measured), a skew the synchronous optimizers paid on the training clock; the
        # parameter server's start barrier (ParameterServer(start_barrier=True)) releases the
        # replicas together instead. The barrier stage still schedules all tasks at once.
        try:
            result = train_replica(spec, pid, attempt=ctx.attemptNumber())
        finally:  # PySpark's workers end with os._exit, which skips AutoGraph's own clean-up
            remove_autograph_sources()
        yield json.dumps(result)

    return run


def python_traceback(message: str, lines: int = 25) -> str:
    """The last Python traceback inside a Spark error message (or its tail)."""
    i = message.rfind("Traceback (most recent call last)")
    text = message[i:] if i >= 0 else message
    kept = [ln for ln in text.splitlines() if not ln.lstrip().startswith("at ")]
    return "\n".join(kept[:lines])


def run_replicas(spark: Any, spec: ReplicaSpec) -> list[dict[str, Any]]:
    """Run the barrier stage: one replica per shard (``spec.num_workers`` tasks over
    :func:`shard_rdd`); return their results sorted by worker id. Check the slots first
    with :func:`require_slots`.

    Raises:
        SparkJobError: a task failed (its traceback is in the message).
        distbench.ps_async.spark_spec.SparkSpecError: Spark's own barrier check found too
            few slots (executors left after :func:`require_slots`); it gives up in seconds.
    """
    try:
        rows = shard_rdd(spark, spec.num_workers).barrier().mapPartitions(_task(spec)).collect()
    except Exception as e:  # py4j / pyspark errors: keep the worker's own traceback
        if "BarrierJobSlotsNumberCheckFailed" in str(e):
            raise SparkSpecError(slots_message(spark.sparkContext.master, barrier_slots(spark), "Spark's count, "
                                               "when its barrier check gave up", spec.num_workers)) from None
        tb = python_traceback(str(e))
        errors = [ln for ln in tb.splitlines() if re.match(r"^[\w.]*(Error|Exception|Interrupt|Exit)\b", ln)]
        last = errors[-1] if errors else clip(str(e).splitlines()[0], 300)
        raise SparkJobError(f"Spark job failed: {last.strip()}\n{tb}") from None
    return sorted((json.loads(r) for r in rows), key=lambda r: r["worker"])
