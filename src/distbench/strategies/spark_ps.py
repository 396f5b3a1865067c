"""``spark_ps:<optimizer>``: the dist-keras family of parameter-server optimizers as
real Spark jobs (DOWNPOUR, ADAG, DynSGD, AEASGD, EAMSGD, synchronous EASGD, model
averaging).

How it trains: in the configuration's process (the Spark driver) a
:class:`~distbench.ps_async.server.ParameterServer` holds the centre variable; a
SparkSession (``spark.master``, default ``local[N]``) runs one barrier stage whose N
tasks are the model replicas (:mod:`distbench.ps_async.spark`), each training on its
shard of the training split with per-replica batch ``global_batch / N`` for
``n_train // global_batch`` steps per epoch (the same step count as every other
strategy) and exchanging with the server every ``communication_window`` steps. A
monitor snapshots the centre at epoch boundaries; the final centre is the result.

How it is launched: by the harness, like every strategy, in a fresh process
(:func:`distbench.strategies.launchers.config_child_command`); the Spark JVM and its
Python workers are children of that process and die with its process group. On a
cluster, the same code runs under ``spark-submit`` (``distbench where spark-app``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distbench.config import ExperimentConfig
from distbench.data import shard
from distbench.ps_async.rules import DEFAULTS, OPTIMIZERS
from distbench.strategies.base import Availability, LaunchContext, Strategy
from distbench.strategies.registry import register_family
from distbench.training import Snapshot, TrainOutput


DISPLAY = {"downpour": "DOWNPOUR", "adag": "ADAG", "dynsgd": "DynSGD", "aeasgd": "AEASGD",
           "eamsgd": "EAMSGD", "easgd": "EASGD", "averaging": "model averaging"}


def ps_params(cfg: ExperimentConfig, optimizer: str, window: int | None = None) -> dict[str, Any]:
    """The optimizer's parameters: its defaults, overridden by the ``[ps]`` config
    (``communication_window`` 0 keeps the default; ``rho``/``learning_rate``/``momentum``
    only where the optimizer has them) and by ``window`` (a window sweep's value)."""
    from distbench.ps_async.rules import resolve_params

    over: dict[str, Any] = {}
    keys = DEFAULTS[optimizer]
    if window or cfg.ps.communication_window:
        over["communication_window"] = window or cfg.ps.communication_window
    for k in ("rho", "learning_rate", "momentum"):
        if k in keys:
            over[k] = getattr(cfg.ps, k)
    return resolve_params(optimizer, over)


def train_on_spark(spark: Any, ctx: LaunchContext, optimizer: str) -> TrainOutput:
    """Run one PS training on an existing SparkSession; return the centre as the result.

    Raises:
        distbench.ps_async.spark.SparkJobError: the Spark job failed.
    """
    from distbench.ps_async import spark as engine
    from distbench.ps_async.monitor import CentreMonitor
    from distbench.ps_async.protocol import new_secret
    from distbench.ps_async.server import ParameterServer
    from distbench.ps_async.worker import ReplicaSpec

    cfg, wl, n = ctx.config, ctx.workload, ctx.workers
    params = ps_params(cfg, optimizer, ctx.window)
    secret = new_secret()
    server = ParameterServer(wl.initial_weights, optimizer, secret, num_workers=n, host=cfg.ps.host,
                             port=cfg.ps.port, params={k: v for k, v in params.items() if k != "alpha"},
                             sync_timeout_s=max(60.0, ctx.timeout_s / 4)).start()
    try:
        spec = ReplicaSpec(cfg.model, wl.dataset.input_shape, wl.dataset.num_classes, wl.initial_weights,
                           cfg.training, n, wl.steps_per_epoch(), optimizer, params, server.address, secret,
                           threads=ctx.threads_per_process(n), timeout_s=max(60.0, ctx.timeout_s / 4))
        ds = wl.dataset
        df = engine.shard_frame(spark, [shard(ds.x_train, ds.y_train, r, n) for r in range(n)])
        kind_updates = spec.exchanges() * (n if OPTIMIZERS[optimizer].kind == "async" else 1)
        monitor = CentreMonitor(server, kind_updates, cfg.training.epochs).start()
        try:
            results = engine.run_replicas(spark, df, spec)
        finally:
            monitor.stop()
        stats = server.stats()
        centre = server.center()
    finally:
        server.stop()
    t0 = min(r["start_unix"] for r in results)
    t1 = max(r["end_unix"] for r in results)
    snaps = [Snapshot(max(0.0, min(t, t1) - t0), e, clock, w) for t, e, clock, w in monitor.snapshots]
    steps = sum(r["steps"] for r in results)
    extra = {
        "engine": "spark",
        "ps_optimizer": optimizer,
        "communication_window": params["communication_window"],
        "rho": params.get("rho"), "ps_learning_rate": params.get("learning_rate"),
        "alpha": params.get("alpha"), "momentum": params.get("momentum"),
        "commits": stats.get("commits"), "pulls": stats.get("pulls"), "sync_rounds": stats.get("sync_rounds"),
        "bytes_received": stats.get("bytes_received"), "bytes_sent": stats.get("bytes_sent"),
        "rejected": stats.get("rejected"), "duplicate_commits": stats.get("duplicate_commits"),
        "staleness": stats.get("staleness"), "per_worker_steps": [r["steps"] for r in results],
        "per_worker_exchanges": [r["exchanges"] for r in results], "centre_clock": stats.get("clock"),
        "spark_master": spark.sparkContext.master, "executors": engine.executor_count(spark),
        "task_slots": engine.free_slots(spark), "threads_per_replica": spec.threads,
        "per_replica_batch_size": spec.per_replica_batch,
    }
    return TrainOutput([np.asarray(c, np.float32) for c in centre], snaps, t1 - t0, t0,
                       steps=steps, samples=steps * spec.per_replica_batch, replicas=n, extra=extra)


class SparkPS(Strategy):
    """A parameter-server optimizer on Spark: server on the driver, replicas in a barrier stage."""

    family = "parameter-server"
    takes_window = True

    def __init__(self, optimizer: str) -> None:
        self.optimizer = optimizer
        self.name = f"spark_ps:{optimizer}"  # type: ignore[misc]
        spec = OPTIMIZERS[optimizer]
        self.description = f"{DISPLAY[optimizer]} ({spec.kind}) on Spark: {spec.paper}"  # type: ignore[misc]

    def is_available(self, config: ExperimentConfig, workers: int) -> Availability:
        """pyspark importable and Java 17+ found (see :func:`distbench.ps_async.spark.spark_probe`)."""
        from distbench.ps_async.spark import spark_probe

        ok, reason = spark_probe()
        return Availability(ok, reason)

    def launch(self, ctx: LaunchContext) -> TrainOutput:
        """Start a SparkSession on ``spark.master`` (default ``local[N]``) and train."""
        from distbench.ps_async import spark as engine

        master = ctx.config.spark.master or f"local[{ctx.workers}]"
        spark = engine.make_session(master, ctx.config.spark.conf)
        try:
            return train_on_spark(spark, ctx, self.optimizer)
        finally:
            spark.stop()


register_family("spark_ps", tuple(OPTIMIZERS), SparkPS)
