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

Source: the Keras distribution API guide (keras-io ``guides/distribution.py``,
"Distributed training with Keras 3": ``DeviceMesh``, ``DataParallel``, ``set_distribution``).
Multi-process training (``keras.distribution.initialize`` over several processes or hosts)
and ``ModelParallel`` are not built yet (docs/keras_jax.md).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from distbench.config import ExperimentConfig
from distbench.contracts import Status
from distbench.launch import commands, process
from distbench.strategies.base import Availability, LaunchContext, Strategy, StrategyUnavailable
from distbench.strategies.registry import register_family
from distbench.training import TrainOutput
from distbench.training.jax_loop import xla_flags
from distbench.training.output import RESULT_FILE, TrainingFailed, read_child_result

PROCESS_NAME = "jax process"
LOG_FILE = "jax.log"
INSTALL_HINT = "install it with pip install 'jax[cpu]' (make setup does)"


def jax_command(run_dir: Path, out: Path, workers: int, base_env: dict[str, str] | None = None,
                scenario: Any = None) -> tuple[list[str], dict[str, str]]:
    """argv and env of the JAX process of one ``keras_jax:data_parallel`` configuration.

    Args:
        run_dir: the run directory.
        out: the configuration's artifacts directory (where the process leaves its result).
        workers: devices of the mesh; also the number of CPU devices XLA makes of the host
            (``XLA_FLAGS``, other flags of ``base_env`` kept; ignored by JAX's GPU and TPU backends).
        base_env: environment to start from (default ``os.environ``).
        scenario: the straggler :class:`~distbench.config.scenario.Scenario`, or None.

    Returns:
        ``(argv, env)``: ``python -m distbench worker keras-jax ...`` with ``KERAS_BACKEND=jax``.
    """
    base = dict(os.environ if base_env is None else base_env)
    argv = commands.worker_argv("keras-jax", run_dir, ("--out", out), ("--workers", workers),
                                ("--scenario", commands.scenario_arg(scenario)))
    env = commands.child_env({"KERAS_BACKEND": "jax", "XLA_FLAGS": xla_flags(workers, base.get("XLA_FLAGS", ""))},
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
        argv, env = jax_command(ctx.run_dir, ctx.artifacts_dir, ctx.workers, scenario=ctx.scenario)
        spec = process.ProcSpec(PROCESS_NAME, argv, env, ctx.log_dir / LOG_FILE)
        res = process.run_processes([spec], ctx.timeout_s)
        out = result_of(res, ctx.artifacts_dir, ctx.timeout_s)
        out.extra["jax_process_log"] = str(ctx.log_dir / LOG_FILE)
        return out


register_family("keras_jax", [KerasJaxDataParallel])
