"""``tf_ps``: TensorFlow's own asynchronous parameter server,
``tf.distribute.ParameterServerStrategy`` with a ``ClusterCoordinator``.

How it trains: the configuration's process is the chief (coordinator). N worker tasks
and ``tf.ps_tasks`` parameter-server tasks run as separate local processes, each a
``tf.distribute.Server`` (``distbench worker tf-server``). Variables live on the ps
tasks; the coordinator schedules step functions, and whichever worker is free runs one:
each step is one optimizer update of the shared variables with a per-worker batch of
``G/N`` samples, and ``N * (n_train // G)`` steps make an epoch, as for the other
parameter-server strategies. Worker i reads shard i of the training split in the order
replica i of ``spark_ps`` and ``mpi_ps`` reads it (:func:`shard_orders`); since the
coordinator hands each step to whichever worker is free, a worker that runs more than its
share of steps goes on into its next epoch's order (the steps' samples are the other PS
strategies', their assignment to steps is the coordinator's). The coordinator joins at
each epoch end to take a snapshot (the join is part of the training time: it is how this strategy
observes progress). Steps run by each worker are recorded.

On 2 cores an in-process cluster hangs with default thread pools: the
coordinator raises inter-op parallelism to 16, each server uses 8 inter-op threads, and
every task is its own process.

How it is launched: :func:`server_commands` (pure) builds each task's argv and env; a
:class:`~distbench.launch.process.ProcessGroup` runs them; a watchdog thread
ends the configuration with a failure naming the task as soon as one task dies (the
coordinator itself would wait for a lost worker to come back), or when training stalls
because a task is alive but no longer answers (:func:`stalled`: an epoch running over
10 times the slowest one so far and over 60 s; stopped tasks are named). Servers
validate ``TF_CONFIG`` before importing TensorFlow and end on SIGTERM or SIGINT.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import click
import numpy as np

from distbench import gpu
from distbench.entrypoints import user_errors
from distbench.launch import commands, process
from distbench.launch.commands import free_ports, worker_argv
from distbench.launch.tfconfig import parse_tf_config, tf_config
from distbench.contracts import Status
from distbench.config import ExperimentConfig
from distbench.strategies.base import Availability, LaunchContext, Strategy, StrategyUnavailable
from distbench.strategies.registry import register
from distbench.training import TrainOutput
from distbench.training.loop import StepDelay, TrainLoop
from distbench.training.step import replica_step
from distbench.training.output import write_child_result
from distbench.procinfo import current_namespace

COORDINATOR_INTER_OP = 16
WORKER_PORT = 23456  # worker k listens on WORKER_PORT + k on its own host
SERVER_INTER_OP = 8
STALL_FACTOR = 10.0  # see stalled()
STALL_FLOOR_S = 60.0


def cluster_spec(ports: list[int], workers: int, ps_tasks: int, host: str = "127.0.0.1",
                 worker_hosts: list[str] | None = None) -> dict[str, list[str]]:
    """The cluster dict: ``chief`` (ports[0]), ``workers`` workers, ``ps_tasks`` ps tasks.

    Args:
        host: the address of the chief and the ps tasks (the launching host), and of the
            workers unless ``worker_hosts`` places them elsewhere.
    """
    addr = [f"{host}:{p}" for p in ports]
    workers_addr = addr[1:1 + workers] if worker_hosts is None else \
        [f"{h}:{p}" for h, p in zip(worker_hosts, ports[1:1 + workers])]
    return {"chief": addr[:1], "worker": workers_addr, "ps": addr[1 + workers:1 + workers + ps_tasks]}


def server_commands(cluster: dict[str, list[str]], threads: int, run_dir: Path,
                    base_env: dict[str, str] | None = None,
                    python: str | None = None) -> list[tuple[str, list[str], dict[str, str]]]:
    """``(task name, argv, env)`` of each worker and ps server process of ``cluster``
    (``run_dir`` is in the argv so the processes of a run can be found in the process table;
    ``python``: the workers' interpreter). Where this machine has GPUs, each worker task's
    ``CUDA_VISIBLE_DEVICES`` names one and the ps tasks get none
    (:func:`distbench.gpu.process_envs`)."""
    gpus = gpu.process_envs([a.rsplit(":", 1)[0] for a in cluster["worker"]], len(cluster["ps"]), base_env)
    out = []
    for job in ("worker", "ps"):
        for i in range(len(cluster[job])):
            argv = worker_argv("tf-server", run_dir, python=python if job == "worker" else None)
            env = commands.child_env({"TF_CONFIG": tf_config(cluster, job, i), "DISTBENCH_THREADS": str(threads),
                                      **gpus[i + (len(cluster["worker"]) if job == "ps" else 0)]}, base_env)
            out.append((f"{job} {i}", argv, env))
    return out


def serve_forever() -> None:
    """Body of ``distbench worker tf-server``: a ``tf.distribute.Server`` for the task in
    ``TF_CONFIG`` (validated before TensorFlow is imported), serving until killed.

    Raises:
        ConfigError: ``TF_CONFIG`` is missing or invalid (see
            :func:`~distbench.launch.tfconfig.parse_tf_config`).
    """
    task = parse_tf_config(os.environ.get("TF_CONFIG"), "worker tf-server")
    import tensorflow as tf

    gpu.place(0)  # a worker task's one GPU (CUDA_VISIBLE_DEVICES), with memory growth; ps tasks see none
    threads = int(os.environ.get("DISTBENCH_THREADS", "0"))
    proto = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=SERVER_INTER_OP,
                                     intra_op_parallelism_threads=threads)
    server = tf.distribute.Server(tf.train.ClusterSpec(task.cluster), job_name=task.task_type, task_index=task.index,
                                  protocol=task.rpc_layer, config=proto, start=True)
    print(f"tf-server {task.name} listening on {task.address}", flush=True)
    # server.join() blocks in C++, where Python's KeyboardInterrupt handler never runs:
    # let SIGINT end the process directly, as SIGTERM does (a server has nothing to save).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    server.join()


def stall_floor(timeout_s: float) -> float:
    """The least time an epoch may run before it counts as stalled, for a configuration
    limited to ``timeout_s``: a tenth of it, between 10 s and :data:`STALL_FLOOR_S`."""
    return min(STALL_FLOOR_S, max(10.0, timeout_s / 10))


def stalled(epoch_ends: list[float], now: float, floor_s: float = STALL_FLOOR_S) -> float | None:
    """Seconds since the last progress if training has stalled, else None.

    ``epoch_ends`` holds the monotonic time training started, then each epoch's end.
    Once one epoch has finished, an epoch is stalled when it has run longer than
    ``STALL_FACTOR`` times the slowest epoch so far and longer than ``floor_s``:
    a task that is alive but never answers (stopped, deadlocked) holds every step that
    needs it, and the coordinator would wait for it without end.
    """
    if len(epoch_ends) < 2:
        return None
    slowest = max(b - a for a, b in zip(epoch_ends, epoch_ends[1:]))
    waited = now - epoch_ends[-1]
    return waited if waited > max(floor_s, STALL_FACTOR * slowest) else None


def _process_state(pid: int) -> str:
    """The kernel's one-letter state of ``pid`` (``T``: stopped), or ``?``."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def _watchdog(group: process.ProcessGroup, artifacts_dir: Path, stop: threading.Event,
              epoch_ends: list[float], floor_s: float = STALL_FLOOR_S) -> None:
    """End this process as soon as a server task dies, or training stalls (see
    :func:`stalled`), with a result naming the task."""
    while not stop.wait(0.2):
        failed = group.first_failure()
        waited = stalled(epoch_ends, time.monotonic(), floor_s)
        details = None
        if failed is not None:
            tail = process.log_tail(failed.log)
            last = process.last_error_line(tail)
            name, reason = failed.name, f"{failed.name} failed with {process.describe_exit(failed.returncode)}" + (
                f" ({last})" if last else "")
            details = {"failed_process_log_tail": tail[-4000:]}
        elif waited is not None:
            halted = [spec.name for spec, p in zip(group.specs, group.procs) if _process_state(p.pid) in "tT"]
            name = ", ".join(halted) or "a worker or ps task"
            reason = (f"training stalled: no epoch finished for {waited:.0f} s (the slowest took "
                      f"{max(b - a for a, b in zip(epoch_ends, epoch_ends[1:])):.1f} s); "
                      + (f"{name} {'is' if len(halted) == 1 else 'are'} stopped (process state T)" if halted
                         else "every task is alive but one stopped answering"))
        else:
            continue
        write_child_result(artifacts_dir, Status.FAILED, reason=reason, failed_process=name, details=details)
        print(f"tf_ps: {reason}; stopping", file=sys.stderr, flush=True)
        group.terminate(grace_s=2.0)
        os._exit(1)


def shard_orders(rows: int, epochs: int, seed: int, batch: int, workers: int, steps_per_epoch: int) -> np.ndarray:
    """Every worker's row numbers over the run, one row per worker: worker ``i``'s is
    :func:`~distbench.training.schedule.shard_indices` of shard ``i`` (the rows and order
    replica ``i`` of the other parameter-server strategies trains on).

    Args:
        rows: rows of the in-memory training split; epochs, seed: the run's.
        batch: the per-worker batch; workers: N; steps_per_epoch: local steps per epoch.

    Returns:
        int32 array, shape ``(workers, epochs * steps_per_epoch * batch)``.

    Raises:
        ValueError: a shard holds fewer rows than one epoch's batches.
    """
    from distbench.training.schedule import shard_indices

    return np.stack([shard_indices(rows, epochs, seed, batch, i, workers, steps_per_epoch)
                     for i in range(workers)]).astype(np.int32)


def _wait_for_workers(per_worker: Any) -> None:
    """Wait until the coordinator's closure threads have built every worker's iterator of
    ``per_worker`` (what ``iter(create_per_worker_dataset(...))`` returned at once), so that
    building them (the training split travels to each worker) is not timed as training.

    ``ClusterCoordinator.join`` does not wait for these per-worker resource closures, and
    TensorFlow has no public call that does: this uses the ``RemoteValue``s'
    ``_wait_and_maybe_error`` (TensorFlow 2.21), and does nothing where a TensorFlow
    version lacks it (the building then falls in the first epoch, as the first
    ``schedule`` waits behind it).

    Raises:
        tf.errors.OpError: a worker failed to build its dataset.
    """
    for value in getattr(per_worker, "_values", ()):
        wait = getattr(value, "_wait_and_maybe_error", None)
        if wait is not None:
            wait()


@register
class TFParameterServer(Strategy):
    """ParameterServerStrategy: N worker and P ps server processes, coordinator in this process."""

    name = "tf_ps"
    description = "tf.distribute.ParameterServerStrategy + ClusterCoordinator (async, N workers, P ps tasks)"
    synchronous = False
    needs = ("TensorFlow on every host, a TF_CONFIG per task (chief, workers, ps tasks), the workers' and ps "
             "tasks' TensorFlow servers kept running, and a coordinator process")
    scales_learning_rate = False
    worker_entries = {"tf-server": "distbench.strategies.tf_ps:server_command"}

    def is_available(self, config: ExperimentConfig, workers: int) -> Availability:
        """Unavailable for data read block by block (Parquet): each worker's input pipeline
        runs inside a TensorFlow server process, where distbench's Parquet reader (a Python
        generator of the coordinator's process) cannot run."""
        if config.data.name == "parquet":
            return Availability(False, "tf_ps feeds its workers inside tf.distribute.Server processes, which cannot "
                                       "run distbench's Parquet reader (a Python generator): use an in-memory dataset "
                                       "(npz, digits, ...) for tf_ps")
        return Availability(True)

    def launch(self, ctx: LaunchContext) -> TrainOutput:
        """Start the servers, train from this process as the coordinator, stop the servers.

        Raises:
            StrategyUnavailable: under a straggler scenario: the steps run inside the worker
                tasks' TensorFlow servers, scheduled as graph functions by the coordinator, where
                the loop core's host-side step timing and delay (a Python function registered in
                the coordinator's process) cannot run.
        """
        if ctx.scenario is not None:
            raise StrategyUnavailable(
                "tf_ps does not support straggler scenarios: its steps run inside the worker tasks' TensorFlow "
                "servers (functions scheduled by the coordinator), where distbench's host-side step delay cannot run")
        cfg, n, pl = ctx.config, ctx.workers, ctx.placement
        # the chief (this process) and the ps tasks on the launching host, the workers on their hosts
        ports = free_ports(1 + n + cfg.tf.ps_tasks)
        if not pl.is_local:
            ports[1:1 + n] = [WORKER_PORT + i for i in range(n)]  # each host has its own ports
        cluster = cluster_spec(ports, n, cfg.tf.ps_tasks, host=pl.driver,
                               worker_hosts=None if pl.is_local else [pl.address(i) for i in range(n)])
        specs = []
        for name, argv, env in server_commands(cluster, ctx.threads_per_process(n + 1), ctx.run_dir,
                                               python=pl.python):
            job, i = name.split()
            argv = pl.wrap(int(i), argv, env) if job == "worker" else argv
            specs.append(process.ProcSpec(name, argv, env, ctx.log_dir / f"{name.replace(' ', '')}.log"))
        placed = pl.describe({f"worker {i}": i for i in range(n)},
                             driver=["chief"] + [f"ps {i}" for i in range(cfg.tf.ps_tasks)])
        gpus = [s.env.get("CUDA_VISIBLE_DEVICES") for s in specs[:n]]  # what each worker task was given
        placed["per_worker_devices"] = [f"GPU {g}" if g and not g.startswith("-") else "CPU" for g in gpus]
        ctx.artifacts_dir.mkdir(parents=True, exist_ok=True)
        group = process.ProcessGroup(specs).start()
        if not pl.is_local:  # the wrapper execs the server: its pid is the server's
            placed["worker_netns"] = [current_namespace(p.pid) for p in group.procs[:n]]
        stop = threading.Event()
        epoch_ends: list[float] = []
        threading.Thread(target=_watchdog, args=(group, ctx.artifacts_dir, stop, epoch_ends,
                                                 stall_floor(ctx.timeout_s)), daemon=True).start()
        try:
            out = self._coordinate(ctx, cluster, epoch_ends)
            out.extra.update(placed)
            return out
        finally:
            stop.set()
            group.terminate(grace_s=2.0)

    def _coordinate(self, ctx: LaunchContext, cluster: dict[str, list[str]], epoch_ends: list[float]) -> TrainOutput:
        import tensorflow as tf

        cfg, wl, n = ctx.config, ctx.workload, ctx.workers
        tf.config.threading.set_inter_op_parallelism_threads(COORDINATOR_INTER_OP)
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(cluster), task_type="chief", task_id=0, rpc_layer="grpc")
        strategy = tf.distribute.ParameterServerStrategy(resolver)
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        with strategy.scope():
            model = wl.build_model()
            optimizer = wl.make_optimizer(1)
            optimizer.build(model.trainable_variables)
        loss_obj = wl.loss_fn()
        B = cfg.training.global_batch_size // n
        x_train, y_train = wl.dataset.x_train, wl.dataset.y_train

        order = tf.constant(shard_orders(len(y_train), cfg.training.epochs, cfg.training.seed, B, n,
                                         wl.steps_per_epoch()))
        xt, yt = tf.constant(x_train), tf.constant(y_train)

        def dataset_fn() -> Any:  # runs on each worker: its row of the PS replicas' shard orders
            me = tf.distribute.coordinator.experimental_get_current_worker_index()
            return (tf.data.Dataset.from_tensor_slices(tf.gather(order, me)).batch(B, drop_remainder=True).repeat()
                    .map(lambda i: (tf.gather(xt, i), tf.gather(yt, i))).prefetch(2))

        # no step delay: tf_ps is unavailable under a scenario (launch), so the delay is inactive
        replica_fn = replica_step(model, optimizer, lambda y, logits: tf.reduce_mean(loss_obj(y, logits)),
                                  StepDelay)

        @tf.function
        def step(iterator: Any) -> Any:
            x, y = next(iterator)
            strategy.run(replica_fn, args=(x, y))
            return tf.distribute.coordinator.experimental_get_current_worker_index()

        steps_per_epoch = n * wl.steps_per_epoch()
        handles: list[Any] = []
        loop = TrainLoop(cfg.training.epochs, model.get_weights, label="",
                         hooks=[lambda end: epoch_ends.append(time.monotonic())])
        # Trace the step before the clock, as every strategy does: the coordinator traces a
        # scheduled function against each worker iterator's IteratorSpec, so tracing it
        # against the same spec here fills the cache the first schedule() looks up.
        # The trace comes before create_per_worker_dataset: that call returns at once while
        # the coordinator's closure threads build each worker's dataset remotely, and a
        # trace on this thread at the same time ended in SIGSEGV in a closure thread (see
        # docs/architecture.md, "tf_ps chief, SIGSEGV").
        spec = tf.data.IteratorSpec((tf.TensorSpec((B, *x_train.shape[1:]), tf.as_dtype(x_train.dtype)),
                                     tf.TensorSpec((B,), tf.as_dtype(y_train.dtype))))
        with strategy.scope():  # schedule() traces inside the strategy's scope too
            loop.trace(lambda: step.get_concrete_function(spec))
        per_worker = iter(coordinator.create_per_worker_dataset(dataset_fn))
        _wait_for_workers(per_worker)  # each worker's dataset is built before the clock starts

        def run_epoch(epoch: int) -> tuple[int, None]:
            if epoch == 0:
                epoch_ends.append(time.monotonic())  # the watchdog bounds each epoch from here
            handles.extend(coordinator.schedule(step, args=(per_worker,)) for _ in range(steps_per_epoch))
            coordinator.join()
            return len(handles), None

        res = loop.run(run_epoch)
        per_worker_steps = Counter(int(h.fetch()) for h in handles)
        return TrainOutput(
            final_weights=[np.asarray(w, np.float32) for w in model.get_weights()],
            snapshots=res.snapshots, train_s=res.train_s, first_step_unix=res.first_step_unix,
            steps=len(handles), samples=len(handles) * B, replicas=n,
            extra={"engine": "tf.distribute", "ps_tasks": cfg.tf.ps_tasks, "cluster": cluster,
                   "per_worker_steps": [per_worker_steps.get(i, 0) for i in range(n)],
                   "per_replica_batch_size": B, "coordinator_inter_op_threads": COORDINATOR_INTER_OP,
                   "server_inter_op_threads": SERVER_INTER_OP, "trace_s": res.trace_s,
                   "step_traces": step.experimental_get_tracing_count()},
        )


@click.command("tf-server", hidden=True)
@click.option("--run-dir", type=click.Path(file_okay=False), help="The run this server belongs to (informational).")
@user_errors
def server_command(run_dir: str | None) -> None:
    """A tf.distribute.Server for the task in TF_CONFIG (tf_ps workers and ps tasks)."""
    serve_forever()
