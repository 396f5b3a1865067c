"""The evaluator's test loss and accuracy for logits, probabilities and one binary unit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from distbench.harness.evaluate import loss_and_accuracy
from distbench.models.output import BINARY, SPARSE, LossSpec

Y = np.array([0, 0], np.int32)


def test_sparse_logits_hand_computed():
    out = np.array([[math.log(3), 0.0], [0.0, math.log(3)]])  # softmax: (3/4, 1/4), (1/4, 3/4)
    loss, acc = loss_and_accuracy(out, Y, LossSpec(SPARSE, from_logits=True))
    assert loss == pytest.approx((math.log(4 / 3) + math.log(4)) / 2, abs=1e-15) and acc == 0.5


def test_sparse_probabilities_hand_computed():
    out = np.array([[0.75, 0.25], [0.25, 0.75]])  # the same distributions as the logits above
    loss, acc = loss_and_accuracy(out, Y, LossSpec(SPARSE, from_logits=False))
    assert loss == pytest.approx((math.log(4 / 3) + math.log(4)) / 2, abs=1e-15) and acc == 0.5
    # a zero probability is clipped to epsilon, as Keras does: -log(1e-7)
    loss, acc = loss_and_accuracy(np.array([[1.0, 0.0]]), np.array([1]), LossSpec(SPARSE, False), epsilon=1e-7)
    assert loss == pytest.approx(-math.log(1e-7 / (1 - 1e-7 + 1e-7)), rel=1e-12) and acc == 0.0


def test_binary_logit_hand_computed():
    out = np.array([[0.0], [math.log(3)], [-2.0]])  # p = 1/2, 3/4, sigmoid(-2)
    y = np.array([1, 0, 0])
    loss, acc = loss_and_accuracy(out, y, LossSpec(BINARY, from_logits=True))
    expected = (math.log(2) + math.log(4) + math.log(1 + math.exp(-2))) / 3
    assert loss == pytest.approx(expected, abs=1e-15)
    assert acc == pytest.approx(1 / 3)  # z = 0 is class 0 (threshold: z > 0), 3/4 is class 1, -2 is class 0


def test_binary_probability_hand_computed():
    out = np.array([[0.5], [0.75], [1 / (1 + math.exp(2))]])
    y = np.array([1, 0, 0])
    loss, acc = loss_and_accuracy(out, y, LossSpec(BINARY, from_logits=False))
    assert loss == pytest.approx((math.log(2) + math.log(4) + math.log(1 + math.exp(-2))) / 3, abs=1e-12)
    assert acc == pytest.approx(1 / 3)  # p = 0.5 is class 0 (threshold: p > 0.5)


@pytest.mark.parametrize("spec", [LossSpec(SPARSE, True), LossSpec(SPARSE, False),
                                  LossSpec(BINARY, True), LossSpec(BINARY, False)])
def test_evaluator_matches_the_training_loss(spec):
    """The NumPy evaluation and the Keras loss every process trains with agree."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(50, 1 if spec.loss == BINARY else 4))
    y = rng.integers(0, 2 if spec.loss == BINARY else 4, size=50).astype(np.int32)
    if not spec.from_logits:
        z = 1 / (1 + np.exp(-z)) if spec.loss == BINARY else np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    keras_loss = float(spec.make(reduction="sum_over_batch_size")(y, z.astype(np.float32)))
    per_sample = np.asarray(spec.make(reduction=None)(y, z.astype(np.float32)))
    loss, _ = loss_and_accuracy(z, y, spec)
    assert per_sample.shape == (50,)
    assert keras_loss == pytest.approx(loss, rel=1e-5) and per_sample.mean() == pytest.approx(loss, rel=1e-5)
