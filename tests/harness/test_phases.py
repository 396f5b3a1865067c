"""Where a configuration's wall time goes: the phases computed from the child's timestamps,
and the sweep's one-line breakdown."""

from __future__ import annotations

import numpy as np
import pytest

from distbench.harness.assembly import phases, time_breakdown
from distbench.harness.child import PHASE_MARKS
from distbench.training import TrainOutput


def _out(marks):
    extra = {"trace_s": 0.5, **({PHASE_MARKS: marks} if marks else {})}
    return TrainOutput([np.zeros(1, np.float32)], [], train_s=2.0, first_step_unix=1006.0, steps=1, samples=1,
                       replicas=1, extra=extra)


def test_phases_add_up_to_the_wall_time_and_leave_the_record_clean():
    out = _out({"child_start_unix": 1001.0, "workload_unix": 1001.5, "launch_end_unix": 1008.5})
    p = phases(out, spawn_unix=1000.0, total_s=9.0, eval_s=0.25)
    assert p == {"process_start_s": 1.0, "workload_s": 0.5, "engine_start_s": 4.0, "trace_s": 0.5, "train_s": 2.0,
                 "off_clock_s": 0.5, "exit_s": 0.5, "eval_s": 0.25}
    assert sum(p.values()) == pytest.approx(9.0 + 0.25)
    assert PHASE_MARKS not in out.extra  # the marks never reach the record's details


def test_without_marks_the_phases_it_cannot_tell_apart_are_merged_not_guessed():
    # a record a user's own launcher wrote (horovodrun, mpirun, TF_CONFIG, spark-submit): no
    # child timestamps; before, it had no phases at all, which the README promises
    p = phases(_out(None), 1000.0, 9.0, 0.1)
    assert p == {"engine_start_s": 5.5, "trace_s": 0.5, "train_s": 2.0, "off_clock_s": 1.0, "eval_s": 0.1}
    assert sum(p.values()) == pytest.approx(9.0 + 0.1)


def test_the_sweep_line_sums_phases_and_names_the_rest():
    recs = [{"timings": {"train_s": 2.0, "eval_s": 1.0, "phases": {"train_s": 2.0, "engine_start_s": 5.0,
                                                                  "eval_s": 1.0}}},
            {"timings": {"train_s": 1.0, "eval_s": None}},  # an ok record a user's launcher wrote, no phases
            {"status": "timeout", "timings": {"total_s": 3.0}}]  # helper-40: it read as between configurations
    line = time_breakdown(recs, 20.0, setup_s=6.0, report_s=1.0)
    assert line.startswith("sweep: 3 configuration(s) in 20.0 s: training 3.0 s (15%), framework and engine start-up "
                           "5.0 s (25%)")
    assert "evaluation 1.0 s (5%), configurations that failed or timed out 3.0 s (15%)" in line
    assert line.endswith("sweep set-up (workload, initial weights) 6.0 s (30%), report 1.0 s (5%), "
                         "other 1.0 s (5%: between configurations)")


def test_a_sweep_with_nothing_to_run_says_so():
    assert time_breakdown([], 4.1) == "sweep: nothing to run (every configuration was already recorded); 4.1 s"


def test_a_sweep_whose_configurations_all_failed_has_a_well_formed_line():
    # the user test: "sweep: 2 configuration(s) in 0.6 s: , other 0.6 s (100%: between configurations)"
    recs = [{"timings": {"train_s": None, "eval_s": None}}] * 2
    assert time_breakdown(recs, 0.6) == "sweep: 2 configuration(s) in 0.6 s: other 0.6 s (100%: between configurations)"
    assert time_breakdown(recs, 0.01) == "sweep: 2 configuration(s) in 0.0 s"
