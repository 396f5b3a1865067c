"""Evaluation after training, in one process, on the held-out test set.

Every configuration's final weights and snapshots are evaluated here with the same
model, the same test set and the same arithmetic, so accuracy numbers are comparable
and evaluation never perturbs a training clock (docs/architecture.md, the fairness contract).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from distbench.results.records import time_to_target
from distbench.tfquiet import import_tensorflow_off_gpus
from distbench.training import TrainOutput
from distbench.workload import Workload


def hide_accelerators() -> None:
    """Import TensorFlow quietly and keep this process off GPUs (children train there)."""
    import_tensorflow_off_gpus()


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
