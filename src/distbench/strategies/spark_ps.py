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
(:func:`distbench.launch.commands.config_child_command`); the Spark JVM and its
Python workers are children of that process and die with its process group. On a
cluster, the same code runs under ``spark-submit`` (``distbench where spark-app``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from distbench.config import ExperimentConfig
from distbench.contracts import PlacementKind, SyncKind
from distbench.launch.commands import exchange_timeout
from distbench.ps_async.rules import DISPLAY, OPTIMIZERS
from distbench.strategies.base import Availability, LaunchContext, Strategy, StrategyUnavailable
from distbench.strategies.registry import register_family
from distbench.training import TrainOutput



def train_on_spark(spark: Any, ctx: LaunchContext, optimizer: str, ps_host: str | None = None) -> TrainOutput:
    """Run one PS training on an existing SparkSession; return the centre as the result.

    The parameter server binds ``ps_host`` (default ``[ps] host``), which the executors must
    reach. The session must offer ``ctx.workers`` barrier slots
    (:func:`distbench.ps_async.spark.require_slots`), checked before the parameter server
    starts or any data is built.

    Raises:
        distbench.ps_async.spark_spec.SparkSpecError: too few barrier slots.
        distbench.ps_async.spark.SparkJobError: the Spark job failed.
    """
    from distbench.ps_async import spark as engine
    from distbench.ps_async.monitor import CentreMonitor, centre_output, updates_expected
    from distbench.ps_async.protocol import new_secret
    from distbench.ps_async.server import ParameterServer
    from distbench.ps_async.worker import params_from_config, replica_spec

    cfg, wl, n = ctx.config, ctx.workload, ctx.workers
    slots = engine.require_slots(spark, n)
    params = params_from_config(cfg, optimizer, ctx.window)
    secret = new_secret()
    server = ParameterServer(wl.initial_weights, optimizer, secret, num_workers=n, host=ps_host or cfg.ps.host,
                             port=cfg.ps.port, params={k: v for k, v in params.items() if k != "alpha"},
                             sync_timeout_s=exchange_timeout(ctx.timeout_s),
                             non_trainable=wl.non_trainable_indices(), start_barrier=True).start()
    try:
        spec = replica_spec(wl, n, optimizer, params, server.address, secret, ctx.threads_per_process(n),
                            exchange_timeout(ctx.timeout_s), ctx.scenario)
        monitor = CentreMonitor(server, updates_expected(spec), cfg.training.epochs).start()
        try:
            results = engine.run_replicas(spark, spec)
        except engine.SparkJobError as e:  # keep the server's accounting in the failed record
            st = server.stats()
            raise engine.SparkJobError(str(e), e.failed_process, details={k: st.get(k) for k in (
                "commits", "applied_commit_keys", "duplicate_commits", "pulls", "rejected", "per_worker_commits",
                "clock", "staleness")}) from None
        finally:
            monitor.stop()
        stats = server.stats()
        centre = server.center()
    finally:
        server.stop()
    return centre_output(spec, results, monitor.snapshots, stats, centre, {
        "engine": "spark", "spark_master": spark.sparkContext.master,
        "executors": engine.executor_count(spark), "task_slots": slots})


class SparkPS(Strategy):
    """A parameter-server optimizer on Spark: server on the driver, replicas in a barrier stage.

    One subclass per optimizer is registered (``spark_ps:<optimizer>``); ``optimizer``
    names it.
    """

    worker_entries = {"spark-engine": "distbench.harness.spark_engine:engine_command"}
    needs = ("a Spark cluster (standalone, YARN or Kubernetes) with Java 17+, PySpark and TensorFlow on every "
             "executor, and the driver (which runs the parameter server) reachable from the executors")
    takes_window = True
    scales_learning_rate = False
    optimizer: ClassVar[str] = ""

    def is_available(self, config: ExperimentConfig, workers: int) -> Availability:
        """pyspark importable and Java 17+ found (see :func:`distbench.ps_async.spark.spark_probe`)."""
        from distbench.ps_async.spark import spark_probe

        ok, reason = spark_probe()
        return Availability(ok, reason)

    def train_on_session(self, spark: Any, ctx: LaunchContext) -> TrainOutput:
        """Train on an existing SparkSession (the spark-submit app's): see :func:`train_on_spark`."""
        return train_on_spark(spark, ctx, self.optimizer)

    def launch(self, ctx: LaunchContext) -> TrainOutput:
        """Start a SparkSession on ``spark.master`` (default ``local[N]``) and train.

        Before the session starts, the master and ``[spark] conf`` must offer N barrier
        slots where they determine them (:func:`~distbench.ps_async.spark_spec.check_planned_slots`),
        and a cluster master must answer (:func:`~distbench.ps_async.spark.make_session`).

        Raises:
            distbench.ps_async.spark_spec.SparkSpecError: too few slots, an unreachable
                master, or a session that did not start.
            distbench.ps_async.spark.SparkJobError: the Spark job failed.
        """
        from distbench.ps_async import spark as engine
        from distbench.config.spark import parse_master
        from distbench.ps_async.spark_spec import check_planned_slots

        pl, conf = ctx.placement, dict(ctx.config.spark.conf)
        if pl.kind == PlacementKind.EMULATED:  # a standalone cluster on the emulated hosts, for this configuration
            from distbench.cluster.spark_standalone import StandaloneCluster

            conf.setdefault("spark.driver.host", pl.driver)
            with StandaloneCluster(pl, ctx.log_dir) as master:
                spark = engine.make_session(master, conf)
                try:
                    out = train_on_spark(spark, ctx, self.optimizer, ps_host=pl.driver)
                finally:
                    spark.stop()
            found = {f"replica {w}": ns for w, ns in enumerate(out.extra.get("per_worker_netns") or [])}
            out.extra.update(pl.describe({}, driver=["driver (parameter server)"], found=found))
            return out
        if pl.kind == PlacementKind.SSH and not ctx.config.spark.master:
            raise StrategyUnavailable("on a cluster of hosts spark_ps needs [spark] master: a standalone, YARN or "
                                      "Kubernetes cluster whose workers run on those hosts")
        master = ctx.config.spark.master or f"local[{ctx.workers}]"
        check_planned_slots(parse_master(master), conf, ctx.workers)
        spark = engine.make_session(master, conf)
        try:
            keep = pl.is_local or ctx.config.ps.host != "127.0.0.1"  # a [ps] host the user set is kept
            out = train_on_spark(spark, ctx, self.optimizer, ps_host=None if keep else pl.driver)
            if not pl.is_local:  # Spark chose the executors: the replicas say where they ran
                found = {f"replica {w}": h for w, h in enumerate(out.extra.get("per_worker_hosts") or [])}
                out.extra.update(pl.describe({}, driver=["driver (parameter server)"], found=found))
            return out
        finally:
            spark.stop()


register_family("spark_ps", [type(f"SparkPS_{o}", (SparkPS,), {
    "name": f"spark_ps:{o}", "optimizer": o, "__module__": __name__, "synchronous": spec.kind == SyncKind.SYNC,
    "description": f"{DISPLAY[o]} ({spec.kind}) on Spark: {spec.paper}"}) for o, spec in OPTIMIZERS.items()])
