"""Every kind of classifier head trains in the tf.distribute loop and is evaluated right:
class logits, class probabilities, and one sigmoid or logit unit on a 2-class problem
(the digits split into even and odd)."""

from __future__ import annotations

import pytest

from distbench import config
from distbench import workload as W
from distbench.data import Dataset
from distbench.harness.evaluate import Evaluator
from distbench.models.output import BINARY, SPARSE, LossSpec
from distbench.training.tf_loop import train_with_strategy


@pytest.mark.parametrize("factory, binary, expected", [
    ("with_dropout", False, LossSpec(SPARSE, True)),
    ("softmax_head", False, LossSpec(SPARSE, False)),
    ("sigmoid_unit", True, LossSpec(BINARY, False)),
    ("logit_unit", True, LossSpec(BINARY, True)),
])
def test_head_trains_and_evaluates(tmp_path, monkeypatch, factory, binary, expected):
    import tensorflow as tf

    if binary:
        real = W.load_dataset

        def even_odd(data_cfg, seed):
            ds = real(data_cfg, seed)
            return Dataset.from_arrays(ds.name, ds.x_train, ds.y_train % 2, ds.x_val, ds.y_val % 2, ds.x_test,
                                       ds.y_test % 2, 2)

        monkeypatch.setattr(W, "load_dataset", even_odd)
    cfg = config.override(config.load(None), model__factory=f"tests.plugins.models:{factory}", training__epochs=4)
    wl = W.Workload.create(cfg, tmp_path)
    assert wl.loss == expected
    ev = Evaluator(wl)
    before_loss, _ = ev.evaluate(wl.initial_weights)
    out = train_with_strategy(tf.distribute.OneDeviceStrategy("/cpu:0"), wl)
    loss, acc = ev.evaluate(out.final_weights)
    assert acc > (0.85 if binary else 0.8) and loss < 0.6 * before_loss, (loss, acc, before_loss)
    # the last training step's loss is a cross-entropy of the same scale as the test loss
    assert 0 < out.extra["last_train_loss"] < 2 * before_loss
