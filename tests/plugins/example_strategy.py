"""An example strategy in one file: Keras' own ``model.fit`` on one device.

Load it with ``DISTBENCH_PLUGINS=tests.plugins.example_strategy`` (or add the module to
``_MODULES`` in ``distbench/strategies/registry.py``) and run
``distbench run --strategies single,example_keras_fit``. docs/development.md
shows this file; ``tests/strategies/test_registry.py`` checks both agree and that it runs.
"""

from __future__ import annotations

import numpy as np

from distbench.strategies.base import LaunchContext, Strategy
from distbench.strategies.registry import register
from distbench.training import TrainOutput
from distbench.training.loop import TrainLoop, configure_threads
from distbench.training.schedule import epoch_order


@register
class KerasFit(Strategy):
    """One replica trained by ``model.fit``, one call per epoch, on the shared sample order."""

    name = "example_keras_fit"
    description = "example plugin: Keras model.fit on one device"

    def replicas(self, workers: int) -> int:
        """One replica whatever the worker count."""
        return 1

    def launch(self, ctx: LaunchContext) -> TrainOutput:
        """Train in this process: the loop core times it and takes the snapshots."""
        import keras

        threads = configure_threads(ctx.threads_per_process(1))
        wl, t = ctx.workload, ctx.config.training
        x, y = wl.dataset.x_train, wl.dataset.y_train
        model = wl.build_model()  # the workload's architecture and initial weights
        model.compile(optimizer=wl.make_optimizer(1),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        steps = len(y) // t.global_batch_size
        loop = TrainLoop(t.epochs, model.get_weights)

        def run_epoch(epoch: int) -> tuple[int, float]:
            order = epoch_order(len(y), t.global_batch_size, epoch, t.seed)  # every strategy's order
            hist = model.fit(x[order], y[order], batch_size=t.global_batch_size, epochs=1, shuffle=False, verbose=0)
            return (epoch + 1) * steps, float(hist.history["loss"][-1])

        res = loop.run(run_epoch)
        return TrainOutput([np.asarray(w, np.float32) for w in model.get_weights()], res.snapshots, res.train_s,
                           res.first_step_unix, res.steps, res.steps * t.global_batch_size, 1,
                           {**threads, "last_train_loss": res.loss})
