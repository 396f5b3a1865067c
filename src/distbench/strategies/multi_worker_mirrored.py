"""``multi_worker_mirrored``: synchronous all-reduce across worker processes with
``tf.distribute.MultiWorkerMirroredStrategy``.

How it trains: N worker processes, each with a ``TF_CONFIG`` naming the cluster
(``127.0.0.1:<free port>`` per worker locally; any host list on a cluster) and its own
index. Each runs the shared custom loop (:mod:`distbench.training.tf_loop`) with
one input pipeline per worker: worker r feeds the r-th ``G/N`` slice of every
global batch, so the steps and samples are exactly those of
``single`` and ``mirrored``; gradients are summed by collective all-reduce
(``ring``/``nccl``/``auto``, recorded). Keras 3 ``model.fit`` is broken under this
strategy (keras-team/keras#20585), hence the custom loop. The chief (worker 0) saves
the result; every worker writes the SHA-256 of its final weights, and the launcher
checks that they are all equal (``replicas_in_sync_check``).

How it is launched: :func:`worker_commands` builds each process's argv and env (pure,
tested exactly); :func:`distbench.launch.process.run_processes` starts them in
new process groups, kills all if one dies, and reports which task failed. On a cluster
users run ``distbench worker tf --run-dir DIR --config cfg.toml`` on every host with
their own ``TF_CONFIG``. Either way each ``worker tf`` validates ``TF_CONFIG``
(:func:`distbench.launch.tfconfig.parse_tf_config`) before TensorFlow starts, then
runs the TensorFlow task as a supervised child that must join the cluster within the
join timeout (``DISTBENCH_JOIN_TIMEOUT_S``, set here to half the configuration's time
limit; :mod:`distbench.harness.cluster`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from distbench import gpu
from distbench.launch import commands, process
from distbench.launch.commands import free_ports, worker_argv
from distbench.strategies.base import LaunchContext, Strategy
from distbench.strategies.registry import register
from distbench.launch.tfconfig import JOIN_TIMEOUT_ENV, TFTask, tf_config
from distbench.training import TrainOutput
from distbench.training.output import TrainingFailed
from distbench.training.loop import threads_per_process
from distbench.workload import Workload, weights_sha256
from distbench.procinfo import current_namespace

HASH_FILE = "weights_sha256_worker{}.txt"
DELAY_FILE = "step_delay_worker{}.json"  # a straggler scenario's step delays of one delayed worker
NETNS_FILE = "netns_worker{}.txt"
DEVICE_FILE = "device_worker{}.txt"
REMOTE_PORT = 23456  # worker k listens on REMOTE_PORT + k on another host (each host has its own ports)


def worker_commands(run_dir: Path, key: str, ports: list[int], threads: int, collective: str = "ring",
                    base_env: dict[str, str] | None = None, host: str | list[str] = "127.0.0.1",
                    join_timeout_s: float | None = None, python: str | None = None,
                    scenario: Any = None) -> list[tuple[list[str], dict[str, str]]]:
    """argv and env of each MultiWorkerMirroredStrategy worker process.

    Args:
        run_dir: run directory; key: record key (``<config_id>_r<repeat>``).
        ports: one port per worker on ``host``.
        host: every worker's address, or one per worker (placed on other hosts).
        python: the interpreter on the workers' hosts (default this one).
        threads: intra-op threads per worker.
        collective: ``ring`` | ``nccl`` | ``auto`` (the strategy is built before the config is read).
        join_timeout_s: seconds each worker may wait for the cluster to form
            (``DISTBENCH_JOIN_TIMEOUT_S``; None: the ``worker tf`` default).
        scenario: the straggler :class:`~distbench.config.scenario.Scenario` (``--scenario``), or None.

    Where this machine has GPUs, each worker's ``CUDA_VISIBLE_DEVICES`` names one
    (:func:`distbench.gpu.process_envs`).
    """
    hosts = [host] * len(ports) if isinstance(host, str) else list(host)
    cluster = {"worker": [f"{h}:{p}" for h, p in zip(hosts, ports)]}
    extra = {} if join_timeout_s is None else {JOIN_TIMEOUT_ENV: f"{join_timeout_s:g}"}
    gpus = gpu.process_envs(hosts, env=base_env)  # one GPU per worker process where there are GPUs
    out = []
    for i in range(len(ports)):
        argv = worker_argv("tf", run_dir, ("--key", key), ("--scenario", commands.scenario_arg(scenario)),
                           python=python)
        env = commands.child_env({"TF_CONFIG": tf_config(cluster, "worker", i), "DISTBENCH_THREADS": str(threads),
                                   "DISTBENCH_COLLECTIVE": collective, **extra, **gpus[i]}, base_env)
        out.append((argv, env))
    return out


def collective_options(name: str) -> Any:
    """``tf.distribute.experimental.CommunicationOptions`` for ``ring`` | ``nccl`` | ``auto``."""
    import tensorflow as tf

    impl = {"ring": tf.distribute.experimental.CommunicationImplementation.RING,
            "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
            "auto": tf.distribute.experimental.CommunicationImplementation.AUTO}[name]
    return tf.distribute.experimental.CommunicationOptions(implementation=impl)


def threads_for(workers: int) -> int:
    """Intra-op threads of one worker process: ``DISTBENCH_THREADS`` if set, else cores // workers."""
    return threads_per_process(int(os.environ.get("DISTBENCH_THREADS", "0")), workers)


def train_worker(task: TFTask, load_workload: Callable[[], Workload], artifacts_dir: Path | None,
                 scenario: Any = None) -> TrainOutput:
    """Body of one worker process: build the strategy for ``task`` (which joins the
    cluster), then load the workload with ``load_workload()`` (after the strategy:
    collective ops must be configured before any other TensorFlow op) and train.

    Under :func:`distbench.launch.process.supervise` it reports two stages: about
    to join (TensorFlow imported), and joined (every task of the cluster is up).
    Every worker writes its final weights' SHA-256 to ``artifacts_dir``; the chief
    (rank 0) also saves the :class:`TrainOutput` there (when ``artifacts_dir`` is set).
    A straggler ``scenario`` delays the steps of the worker it names (replica = task index).

    Raises:
        ValueError: ``DISTBENCH_COLLECTIVE`` differs from the run's ``tf.collective``.
    """
    n = task.replicas
    from distbench.training.loop import configure_threads
    from distbench.training.tf_loop import train_with_strategy

    threads = configure_threads(threads_for(n))
    names = gpu.place(0)  # the GPU CUDA_VISIBLE_DEVICES gave this worker, with memory growth
    import tensorflow as tf

    collective = os.environ.get("DISTBENCH_COLLECTIVE", "ring")
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(task.cluster), task_type=task.task_type, task_id=task.index, rpc_layer=task.rpc_layer)
    process.report_stage()  # about to join: from here the join timeout runs
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver,
                                                         communication_options=collective_options(collective))
    process.report_stage()  # joined: the constructor returns once every task has registered
    workload = load_workload()
    if workload.config.tf.collective != collective:
        raise ValueError(f"DISTBENCH_COLLECTIVE={collective!r} but the run's config says tf.collective = "
                         f"{workload.config.tf.collective!r}; start the workers with matching settings")
    out = train_with_strategy(strategy, workload, scenario)
    sha = weights_sha256(out.final_weights)
    out.extra.update(threads, collective=collective, workers=n, cluster=task.cluster,
                     devices=[d.name for d in tf.config.list_logical_devices("CPU")], device_names=names)
    if artifacts_dir is not None:
        artifacts_dir.mkdir(parents=True, exist_ok=True)
        (artifacts_dir / HASH_FILE.format(task.rank)).write_text(sha)
        if out.extra.get("step_delays"):  # this worker's replica only: the launcher merges them
            (artifacts_dir / DELAY_FILE.format(task.rank)).write_text(json.dumps(out.extra["step_delays"]))
        (artifacts_dir / NETNS_FILE.format(task.rank)).write_text(current_namespace())
        (artifacts_dir / DEVICE_FILE.format(task.rank)).write_text(", ".join(names))
        if task.rank == 0:
            out.save(artifacts_dir)
    return out


@register
class MultiWorkerMirrored(Strategy):
    """MultiWorkerMirroredStrategy over N worker processes (TF_CONFIG on 127.0.0.1, or the
    cluster's hosts: worker k listens on port 23456 + k of its host)."""

    name = "multi_worker_mirrored"
    description = "tf.distribute.MultiWorkerMirroredStrategy: N processes, collective all-reduce (TF_CONFIG)"
    needs = ("TensorFlow on every host and a TF_CONFIG per worker (the cluster's addresses and the task's index), "
             "every worker started by you or a scheduler, a port open between every pair of workers")
    worker_entries = {"tf": "distbench.harness.cluster:tf_command",
                      "tf-task": "distbench.harness.cluster:tf_task_command"}
    train_task = staticmethod(train_worker)

    def launch(self, ctx: LaunchContext) -> TrainOutput:
        """Start N worker processes, wait, check every worker ended with the same weights."""
        n, pl = ctx.workers, ctx.placement
        ports = free_ports(n) if pl.is_local else [REMOTE_PORT + i for i in range(n)]
        cmds = worker_commands(ctx.run_dir, ctx.key, ports, ctx.threads_per_process(n), ctx.config.tf.collective,
                               host=[pl.address(i) for i in range(n)], join_timeout_s=ctx.timeout_s / 2,
                               python=pl.python, scenario=ctx.scenario)
        specs = [process.ProcSpec(f"worker {i}", pl.wrap(i, argv, env), env, ctx.log_dir / f"worker{i}.log")
                 for i, (argv, env) in enumerate(cmds)]
        res = process.run_processes(specs, ctx.timeout_s)
        if not res.ok:
            name = res.failed.name if res.failed else "a worker"
            last = process.last_error_line(process.log_tail(res.failed.log)) if res.failed else ""
            raise TrainingFailed(f"{res.reason(ctx.timeout_s)}" + (f" ({last})" if last else ""), name)
        out = TrainOutput.load(ctx.artifacts_dir)
        hashes = [(ctx.artifacts_dir / HASH_FILE.format(i)).read_text() for i in range(n)]
        out.extra["worker_weight_sha256"] = hashes
        out.extra["replicas_in_sync_check"] = "passed" if len(set(hashes)) == 1 else "failed"
        delays = [p for p in (ctx.artifacts_dir / DELAY_FILE.format(i) for i in range(n)) if p.exists()]
        if ctx.scenario is not None and delays:  # the delayed workers' step delays
            out.extra["step_delays"] = {k: v for p in delays for k, v in json.loads(p.read_text()).items()}
        out.extra["worker_netns"] = [(ctx.artifacts_dir / NETNS_FILE.format(i)).read_text() for i in range(n)]
        out.extra["per_worker_devices"] = [(ctx.artifacts_dir / DEVICE_FILE.format(i)).read_text() for i in range(n)]
        out.extra.update(pl.describe({f"worker {i}": i for i in range(n)}))
        return out
