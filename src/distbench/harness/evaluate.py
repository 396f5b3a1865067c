"""Evaluation after training, in one process, on the held-out test set.

Every configuration's final weights and snapshots are evaluated here with the same
model, the same test set and the same arithmetic, so accuracy numbers are comparable
and evaluation never perturbs a training clock (DESIGN.md, fairness contract).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from distbench.results.records import time_to_target
from distbench.training import TrainOutput
from distbench.workload import Workload


@contextlib.contextmanager
def _native_stderr_to_devnull() -> Iterator[None]:
    """Silence C++ writes to fd 2 (TensorFlow's pre-absl start-up notices, which no
    environment variable suppresses); Python exceptions still propagate normally."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def hide_accelerators() -> None:
    """Import TensorFlow quietly and keep this process off GPUs (children train there)."""
    with _native_stderr_to_devnull():
        import tensorflow as tf

        try:
            tf.config.set_visible_devices([], "GPU")
            tf.constant(0)  # initialise the runtime while its notices are silenced
        except RuntimeError:  # already initialised: devices fixed, nothing to change
            pass


class Evaluator:
    """Evaluates weight sets on the workload's test split.

    Args:
        workload: the run's workload.
        batch_size: evaluation batch size (samples); does not affect the results.
    """

    def __init__(self, workload: Workload, batch_size: int = 1024) -> None:
        hide_accelerators()
        self.workload = workload
        self.model = workload.build_model()
        self.batch_size = batch_size

    def evaluate(self, weights: list[np.ndarray]) -> tuple[float, float]:
        """Return ``(mean cross-entropy loss, accuracy)`` of ``weights`` on the test set.

        Raises:
            ValueError: the weights do not match the model's shapes.
        """
        ds = self.workload.dataset
        self.model.set_weights(weights)
        logits = np.concatenate([
            np.asarray(self.model(ds.x_test[i:i + self.batch_size], training=False))
            for i in range(0, len(ds.y_test), self.batch_size)
        ]).astype(np.float64)
        m = logits.max(axis=1, keepdims=True)
        logp = logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))
        loss = float(-logp[np.arange(len(ds.y_test)), ds.y_test].mean())
        acc = float((logits.argmax(axis=1) == ds.y_test).mean())
        return loss, acc

    def score(self, out: TrainOutput, target: float) -> dict[str, Any]:
        """Evaluate the snapshots and the final weights of ``out``.

        Returns:
            Record fields: ``curve`` (one point per snapshot: ``elapsed_s``, ``epoch``,
            ``step``, ``test_loss``, ``test_accuracy``), ``final_test_loss``,
            ``final_test_accuracy``, ``time_to_target_s``, ``eval_s``.
        """
        t0 = time.perf_counter()
        curve = []
        for s in out.snapshots:
            loss, acc = self.evaluate(s.weights)
            curve.append({"elapsed_s": s.elapsed_s, "epoch": s.epoch, "step": s.step,
                          "test_loss": loss, "test_accuracy": acc})
        loss, acc = self.evaluate(out.final_weights)
        return {
            "curve": curve,
            "final_test_loss": loss,
            "final_test_accuracy": acc,
            "time_to_target_s": time_to_target(curve, target),
            "eval_s": time.perf_counter() - t0,
        }
