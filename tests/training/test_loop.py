"""The loop core: trace before the clock, snapshots, epoch hooks (also from the environment), threads."""

from __future__ import annotations

import time

import numpy as np
import pytest

from distbench.config.scenario import Scenario
from distbench.training.loop import EPOCH_HOOKS_ENV, StepDelay, TrainLoop, hooks_from_env, threads_per_process

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


def test_step_delay_per_replica_under_a_scenario():
    sc = Scenario(1, 3.0, 0.0, 5)
    slow, fast = StepDelay.for_replica(sc, 1), StepDelay.for_replica(sc, 0)
    assert (slow.slowdown, fast.slowdown) == (3.0, 1.0) and slow.active and fast.active  # same graph everywhere
    assert slow.delay_for(0.01) == pytest.approx(0.02) and fast.delay_for(0.01) == 0.0
    assert not StepDelay.for_replica(None, 1).active
    loop = TrainLoop(1, scenario=sc, replica=1, label=None)
    assert loop.step_delay() is loop.step_delay() and loop.step_delay(0).slowdown == 1.0


def test_jitter_gives_the_configured_coefficient_of_variation():
    d = StepDelay(2.0, jitter_cv=0.3, seed=(7, 1))
    steps = np.array([0.01 + d.delay_for(0.01) for _ in range(20000)])  # step time = compute + delay
    assert steps.min() >= 0.02 - 1e-12  # the slowdown is a floor; jitter only adds
    assert steps.std() / steps.mean() == pytest.approx(0.3, rel=0.05)
    again = StepDelay(2.0, jitter_cv=0.3, seed=(7, 1))
    assert again.delay_for(0.01) == StepDelay(2.0, jitter_cv=0.3, seed=(7, 1)).delay_for(0.01)  # seeded


def test_step_delay_in_a_step_function_sleeps_its_share_and_inactive_adds_no_op():
    import tensorflow as tf

    w = tf.Variable(tf.ones((256, 256)))
    x = tf.ones((256, 256))

    def make(delay):
        @tf.function(autograph=False)
        def step(x):
            x = delay.start(x)
            with delay.tape() as tape:
                y = tf.reduce_sum(tf.matmul(tf.matmul(x, w), w))
            (g,) = tape.gradient(y, [w])
            return g
        return step

    off = StepDelay()
    assert off.start(x) is x and off.finish([x])[0] is x and type(off.tape()) is tf.GradientTape
    on = StepDelay(4.0)
    step = make(on)
    step(x)
    before = on.summary()
    t0 = time.perf_counter()
    for _ in range(10):
        step(x)
    wall = time.perf_counter() - t0
    s = on.summary()
    assert s["steps"] == 11 and s["delay_s"] == pytest.approx(3 * s["compute_s"])
    slept, computed = s["delay_s"] - before["delay_s"], s["compute_s"] - before["compute_s"]
    assert slept > 0 and wall >= slept + computed  # the sleep is inside the step, after its compute
    ops = {op.type for op in make(off).get_concrete_function(x).graph.get_operations()}
    assert not ops & {"PyFunc", "EagerPyFunc", "Timestamp", "If", "StatelessIf"}
    timed = StepDelay(1.0, enabled=True)  # an unslowed replica under a scenario: same ops, no callback run
    graph = make(timed).get_concrete_function(x).graph
    assert {"Timestamp"} <= {op.type for op in graph.get_operations()}
    assert len(graph.get_operations()) == len(make(StepDelay(4.0)).get_concrete_function(x).graph.get_operations())
    make(timed)(x)
    assert timed.summary()["steps"] == 0
