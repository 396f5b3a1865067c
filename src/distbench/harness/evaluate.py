"""Evaluation after training, in one process, on the held-out test set.

Every configuration's final weights and snapshots are evaluated here with the same
model, the same test set and the same arithmetic, so accuracy numbers are comparable
and evaluation never perturbs a training clock (docs/architecture.md, the fairness contract).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from distbench.models.output import BINARY, LossSpec
from distbench.results.records import time_to_target
from distbench.tfquiet import import_tensorflow_off_gpus
from distbench.training import TrainOutput
from distbench.workload import Workload


def hide_accelerators() -> None:
    """Import TensorFlow quietly and keep this process off GPUs (children train there)."""
    import_tensorflow_off_gpus()


def loss_and_accuracy(outputs: np.ndarray, y: np.ndarray, loss: LossSpec,
                      epsilon: float = 1e-7) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of a model's outputs, in float64, as Keras' losses
    define them.

    Args:
        outputs: float64 ``(n, C)`` scores (sparse categorical) or ``(n, 1)`` (binary).
        y: int class indices ``(n,)``.
        loss: which cross-entropy, and whether ``outputs`` are logits or probabilities.
        epsilon: probabilities are clipped to ``[epsilon, 1 - epsilon]`` (Keras' fuzz factor).

    Returns:
        ``(loss, accuracy)``: sparse categorical: ``-log softmax(z)[y]`` on logits,
        ``-log(p[y] / sum p)`` on clipped probabilities, accuracy of the argmax; binary:
        ``max(z, 0) - z y + log(1 + exp(-|z|))`` on the logit ``z``, ``-(y log p + (1 - y)
        log(1 - p))`` on the clipped probability ``p``, accuracy of ``z > 0`` / ``p > 0.5``.
    """
    n = len(y)
    if loss.loss == BINARY:
        s = outputs[:, 0]
        t = y.astype(np.float64)
        if loss.from_logits:
            per = np.maximum(s, 0) - s * t + np.log1p(np.exp(-np.abs(s)))
            pred = s > 0
        else:
            p = np.clip(s, epsilon, 1 - epsilon)
            per = -(t * np.log(p) + (1 - t) * np.log(1 - p))
            pred = s > 0.5
        return float(per.mean()), float((pred == (y == 1)).mean())
    if loss.from_logits:
        m = outputs.max(axis=1, keepdims=True)
        logp = outputs - m - np.log(np.exp(outputs - m).sum(axis=1, keepdims=True))
    else:
        p = np.clip(outputs, epsilon, 1 - epsilon)
        logp = np.log(p) - np.log(p.sum(axis=1, keepdims=True))
    return float(-logp[np.arange(n), y].mean()), float((outputs.argmax(axis=1) == y).mean())


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
        import keras

        self.epsilon = float(keras.config.epsilon())  # Keras clips probabilities by it in its losses

    def evaluate(self, weights: list[np.ndarray]) -> tuple[float, float]:
        """Return ``(mean cross-entropy loss, accuracy)`` of ``weights`` on the test set.

        Raises:
            ValueError: the weights do not match the model's shapes.
        """
        test = self.workload.dataset.test
        self.model.set_weights(weights)
        total_loss = total_correct = 0.0
        for x, y in test.iter_blocks():  # in-memory data: one block; Parquet: one row group at a time
            outputs = np.concatenate([np.asarray(self.model(x[i:i + self.batch_size], training=False))
                                      for i in range(0, len(y), self.batch_size)]).astype(np.float64)
            loss, acc = loss_and_accuracy(outputs, y, self.workload.loss_spec(), self.epsilon)
            if len(y) == len(test):
                return loss, acc
            total_loss, total_correct = total_loss + loss * len(y), total_correct + acc * len(y)
        return total_loss / len(test), total_correct / len(test)

    def score(self, out: TrainOutput, target: float) -> dict[str, Any]:
        """Evaluate the snapshots and the final weights of ``out``.

        Returns:
            Record fields: ``curve`` (one point per snapshot: ``elapsed_s``, ``epoch``,
            ``step``, ``test_loss``, ``test_accuracy``, and ``data_epochs`` where the
            snapshot has it), ``final_test_loss``,
            ``final_test_accuracy``, ``time_to_target_s``, ``eval_s``.
        """
        t0 = time.perf_counter()
        curve = []
        for s in out.snapshots:
            loss, acc = self.evaluate(s.weights)
            curve.append({"elapsed_s": s.elapsed_s, "epoch": s.epoch, "step": s.step,
                          "test_loss": loss, "test_accuracy": acc,
                          **({"data_epochs": s.data_epochs} if s.data_epochs is not None else {})})
        loss, acc = self.evaluate(out.final_weights)
        return {
            "curve": curve,
            "final_test_loss": loss,
            "final_test_accuracy": acc,
            "time_to_target_s": time_to_target(curve, target),
            "eval_s": time.perf_counter() - t0,
        }
