"""The loop core: trace before the clock, snapshots, epoch hooks (also from the environment), threads."""

from __future__ import annotations

import time

import numpy as np
import pytest

from distbench.training.loop import EPOCH_HOOKS_ENV, TrainLoop, hooks_from_env, threads_per_process

SEEN: list = []


def record_hook(end):  # loaded through DISTBENCH_EPOCH_HOOKS by the test below
    SEEN.append(end)


def test_trace_is_outside_the_clock_and_snapshots_follow_each_epoch():
    w = [np.zeros(3, np.float32)]
    ends = []
    loop = TrainLoop(3, lambda: w, replica=1, hooks=[ends.append])
    loop.trace(lambda: time.sleep(0.3))

    def run_epoch(e):
        w[0] = w[0] + 1
        return 10 * (e + 1), 0.5 / (e + 1)

    finished = []
    res = loop.run(run_epoch, finish=lambda: (time.sleep(0.05), finished.append(True)))
    assert res.trace_s >= 0.3 and res.train_s < 0.3  # tracing is not training time
    assert res.train_s >= 0.05 and finished  # the finish step is
    assert [s.epoch for s in res.snapshots] == [1, 2, 3] and [s.step for s in res.snapshots] == [10, 20, 30]
    assert [float(s.weights[0][0]) for s in res.snapshots] == [1.0, 2.0, 3.0]  # copies, not views
    assert [(e.epoch, e.steps, e.replica, e.epochs) for e in ends] == [(1, 10, 1, 3), (2, 20, 1, 3), (3, 30, 1, 3)]
    assert res.steps == 30 and res.loss == pytest.approx(0.5 / 3) and res.end_unix >= res.start_unix


def test_no_snapshots_without_get_weights():
    res = TrainLoop(2).run(lambda e: (e + 1, None))
    assert res.snapshots == [] and res.steps == 2 and res.loss is None


def test_hooks_from_the_environment(monkeypatch):
    SEEN.clear()
    monkeypatch.setenv(EPOCH_HOOKS_ENV, f"{__name__}:record_hook")
    TrainLoop(2).run(lambda e: (e + 1, None))
    assert [e.epoch for e in SEEN] == [1, 2]
    monkeypatch.setenv(EPOCH_HOOKS_ENV, "no.such.module:fn")
    with pytest.raises(ValueError, match="DISTBENCH_EPOCH_HOOKS names 'no.such.module:fn'"):
        hooks_from_env()


def test_threads_per_process(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert threads_per_process(0, 3) == 2 and threads_per_process(0, 16) == 1 and threads_per_process(5, 3) == 5
