"""Statistics against hand-computed values."""

from __future__ import annotations

import math

import pytest

from distbench.results.records import new_record
from distbench.results.stats import (Spread, area_under_curve, fastest_to_target, median_curve, most_accurate,
                                     mlperf_time_to_target, summarize, temporal_efficiency)


def curve(*points):
    """Curve points from (elapsed_s, accuracy) pairs, epochs 1, 2, ..."""
    return [{"elapsed_s": t, "epoch": i + 1, "step": i + 1, "test_accuracy": a, "test_loss": 1 - a}
            for i, (t, a) in enumerate(points)]


def test_spread_median_range_mean_and_horovod_interval():
    s = Spread.of([1.0, 2.0, None, 3.0, 4.0])
    assert (s.median, s.min, s.max, s.n) == (2.5, 1.0, 4.0, 4)
    assert s.mean == 2.5
    # population sd (numpy.std, ddof=0): sqrt(((1.5^2 + 0.5^2) * 2) / 4) = sqrt(1.25)
    assert s.sd == pytest.approx(math.sqrt(1.25))
    assert s.ci95 == pytest.approx(1.96 * 1.1180339887)  # 2.1913466...
    one = Spread.of([7.0])
    assert (one.median, one.mean, one.sd, one.ci95) == (7.0, 7.0, 0.0, None)  # one run has no spread
    none = Spread.of([None])
    assert (none.median, none.n, none.ci95) == (None, 0, None)


@pytest.mark.parametrize("times, value, reached, kept", [
    ([5.0, 1.0, 3.0], 3.0, 3, 3),                     # < 5 runs: plain mean
    ([4.0, 5.0, None], None, 2, 3),                   # < 5 runs, one never reached: "not reached"
    ([1.0, 2.0, 3.0, 4.0, None], 3.0, 4, 3),          # 5 runs: drop 1 and the non-reaching run; mean(2, 3, 4)
    ([2.0, 4.0, 6.0, 8.0, 10.0, 12.0], 7.0, 6, 4),    # drop 2 and 12: mean(4, 6, 8, 10)
    ([None, 1.0, None, 2.0, 3.0], None, 3, 3),        # two non-reaching runs: one stays in the average
    ([], None, 0, 0),
])
def test_mlperf_time_to_target(times, value, reached, kept):
    t = mlperf_time_to_target(times)
    assert (t.value, t.runs, t.reached, t.kept) == (value, len(times), reached, kept)
    assert t.not_reached == (bool(times) and value is None)


def test_area_under_curve_trapezoids_from_zero():
    c = curve((1.0, 0.5), (3.0, 0.9))
    # (0,0)-(1,0.5): 0.25; (1,0.5)-(3,0.9): 1.4
    assert area_under_curve(c, 3.0) == pytest.approx(1.65)
    # up to 2 s: 0.25 + (0.5 + 0.7) / 2 * 1 = 0.85 (0.7 interpolated at t = 2)
    assert area_under_curve(c, 2.0) == pytest.approx(0.85)
    # after the last point the final accuracy holds: 1.65 + 0.9 * 2
    assert area_under_curve(c, 5.0) == pytest.approx(3.45)
    # inside the first segment: accuracy 0.25 at 0.5 s, area 0.25 / 2 * 0.5
    assert area_under_curve(c, 0.5) == pytest.approx(0.0625)
    assert area_under_curve([], 3.0) == 0.0


def test_temporal_efficiency_over_the_shorter_run():
    a = curve((1.0, 0.5), (3.0, 0.9))  # lasts 3 s
    b = curve((2.0, 0.6), (4.0, 0.8))  # lasts 4 s
    # T = 3: area(a) = 1.65; area(b) = 0.6 * 2 / 2 + (0.6 + 0.7) / 2 * 1 = 1.25
    assert temporal_efficiency(a, b) == pytest.approx(1.65 / 1.25)  # 1.32
    assert temporal_efficiency(b, a) == pytest.approx(1.25 / 1.65)
    assert temporal_efficiency(a, a) == pytest.approx(1.0)
    assert temporal_efficiency(a, []) is None and temporal_efficiency([], a) is None


def test_median_curve_aligns_repeats_by_epoch():
    ts, med, lo, hi = median_curve([curve((1.0, 0.5), (2.0, 0.7)), curve((3.0, 0.6), (4.0, 0.9)),
                                    curve((2.0, 0.4), (6.0, 0.8))])
    assert ts == [2.0, 4.0]  # median times of epoch 1 (1, 3, 2) and epoch 2 (2, 4, 6)
    assert med == pytest.approx([0.5, 0.8]) and lo == pytest.approx([0.4, 0.7]) and hi == pytest.approx([0.6, 0.9])
    assert median_curve([]) == ([], [], [], [])


def _ok(strategy, workers, repeat, acc, train_s, ttt=None, host="h1", epochs=2, crv=()):
    return new_record("r", strategy, workers, repeat, "ok", final_test_accuracy=acc, time_to_target_s=ttt,
                      timings={"train_s": train_s}, samples_per_s=1000.0 / train_s, epochs=epochs,
                      curve=curve(*crv), provenance={"hostname": host, "cpu_model": "cpu", "cpu_count": 2, "gpus": []})


def test_speedup_and_efficiency_only_against_single_on_the_same_hardware():
    recs = [_ok("single", 1, 0, 0.9, 10.0), _ok("mirrored", 2, 0, 0.9, 4.0),
            _ok("single", 1, 0, 0.9, 30.0, host="h2"), _ok("mirrored", 2, 0, 0.9, 10.0, host="h2"),
            _ok("mirrored", 4, 0, 0.9, 5.0, host="h3")]  # h3 has no single baseline
    s = summarize(recs)
    assert [(x.config_id, x.hardware) for x in s] == [("single_w1", "A"), ("mirrored_w2", "A"), ("single_w1", "B"),
                                                      ("mirrored_w2", "B"), ("mirrored_w4", "C")]
    assert s[1].speedup == pytest.approx(2.5) and s[1].scaling_efficiency == pytest.approx(1.25)
    assert s[3].speedup == pytest.approx(3.0) and s[3].scaling_efficiency == pytest.approx(1.5)
    assert s[4].speedup is None and s[4].scaling_efficiency is None and s[4].temporal_efficiency is None
    assert s[0].speedup == 1.0 and s[0].scaling_efficiency == 1.0 and s[0].temporal_efficiency == 1.0


def test_different_workloads_are_kept_apart():
    recs = [_ok("single", 1, 0, 0.9, 10.0, epochs=2), _ok("single", 1, 0, 0.95, 20.0, epochs=4),
            _ok("mirrored", 2, 0, 0.9, 8.0, epochs=4)]
    s = summarize(recs)
    assert [(x.config_id, x.workload) for x in s] == [("single_w1", "1"), ("single_w1", "2"), ("mirrored_w2", "2")]
    assert s[2].speedup == pytest.approx(20.0 / 8.0)  # against the 4-epoch single, not the 2-epoch one


def test_temporal_efficiency_in_summary_is_the_median_over_repeat_pairs():
    single = [_ok("single", 1, i, 0.9, 4.0, crv=c) for i, c in enumerate(
        [[(2.0, 0.6), (4.0, 0.8)], [(2.0, 0.4), (4.0, 0.8)], [(2.0, 0.8), (4.0, 0.8)]])]
    other = _ok("mirrored", 2, 0, 0.9, 3.0, crv=[(1.0, 0.5), (3.0, 0.9)])
    s = {x.config_id: x for x in summarize(single + [other])}
    # T = 3 in every pair; area(mirrored) = 1.65; single areas over [0, 3]:
    # 0.6 + (0.6+0.7)/2 = 1.25, 0.4 + (0.4+0.6)/2 = 0.9, 0.8 + 0.8 = 1.6 -> ratios 1.32, 1.833, 1.031
    assert s["mirrored_w2"].temporal_efficiency == pytest.approx(1.65 / 1.25)


def test_leaders_with_margins_and_overlap():
    recs = [_ok("single", 1, 0, 0.90, 10.0, ttt=6.0), _ok("single", 1, 1, 0.92, 12.0, ttt=8.0),
            _ok("mirrored", 2, 0, 0.95, 5.0, ttt=3.0), _ok("mirrored", 2, 1, 0.96, 6.0, ttt=4.0),
            _ok("tpu", 2, 0, 0.93, 5.0, ttt=None)]
    s = summarize(recs)
    fast = fastest_to_target(s)
    assert fast.summary.config_id == "mirrored_w2" and fast.value == 3.5
    assert fast.runner_up.config_id == "single_w1" and fast.runner_up_value == 7.0 and not fast.overlaps
    acc = most_accurate(s)
    assert acc.summary.config_id == "mirrored_w2" and acc.value == pytest.approx(0.955)
    assert acc.runner_up.config_id == "tpu_w2" and not acc.overlaps
    assert fastest_to_target(summarize([_ok("single", 1, 0, 0.5, 1.0)])) is None
    close = summarize([_ok("a", 1, 0, 0.90, 1.0), _ok("a", 1, 1, 0.94, 1.0), _ok("b", 1, 0, 0.91, 1.0)])
    assert most_accurate(close).overlaps  # 0.92 [0.90-0.94] vs 0.91: within the spread


def test_a_strategy_s_own_learning_rate_rule_stays_in_the_same_workload():
    """Linear scaling (lr x replicas) and EAMSGD's local rate are a strategy's rule on the
    same workload: the configured rate (workload.learning_rate) decides the workload; a
    different configured rate is another workload; old records fall back to learning_rate."""
    from distbench.results.stats import describe_workload, workload_key

    def rec(lr, configured=None, **kw):
        w = {"dataset": "digits", "model": "mlp"} | ({"learning_rate": configured} if configured is not None else {})
        return {"workload": w, "epochs": 10, "global_batch_size": 64, "optimizer": "sgd", "learning_rate": lr,
                "lr_scaling": "linear", **kw}

    single, mirrored, eamsgd = rec(0.3, 0.3), rec(0.6, 0.3), rec(0.1, 0.3)
    assert workload_key(single) == workload_key(mirrored) == workload_key(eamsgd)
    assert workload_key(rec(0.5, 0.5)) != workload_key(single)
    assert workload_key(rec(0.3)) == workload_key(single) and workload_key(rec(0.6)) != workload_key(single)
    assert "sgd lr 0.3" in describe_workload(mirrored)


def test_compare_s_saved_model_is_one_workload_wherever_the_run_directory_moved():
    # user test (helper-37): a moved compare() run's resume split into workloads 1 and 2 by the model's path
    from distbench.results.stats import workload_key

    def rec(model):
        return {"workload": {"dataset": "npz", "model": model, "num_parameters": 10}, "epochs": 3}

    assert workload_key(rec("path:/tmp/a/inputs/model.keras")) == workload_key(rec("path:/x/y/inputs/model.keras"))
    assert workload_key(rec("path:/tmp/a/model.keras")) != workload_key(rec("path:/tmp/b/model.keras"))
    assert workload_key(rec("path:/a/inputs/model.keras (reinit)")) != workload_key(rec("path:/a/inputs/model.keras"))
