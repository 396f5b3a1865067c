"""``keras_jax``: the run's model under Keras 3's own distribution API on the JAX backend.

``keras_jax:data_parallel`` trains with ``keras.distribution.DataParallel`` over a 1-D
device mesh of N devices in one process: the accelerators JAX finds (at most N), else N
CPU devices that XLA splits the host into (``XLA_FLAGS=--xla_force_host_platform_device_count=N``).
Variables are replicated over the mesh, each global batch is split on it (device ``r``
holds the ``r``-th ``G/N`` rows, as replica ``r`` of ``mirrored`` does), and XLA's SPMD
partitioner all-reduces the gradients inside one jitted stateless train step
(:mod:`distbench.training.jax_loop`).

How it is launched: Keras picks its backend when it is first imported, and the
configuration's process is a TensorFlow-backend process; so the strategy starts one more
process, ``distbench worker keras-jax`` (:mod:`distbench.harness.keras_jax_app`), with
``KERAS_BACKEND=jax`` and the device count (:func:`jax_command`, pure, tested exactly),
through :func:`distbench.launch.process.run_processes` (its own process group, the
configuration's time limit, its log in the configuration's log folder), and reads back the
result it leaves in the artifacts directory. TensorFlow and JAX are never imported in the
same process.

``keras_jax:multi_process`` runs the same over N processes of one device each, joined by
``keras.distribution.initialize`` (process 0 coordinates; Gloo collectives between CPU
devices; one GPU per process by ``CUDA_VISIBLE_DEVICES`` where there are GPUs), placed like
``multi_worker_mirrored``'s workers. ``keras_jax:model_parallel`` trains in one process under
``keras.distribution.ModelParallel``: a ``(batch, model)`` mesh, the largest Dense kernels
split over the model axis (:func:`distbench.training.jax_loop.model_parallel_plan`).

Source: the Keras distribution API guide (keras-io ``guides/distribution.py``,
"Distributed training with Keras 3": ``DeviceMesh``, ``DataParallel``, ``ModelParallel``,
``LayoutMap``, ``set_distribution``, ``initialize``); docs/keras_jax.md.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path
from typing import Any

from distbench.config import ExperimentConfig
from distbench.contracts import Status
from distbench import gpu
from distbench.launch import commands, process
from distbench.strategies.base import Availability, LaunchContext, Strategy, StrategyUnavailable
from distbench.strategies.registry import register_family
from distbench.training import TrainOutput
from distbench.training.jax_loop import PROCESS_FILE, xla_flags
from distbench.training.output import RESULT_FILE, TrainingFailed, read_child_result

PROCESS_NAME = "jax process"
LOG_FILE = "jax.log"
INSTALL_HINT = "install it with pip install 'jax[cpu]' (make setup does)"


def jax_command(run_dir: Path, out: Path, workers: int, base_env: dict[str, str] | None = None,
                scenario: Any = None, coordinator: str = "", process_id: int = 0, threads: int = 0,
                python: str | None = None, model_parallel: bool = False) -> tuple[list[str], dict[str, str]]:
    """argv and env of the JAX process of one ``keras_jax:data_parallel`` configuration, or
    of process ``process_id`` of a ``keras_jax:multi_process`` one.

    Args:
        run_dir: the run directory.
        out: the configuration's artifacts directory (where the process leaves its result).
        workers: devices of the mesh; in one process also the number of CPU devices XLA
            makes of the host (``XLA_FLAGS``, other flags of ``base_env`` kept; ignored by
            JAX's GPU and TPU backends); under several processes one device each.
        base_env: environment to start from (default ``os.environ``).
        scenario: the straggler :class:`~distbench.config.scenario.Scenario`, or None.
        coordinator: ``host:port`` of process 0 under several processes; ``""``: one process.
        process_id: this process's index under several.
        threads: CPU threads of the process (0: derived in the process).
        python: the interpreter (default: this one; a cluster's hosts may name another).
        model_parallel: ``keras_jax:model_parallel`` (``--model-parallel``).

    Returns:
        ``(argv, env)``: ``python -m distbench worker keras-jax ...`` with ``KERAS_BACKEND=jax``.
    """
    base = dict(os.environ if base_env is None else base_env)
    argv = commands.worker_argv("keras-jax", run_dir, ("--out", out), ("--workers", workers),
                                ("--scenario", commands.scenario_arg(scenario)), ("--coordinator", coordinator),
                                ("--process-id", process_id if coordinator else None),
                                ("--threads", threads or None), python=python)
    if model_parallel:
        argv.append("--model-parallel")
    devices = 1 if coordinator else workers
    env = commands.child_env({"KERAS_BACKEND": "jax", "XLA_FLAGS": xla_flags(devices, base.get("XLA_FLAGS", ""))},
                             base)
    return argv, env


def jax_missing() -> str:
    """Why JAX cannot run here (``""`` when ``jax`` and ``jaxlib`` are installed), without importing it."""
    missing = [m for m in ("jax", "jaxlib") if importlib.util.find_spec(m) is None]
    return f"the Python package{'s' if len(missing) > 1 else ''} {' and '.join(missing)} " \
           f"{'are' if len(missing) > 1 else 'is'} not installed; {INSTALL_HINT}" if missing else ""


def result_of(res: process.GroupResult, out: Path, timeout_s: float) -> TrainOutput:
    """The output of a finished JAX process, from the result it left in ``out``.

    Raises:
        StrategyUnavailable: the process found JAX unusable (its reason).
        TrainingFailed: it failed (its reason), timed out, or ended without a result
            (its exit and last error line), naming :data:`PROCESS_NAME`.
    """
    found = read_child_result(out)
    if found is not None and found.status == Status.UNAVAILABLE:
        raise StrategyUnavailable(found.reason)
    if res.ok and found is not None and found.status == Status.OK and found.output is not None:
        return found.output
    if found is not None and found.status == Status.FAILED and not res.timed_out:
        raise TrainingFailed(found.reason, PROCESS_NAME, found.details)
    last = process.last_error_line(process.log_tail(res.failed.log)) if res.failed else ""
    why = res.reason(timeout_s) or "the JAX process ended without a result"
    raise TrainingFailed(why + (f" ({last})" if last else ""), PROCESS_NAME)


class KerasJaxDataParallel(Strategy):
    """``keras.distribution.DataParallel`` on the JAX backend: one process, a 1-D mesh of N
    devices (accelerators, or N host-platform CPU devices)."""

    name = "keras_jax:data_parallel"
    description = "Keras 3 keras.distribution.DataParallel on JAX: one process, N devices (CPU devices without GPUs)"
    needs = ("JAX (and Keras 3) installed on one machine: its GPUs or TPU cores are the replicas, or CPU devices "
             "where it has none (no multi-host training in this form)")
    uses_network = False
    worker_entries = {"keras-jax": "distbench.harness.keras_jax_app:command"}
    model_parallel = False

    def is_available(self, config: ExperimentConfig, workers: int) -> Availability:
        """Available where ``jax`` and ``jaxlib`` are installed (found without importing them:
        the JAX process imports them, and reports ``unavailable`` if that fails)."""
        missing = jax_missing()
        return Availability(not missing, missing)

    def launch(self, ctx: LaunchContext) -> TrainOutput:
        """Start the JAX process, wait for it (within the configuration's time limit), return its output.

        Raises:
            StrategyUnavailable: JAX is not installed, or the process found it unusable.
            TrainingFailed: the JAX process failed, timed out or left no result.
        """
        missing = jax_missing()
        if missing:
            raise StrategyUnavailable(missing)
        ctx.artifacts_dir.mkdir(parents=True, exist_ok=True)
        (ctx.artifacts_dir / RESULT_FILE).unlink(missing_ok=True)  # only this process's result is read back
        argv, env = jax_command(ctx.run_dir, ctx.artifacts_dir, ctx.workers, scenario=ctx.scenario,
                                model_parallel=self.model_parallel)
        spec = process.ProcSpec(PROCESS_NAME, argv, env, ctx.log_dir / LOG_FILE)
        res = process.run_processes([spec], ctx.timeout_s)
        out = result_of(res, ctx.artifacts_dir, ctx.timeout_s)
        out.extra["jax_process_log"] = str(ctx.log_dir / LOG_FILE)
        return out


class KerasJaxMultiProcess(KerasJaxDataParallel):
    """``keras.distribution.DataParallel`` on JAX over N processes of one device each, joined
    by ``keras.distribution.initialize`` (``jax.distributed``; Gloo collectives between CPU
    devices), on this machine or one per slot of a cluster's hosts, as
    ``multi_worker_mirrored``'s workers are placed."""

    name = "keras_jax:multi_process"
    description = ("Keras 3 DataParallel on JAX over N processes (keras.distribution.initialize, "
                   "Gloo collectives on CPUs), on one host or a cluster")
    needs = "JAX (and Keras 3) installed on every host; TCP between the processes (process 0 coordinates)"
    uses_network = True

    def launch(self, ctx: LaunchContext) -> TrainOutput:
        """Start the N JAX processes (process 0 coordinates), wait for them, check that
        every process ended with the same weights; return process 0's output with each
        process's namespace, host and weight hash.

        Raises:
            StrategyUnavailable: JAX is not installed, or the processes found it unusable.
            TrainingFailed: a process failed, timed out or left no result (naming it).
        """
        missing = jax_missing()
        if missing:
            raise StrategyUnavailable(missing)
        n, pl = ctx.workers, ctx.placement
        art = ctx.artifacts_dir
        art.mkdir(parents=True, exist_ok=True)
        for stale in (art / RESULT_FILE, *art.glob("process*")):  # only these processes' results are read back
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink(missing_ok=True)
        port = commands.free_ports(1)[0] if pl.is_local else REMOTE_PORT
        coordinator = f"{pl.address(0)}:{port}"
        gpus = gpu.process_envs([pl.address(i) for i in range(n)])  # one GPU per process where there are GPUs
        specs = []
        for i in range(n):
            argv, env = jax_command(ctx.run_dir, art, n, {**os.environ, **gpus[i]}, ctx.scenario, coordinator, i,
                                    ctx.threads_per_process(n), pl.python)
            specs.append(process.ProcSpec(f"jax process {i}", pl.wrap(i, argv, env), env, ctx.log_dir / f"jax{i}.log"))
        res = process.run_processes(specs, ctx.timeout_s)
        failed = res.failed
        k = int(failed.name.rsplit(" ", 1)[1]) if failed is not None else 0
        out = result_of(res, art if k == 0 else art / f"process{k}", ctx.timeout_s)
        procs = [json.loads((art / PROCESS_FILE.format(i)).read_text()) for i in range(n)]
        hashes = [p["weights_sha256"] for p in procs]
        out.extra.update(
            process_netns=[p["netns"] for p in procs], process_hosts=[p["hostname"] for p in procs],
            worker_weight_sha256=hashes, replicas_in_sync_check="passed" if len(set(hashes)) == 1 else "failed",
            jax_process_logs=[str(s.log) for s in specs], coordinator=coordinator,
            **pl.describe({f"jax process {i}": i for i in range(n)}))
        return out


class KerasJaxModelParallel(KerasJaxDataParallel):
    """``keras.distribution.ModelParallel`` on JAX in one process: a 2-D mesh ``(batch,
    model)`` of N devices, the largest Dense kernels split on their output dimension over the
    model axis by a ``LayoutMap`` (:func:`distbench.training.jax_loop.model_parallel_plan`),
    the batch split over the batch axis; ``unavailable`` with the reason where no such mesh
    or split can be formed (one device; no kernel the model axis divides)."""

    name = "keras_jax:model_parallel"
    description = ("Keras 3 keras.distribution.ModelParallel on JAX: one process, a 2-D mesh, the largest Dense "
                   "kernels sharded")
    needs = "JAX (and Keras 3) installed on one machine; 2 or more devices (CPU devices without GPUs)"
    model_parallel = True


REMOTE_PORT = 23600
"""Process 0's coordination port on a cluster host (a fixed port, as ``multi_worker_mirrored``'s)."""

register_family("keras_jax", [KerasJaxDataParallel, KerasJaxMultiProcess, KerasJaxModelParallel])
