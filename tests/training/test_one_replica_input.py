"""One replica in sync reads the plain input pipeline, and trains exactly what the
distributed input pipeline of a one-replica MirroredStrategy trains.

A distributed dataset's iterator costs per step what a one-replica run does not need (it
doubled ``single``'s epoch time on the digits MLP against a Horovod rank, which reads the
plain pipeline; benchmarks/profile_step.py), so ``train_with_strategy`` builds it only for
two or more replicas. The plain pipeline must give the same batches in the same order.
"""

from __future__ import annotations

import numpy as np

from distbench import config
from distbench import workload as W
from distbench.training.tf_loop import train_with_strategy


def _workload(tmp_path):
    cfg = config.override(config.load(None), training__epochs=2)
    return W.Workload.create(cfg, tmp_path)


def test_one_replica_builds_no_distributed_dataset_and_trains_as_the_distributed_pipeline(tmp_path, monkeypatch):
    import tensorflow as tf

    wl = _workload(tmp_path)
    # Reference: the distributed pipeline, forced through a strategy that builds it for one replica.
    reference = tf.distribute.OneDeviceStrategy("/cpu:0")
    built = []
    real = tf.distribute.OneDeviceStrategy.distribute_datasets_from_function

    def spy(self, *a, **kw):
        built.append(self)
        return real(self, *a, **kw)

    monkeypatch.setattr(tf.distribute.OneDeviceStrategy, "distribute_datasets_from_function", spy)
    plain = train_with_strategy(tf.distribute.OneDeviceStrategy("/cpu:0"), wl)
    assert built == [], "one replica in sync must read the plain tf.data pipeline"

    from distbench.training import tf_loop

    monkeypatch.setattr(tf_loop, "ONE_REPLICA_PLAIN_INPUT", False)
    distributed = train_with_strategy(reference, wl)
    assert built == [reference]
    assert plain.steps == distributed.steps and plain.samples == distributed.samples
    for a, b in zip(plain.final_weights, distributed.final_weights):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
