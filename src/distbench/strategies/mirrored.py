"""``mirrored``: synchronous data parallelism on one machine with
``tf.distribute.MirroredStrategy`` (all-reduce of gradients each step).

With GPUs it uses ``min(workers, GPUs)`` GPUs; without, it splits the CPU into
``workers`` logical devices (``tf.config.set_logical_device_configuration``), as
TensorFlow's own tests do, so one replica runs per logical CPU device and the
cross-device all-reduce is real. The record lists the devices used.
"""

from __future__ import annotations

import os
from typing import Any

from distbench import gpu
from distbench.strategies.base import LaunchContext, Strategy, StrategyUnavailable
from distbench.strategies.registry import register
from distbench.training import TrainOutput


LOGICAL_GPUS_ENV = "DISTBENCH_LOGICAL_GPUS"
"""``DISTBENCH_LOGICAL_GPUS=K`` (K >= 2) on a machine with exactly one GPU: ``mirrored``
splits it into K logical GPUs of :data:`LOGICAL_GPU_MB` each, so its multi-device path
(per-device replicas, the cross-device all-reduce) runs on one GPU
(``benchmarks/gpu_check.py``)."""
LOGICAL_GPU_MB = 2048
"""Memory of each logical GPU, MiB."""


def cross_device_ops(tf: Any, kind: str) -> Any:
    """The all-reduce of ``mirrored``'s replicas: on GPUs NCCL where TensorFlow has its
    kernel (``NcclAllReduce``), else ``HierarchicalCopyAllReduce`` (copies through one
    GPU), which the record's ``cross_device_ops`` then names; on CPU devices and logical
    GPUs (NCCL does not run on virtual GPUs) TensorFlow's own choice (``None``:
    ``ReductionToOneDevice``)."""
    if kind != "GPU":
        return None
    from tensorflow.python.framework import kernels

    if kernels.get_registered_kernels_for_op("NcclAllReduce").kernel:
        return tf.distribute.NcclAllReduce()
    return tf.distribute.HierarchicalCopyAllReduce()


@register
class Mirrored(Strategy):
    """MirroredStrategy over GPUs, or over N logical CPU devices where there is no GPU."""

    name = "mirrored"
    description = "tf.distribute.MirroredStrategy (GPUs, or N logical CPU devices without GPUs)"
    needs = ("TensorFlow only, but one machine: its GPUs are the replicas, or logical CPU devices where it has "
             "none (no multi-host training)")
    uses_network = False

    def launch(self, ctx: LaunchContext) -> TrainOutput:
        """Set up the devices, train with the shared loop in this process."""
        from distbench.training.loop import configure_threads
        from distbench.training.tf_loop import train_with_strategy

        # One process; its intra-op pool is shared by all replicas.
        threads = configure_threads(ctx.threads_per_process(1))
        logical = int(os.environ.get(LOGICAL_GPUS_ENV) or 0)
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        if logical > 1 and len(gpus) == 1:  # gpu_check on one GPU: the multi-device path over logical GPUs
            tf.config.set_logical_device_configuration(
                gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=LOGICAL_GPU_MB)] * logical)
            devices = [f"/gpu:{i}" for i in range(min(ctx.workers, logical))]
            kind = f"logical GPU ({logical} on one)"
            names = [f"logical GPU {i} of GPU 0" for i in range(len(devices))]  # a memory limit, no growth
        elif gpus:
            names = gpu.place(0, ctx.workers)  # min(workers, GPUs) GPUs, with memory growth
            devices = [f"/gpu:{i}" for i in range(min(ctx.workers, len(gpus)))]
            kind = "GPU"
        else:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * ctx.workers)
            devices = [f"/cpu:{i}" for i in range(ctx.workers)]
            kind, names = "logical CPU", ["CPU"]
        if ctx.scenario is not None and ctx.scenario.worker is not None and ctx.scenario.worker >= len(devices):
            raise StrategyUnavailable(f"the straggler scenario slows worker {ctx.scenario.worker}, but mirrored runs "
                                      f"{len(devices)} replicas here (one per GPU): lower scenario's worker index")
        strategy = tf.distribute.MirroredStrategy(devices, cross_device_ops=cross_device_ops(tf, kind))
        out = train_with_strategy(strategy, ctx.workload, ctx.scenario)
        out.extra.update(threads, devices=devices, device_kind=kind, device_names=names,
                         cross_device_ops=type(strategy.extended._cross_device_ops).__name__)
        return out
