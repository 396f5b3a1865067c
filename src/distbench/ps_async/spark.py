"""The Spark engine for the parameter-server optimizers.

The parameter server runs on the Spark driver; the model replicas run in the tasks of
one **barrier** stage (``DataFrame.mapInArrow(..., barrier=True)``), so all N replicas
run at once or not at all. Each task reads its partition of a DataFrame with columns
``shard``, ``features`` (flattened float32 image) and ``label`` as Arrow record
batches, and trains with :func:`distbench.ps_async.worker.train_replica`. Partition i
holds exactly shard i (an identity partitioner on ``shard``; each task checks it).

Executors run the interpreter named by ``PYSPARK_PYTHON``; :func:`make_session` sets it
to this interpreter so tasks import the same packages (PITFALLS.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from typing import Any

import numpy as np

from distbench.ps_async.worker import ReplicaSpec, train_replica


class SparkJobError(RuntimeError):
    """The Spark job failed; the message carries the failing task's Python traceback tail.
    ``details`` (set by the caller) holds the parameter server's accounting at the failure."""

    details: dict[str, Any] | None = None


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
        return False, f"{java} -version failed: {cp.stderr.strip()[:200]}"
    if int(m.group(1)) < 17:
        return False, f"Java {m.group(1)} found at {java}; PySpark 4 needs Java 17 or newer"
    return True, ""


def make_session(master: str | None, conf: dict[str, str], app_name: str = "distbench") -> Any:
    """Start (or get) a SparkSession on ``master`` with executors on this interpreter.

    Args:
        master: Spark master URL (``local[N]``, ``spark://host:7077``, ``yarn``, ``k8s://...``);
            ``None`` keeps the one ``spark-submit`` set.
        conf: extra Spark properties (override the defaults set here; on a cluster whose
            executors have the project elsewhere, set ``spark.pyspark.python``).
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    b = SparkSession.builder if master is None else SparkSession.builder.master(master)
    b = (b.appName(app_name)
         .config("spark.ui.enabled", "false")
         .config("spark.sql.execution.arrow.pyspark.enabled", "true")
         # one partition per replica: adaptive execution must not merge the shards
         .config("spark.sql.adaptive.coalescePartitions.enabled", "false")
         .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
         .config("spark.executorEnv.TF_CPP_MIN_LOG_LEVEL", os.environ.get("TF_CPP_MIN_LOG_LEVEL", "1")))
    for k, v in conf.items():
        b = b.config(k, v)
    return b.getOrCreate()


def free_slots(spark: Any) -> int:
    """Task slots the cluster offers now (``defaultParallelism``: total executor cores)."""
    return int(spark.sparkContext.defaultParallelism)


def executor_count(spark: Any) -> int:
    """Executors known to the driver (in local mode: 1, the driver itself)."""
    infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    return max(1, len(infos) - (0 if spark.sparkContext.master.startswith("local") else 1))


def shard_frame(spark: Any, shards: list[tuple[np.ndarray, np.ndarray]]) -> Any:
    """A DataFrame with one partition per shard: columns ``shard``, ``features``, ``label``.

    Args:
        shards: ``[(x_i, y_i)]``; ``x_i`` float32 ``(n_i, H, W, C)``, ``y_i`` int ``(n_i,)``.
    """
    import pandas as pd

    parts = []
    for i, (x, y) in enumerate(shards):
        parts.append(pd.DataFrame({"shard": np.full(len(y), i, dtype=np.int64),
                                   "features": list(x.reshape(len(y), -1).astype(np.float32)),
                                   "label": y.astype(np.int64)}))
    pdf = pd.concat(parts, ignore_index=True)
    df = spark.createDataFrame(pdf, "shard long, features array<float>, label long")
    # Exactly shard i in partition i: an identity partitioner on the shard id. (Spark SQL's
    # hash and range repartitioning both put 2 shards into one partition here.)
    n = len(shards)
    keyed = df.rdd.map(lambda r: (int(r["shard"]), r)).partitionBy(n, lambda k: k).values()
    return spark.createDataFrame(keyed, df.schema)


RESULT_SCHEMA = "result string"


def _task(spec: ReplicaSpec):  # noqa: ANN202 - returns a mapInArrow function
    def run(batches: Any) -> Any:
        import pyarrow as pa
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        pid = ctx.partitionId()
        xs, ys, shard_ids = [], [], set()
        for b in batches:
            feats = b.column("features")
            xs.append(feats.flatten().to_numpy(zero_copy_only=False).astype(np.float32))
            ys.append(b.column("label").to_numpy())
            shard_ids.update(b.column("shard").unique().to_pylist())
        if shard_ids != {pid}:
            raise RuntimeError(f"partition {pid} holds shards {sorted(shard_ids)}; expected exactly shard {pid}")
        x = np.concatenate(xs).reshape(-1, *spec.input_shape)
        y = np.concatenate(ys).astype(np.int32)
        res = train_replica(spec, pid, x, y, ready=ctx.barrier, attempt=ctx.attemptNumber())
        yield pa.RecordBatch.from_pydict({"result": [json.dumps(res)]})

    return run


def python_traceback(message: str, lines: int = 25) -> str:
    """The last Python traceback inside a Spark error message (or its tail)."""
    i = message.rfind("Traceback (most recent call last)")
    text = message[i:] if i >= 0 else message
    kept = [ln for ln in text.splitlines() if not ln.lstrip().startswith("at ")]
    return "\n".join(kept[:lines])


def run_replicas(spark: Any, df: Any, spec: ReplicaSpec) -> list[dict[str, Any]]:
    """Run the barrier stage: one replica per partition of ``df``; return their results
    sorted by worker id.

    Raises:
        SparkJobError: a task failed (its traceback is in the message) or the cluster
            has fewer free slots than replicas.
    """
    slots = free_slots(spark)
    if slots < spec.num_workers:
        raise SparkJobError(f"the Spark cluster offers {slots} task slots but {spec.num_workers} replicas must run "
                            "at once (barrier stage): add executor cores or lower the workers")
    try:
        rows = df.mapInArrow(_task(spec), RESULT_SCHEMA, barrier=True).collect()
    except Exception as e:  # py4j / pyspark errors: keep the worker's own traceback
        tb = python_traceback(str(e))
        errors = [ln for ln in tb.splitlines() if re.match(r"^[\w.]*(Error|Exception|Interrupt|Exit)\b", ln)]
        last = errors[-1] if errors else str(e).splitlines()[0][:300]
        raise SparkJobError(f"Spark job failed: {last.strip()}\n{tb}") from None
    return sorted((json.loads(r["result"]) for r in rows), key=lambda r: r["worker"])
