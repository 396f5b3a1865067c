"""``mirrored``: synchronous data parallelism on one machine with
``tf.distribute.MirroredStrategy`` (all-reduce of gradients each step).

With GPUs it uses ``min(workers, GPUs)`` GPUs; without, it splits the CPU into
``workers`` logical devices (``tf.config.set_logical_device_configuration``), as
TensorFlow's own tests do, so one replica runs per logical CPU device and the
cross-device all-reduce is real. The record lists the devices used.
"""

from __future__ import annotations

from distbench.strategies.base import LaunchContext, Strategy, StrategyUnavailable
from distbench.strategies.registry import register
from distbench.training import TrainOutput


@register
class Mirrored(Strategy):
    """MirroredStrategy over GPUs, or over N logical CPU devices where there is no GPU."""

    name = "mirrored"
    description = "tf.distribute.MirroredStrategy (GPUs, or N logical CPU devices without GPUs)"
    family = "tf.distribute"
    needs = ("TensorFlow only, but one machine: its GPUs are the replicas, or logical CPU devices where it has "
             "none (no multi-host training)")
    uses_network = False

    def launch(self, ctx: LaunchContext) -> TrainOutput:
        """Set up the devices, train with the shared loop in this process."""
        from distbench.training.loop import configure_threads
        from distbench.training.tf_loop import train_with_strategy

        # One process; its intra-op pool is shared by all replicas.
        threads = configure_threads(ctx.threads_per_process(1))
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            devices = [f"/gpu:{i}" for i in range(min(ctx.workers, len(gpus)))]
            kind = "GPU"
        else:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * ctx.workers)
            devices = [f"/cpu:{i}" for i in range(ctx.workers)]
            kind = "logical CPU"
        if ctx.scenario is not None and ctx.scenario.worker is not None and ctx.scenario.worker >= len(devices):
            raise StrategyUnavailable(f"the straggler scenario slows worker {ctx.scenario.worker}, but mirrored runs "
                                      f"{len(devices)} replicas here (one per GPU): lower scenario's worker index")
        strategy = tf.distribute.MirroredStrategy(devices)
        out = train_with_strategy(strategy, ctx.workload, ctx.scenario)
        out.extra.update(threads, devices=devices, device_kind=kind,
                         cross_device_ops=type(strategy.extended._cross_device_ops).__name__)
        return out
