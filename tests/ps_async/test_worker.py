"""The parameter-server replica loop (:func:`distbench.ps_async.worker.train_replica`)
against a step-by-step reference: the steps between two exchanges run in one traced graph
over a ``tf.data`` pipeline, and must train exactly what a Python loop over
:func:`~distbench.training.schedule.shard_batches` with ADAG's rule would (same batches, same
order, same windows, the last partial window committed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from distbench import config as config_mod
from distbench.ps_async.client import Ack
from distbench.ps_async.rules import adag_delta
from distbench.ps_async.worker import params_from_config, replica_spec, train_replica
from distbench.workload import Workload


class CentreClient:
    """An in-process stand-in for :class:`~distbench.ps_async.client.PSClient`: the centre
    folds each ADAG commit (``C += delta``) and records every commit's window."""

    def __init__(self, address, secret, worker_id, template, timeout_s=0.0):
        self.centre = [np.array(t, np.float32, copy=True) for t in template]
        self.clock = 0
        self.commits: list[list[np.ndarray]] = []

    def pull(self):
        return [c.copy() for c in self.centre], self.clock

    def commit_and_pull(self, delta, seq, pull_clock):
        self.commits.append([np.array(d, copy=True) for d in delta])
        for c, d in zip(self.centre, delta):
            c += d
        self.clock += 1
        return [c.copy() for c in self.centre], self.clock, Ack(seq, self.clock, self.clock - 1 - pull_clock, False)

    def done(self):
        pass

    def close(self):
        pass


@pytest.mark.parametrize("window", [5, 7])
def test_replica_trains_exactly_the_step_by_step_schedule(tmp_path, window):
    import keras
    import tensorflow as tf

    from distbench.models import build_model
    from distbench.training.schedule import shard_batches
    from distbench.workload import make_optimizer

    cfg = config_mod.from_dict({"data": {"name": "digits"}, "model": {"name": "mlp", "hidden": [16]},
                                "training": {"epochs": 2, "global_batch_size": 64, "optimizer": "sgd"}})
    wl = Workload.create(cfg, tmp_path)
    params = params_from_config(cfg, "adag", window)
    spec = replica_spec(wl, 2, "adag", params, "inproc", b"s" * 32, 0, 10.0)  # 0: threads as set
    clients: list[CentreClient] = []

    def factory(*a, **kw):
        clients.append(CentreClient(*a, **kw))
        return clients[-1]

    res = train_replica(spec, 1, wl.dataset.train, client_factory=factory)
    total = spec.steps_per_epoch * 2
    assert res["steps"] == total and res["exchanges"] == math.ceil(total / window)

    # the reference: one Python call per step over shard_batches, ADAG's rule every window
    keras.utils.set_random_seed(cfg.training.seed + 1)
    model = build_model(cfg.model, wl.dataset.input_shape, wl.dataset.num_classes)
    opt = make_optimizer(cfg.training, 1)
    opt.build(model.trainable_variables)
    loss_obj = wl.loss_spec().make(reduction="sum_over_batch_size")

    @tf.function(autograph=False)
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_obj(y, model(x, training=True))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

    centre = [w.copy() for w in wl.initial_weights]
    model.set_weights(centre)
    commits, since = [], 0
    for x, y in shard_batches(wl.dataset.train, 2, cfg.training.seed, spec.per_replica_batch, 1, 2,
                              spec.steps_per_epoch):
        step(x, y)
        since += 1
        if since == window:
            commits.append(adag_delta(model.get_weights(), centre, since))
            centre = [c + d for c, d in zip(centre, commits[-1])]
            model.set_weights(centre)
            since = 0
    if since:
        commits.append(adag_delta(model.get_weights(), centre, since))
        centre = [c + d for c, d in zip(centre, commits[-1])]
    (client,) = clients
    assert len(client.commits) == len(commits)
    for got, want in zip(client.commits, commits):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)
    for g, w in zip(client.centre, centre):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_a_replica_whose_weights_become_non_finite_stops_and_sends_nothing_non_finite(tmp_path):
    # the user test: a diverging mpi_ps/spark_ps row was `failed` (the server refused a NaN
    # commit, the engine died) where the synchronous rows said `ok, diverged`
    cfg = config_mod.from_dict({"data": {"name": "digits"}, "model": {"name": "mlp", "hidden": [16]},
                                "training": {"epochs": 3, "global_batch_size": 64, "optimizer": "sgd",
                                             "learning_rate": 1e30}})
    wl = Workload.create(cfg, tmp_path)
    spec = replica_spec(wl, 2, "adag", params_from_config(cfg, "adag", 2), "inproc", b"s" * 32, 0, 10.0)
    clients: list[CentreClient] = []

    def factory(*a, **kw):
        clients.append(CentreClient(*a, **kw))
        return clients[-1]

    res = train_replica(spec, 0, wl.dataset.train, client_factory=factory)
    assert "weights became non-finite (NaN or inf) after" in res["diverged"]
    assert res["steps"] < spec.steps_per_epoch * 3  # stopped early, with the clock stopped there
    assert res["end_unix"] >= res["start_unix"]
    (client,) = clients
    assert all(np.isfinite(d).all() for c in client.commits for d in c)  # nothing non-finite was committed


def test_a_diverged_run_keeps_only_the_epochs_the_centre_reached():
    # a replica stopped the run after epoch 2 (clock 4 of 8 updates): the monitor's end-of-run
    # snapshots for epochs 3 and 4 were never trained; the first is kept as where training stopped
    from types import SimpleNamespace

    from distbench.ps_async.monitor import centre_output

    spec = SimpleNamespace(params={"communication_window": 5}, optimizer="downpour", num_workers=2,
                           training=SimpleNamespace(epochs=4), threads=1, per_replica_batch=8, steps_per_epoch=5,
                           exchanges=lambda: 4)  # 8 updates in all: 2 per epoch
    w = [np.zeros(2, np.float32)]
    snaps = [(10.0, 1, 2, w), (11.0, 2, 4, w), (12.0, 3, 5, w), (12.0, 4, 5, w)]
    results = [{"worker": 0, "steps": 12, "exchanges": 3, "start_unix": 9.0, "end_unix": 12.0,
                "diverged": "replica 0's weights became non-finite (NaN or inf) after 12 local steps"},
               {"worker": 1, "steps": 20, "exchanges": 2, "start_unix": 9.0, "end_unix": 12.0}]
    out = centre_output(spec, results, snaps, {}, w, {})
    assert [s.epoch for s in out.snapshots] == [1, 2, 3] and out.extra["diverged"].startswith("replica 0's")
    ok = [{k: v for k, v in r.items() if k != "diverged"} for r in results]
    assert [s.epoch for s in centre_output(spec, ok, snaps, {}, w, {}).snapshots] == [1, 2, 3, 4]


def test_a_centre_knows_how_many_passes_over_the_data_it_holds():
    # helper-39: with a window longer than an epoch the centre taken for epoch 1 is the first update's, which holds
    # 2.46 epochs of each replica's data (EASGD's window 32 against 13 steps); the curve read it as epoch 1
    from types import SimpleNamespace

    from distbench.ps_async.monitor import data_epochs

    def spec(optimizer, window, workers=2):
        return SimpleNamespace(params={"communication_window": window}, optimizer=optimizer, num_workers=workers,
                               steps_per_epoch=13, training=SimpleNamespace(epochs=4))

    assert [data_epochs(spec("easgd", 32), c) for c in (1, 2)] == [2.4615, 4.0]  # barrier rounds; the last: 20 steps
    assert [data_epochs(spec("adag", 32), c) for c in (1, 2, 4)] == [1.2308, 2.4615, 4.0]  # async: commits / N
    assert data_epochs(spec("adag", 13), 2) == 1.0 and data_epochs(spec("easgd", None), 3) == 3.0
