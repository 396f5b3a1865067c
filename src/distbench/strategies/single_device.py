"""``single``: the single-device baseline every other number is compared with.

Trains under ``tf.distribute.OneDeviceStrategy`` on the first GPU if there is one, else
the CPU, with the shared custom loop (:mod:`distbench.training.tf_loop`), so its steps
are exactly those of the distributed strategies: one replica, the whole global batch.
"""

from __future__ import annotations

from distbench import gpu
from distbench.strategies.base import LaunchContext, Strategy
from distbench.strategies.registry import register
from distbench.training import TrainOutput


@register
class SingleDevice(Strategy):
    """One replica on one device (GPU 0 if present, else CPU)."""

    name = "single"
    description = "single-device baseline (OneDeviceStrategy: GPU 0 if present, else CPU)"
    needs = "TensorFlow only; one device, no cluster"
    uses_network = False

    def replicas(self, workers: int) -> int:
        """Always one replica, whatever ``workers`` is."""
        return 1

    def launch(self, ctx: LaunchContext) -> TrainOutput:
        """Train on one device in this process and return the output."""
        from distbench.training.loop import configure_threads
        from distbench.training.tf_loop import train_with_strategy

        threads = configure_threads(ctx.threads_per_process(1))
        names = gpu.place(0)  # GPU 0 alone, with memory growth; the CPU without GPUs
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        device = "/gpu:0" if gpus else "/cpu:0"
        out = train_with_strategy(tf.distribute.OneDeviceStrategy(device), ctx.workload, ctx.scenario)
        out.extra.update(threads, devices=[device], device_names=names)
        return out
