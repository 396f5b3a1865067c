"""Report rendering from hand-written records."""

from __future__ import annotations

import csv

from distbench.results.records import new_record
from distbench.results.report import render_markdown, write_report
from distbench.results.stats import summarize


def _ok(strategy, workers, repeat, acc, train_s, sps, ttt):
    return new_record("run", strategy, workers, repeat, "ok", final_test_accuracy=acc, target_accuracy=0.9,
                      timings={"total_s": train_s + 5, "startup_s": 4, "train_s": train_s, "eval_s": 1},
                      samples_per_s=sps, time_to_target_s=ttt)


RECORDS = [
    _ok("single", 1, 0, 0.95, 10.0, 1000, 4.0),
    _ok("single", 1, 1, 0.93, 12.0, 900, 5.0),
    _ok("single", 1, 2, 0.94, 14.0, 800, None),
    _ok("mirrored", 2, 0, 0.92, 5.5, 2000, 3.0),
    new_record("run", "mirrored", 2, 1, "failed", reason="worker 1 failed with exit code 3"),
    new_record("run", "tpu", 2, 0, "unavailable", reason="no TPU found: TPUClusterResolver: no name"),
]


def test_summary_numbers():
    s = {x.config_id: x for x in summarize(RECORDS)}
    single, mirrored = s["single_w1"], s["mirrored_w2"]
    assert single.accuracy.median == 0.94 and single.accuracy.min == 0.93 and single.accuracy.max == 0.95
    assert single.train_s.median == 12.0 and single.time_to_target_s.median == 4.5
    assert single.reached_target == 2 and single.speedup == 1.0
    assert single.ttt.value is None and single.ttt.not_reached  # MLPerf: a non-reaching run stays in the mean
    assert mirrored.ok == 1 and mirrored.repeats == 2
    assert abs(mirrored.speedup - 12.0 / 5.5) < 1e-12 and abs(mirrored.scaling_efficiency - 6.0 / 5.5) < 1e-12
    assert s["tpu_w2"].ok == 0 and s["tpu_w2"].speedup is None


def test_markdown_and_csv(tmp_path):
    md = render_markdown(RECORDS)
    assert ("| single | 1 | ok | 0.940 [0.930-0.950] | 12.00 [10.00-14.00] | 4.0 | 17.0 [15.0-19.0] | 900 [800-1000] | "
            "not reached (2/3 reached) | 1.00x | 1.00 | 1.00 |") in md
    assert "| mirrored | 2 | 1/2 ok | 0.920 | 5.50 | 4.0 | 10.5 | 2000 | 3.00 | 2.18x | 1.09 | - |" in md
    assert "kept out of speed-up and time to target" in md  # why start-up is not in any speed-up
    assert "`tpu_w2` (unavailable): no TPU found" in md
    assert "`mirrored_w2` (failed, ok): worker 1 failed with exit code 3" in md
    paths = write_report(RECORDS, tmp_path)
    assert [p.name for p in paths[:4]] == ["report.md", "summary.csv", "summary.json", "report.html"]
    rows = list(csv.DictReader(open(paths[1])))
    assert [r["config_id"] for r in rows] == ["single_w1", "mirrored_w2", "tpu_w2"]
    assert float(rows[0]["acc_median"]) == 0.94 and rows[2]["status"] == "unavailable"
    assert float(rows[0]["startup_s_median"]) == 4.0 and float(rows[0]["total_s_max"]) == 19.0
    assert rows[2]["reasons"].startswith("no TPU found")


def _ps(workers, acc, st_median, st_max, loss=0.5):
    return new_record("run", "mpi_ps:downpour", workers, 0, "ok", final_test_accuracy=acc, final_test_loss=loss,
                      target_accuracy=0.9, timings={"total_s": 9, "startup_s": 4, "train_s": 2.0, "eval_s": 1},
                      samples_per_s=1000, time_to_target_s=1.0 if acc >= 0.9 else None,
                      workload={"dataset": "digits", "num_classes": 10},
                      curve=[{"elapsed_s": 2.0, "epoch": 1, "step": 9, "test_loss": loss, "test_accuracy": acc}],
                      details={"staleness": {"median": st_median, "max": st_max}})


def test_collapse_is_flagged_in_table_and_headline():
    # The case: DOWNPOUR over MPI with 4 workers collapsed while 2 workers did well.
    recs = [_ok("single", 1, 0, 0.95, 10.0, 1000, 4.0), _ps(2, 0.969, 0, 1), _ps(4, 0.267, 3, 5),
            _ps(8, 0.11, 6, 9, loss=None)]
    s = {x.workers: x for x in summarize(recs) if x.strategy == "mpi_ps:downpour"}
    assert s[2].flags == [] and s[4].flags == ["below target", "collapsed"]
    assert s[8].flags == ["diverged", "below target", "collapsed"]  # NaN loss (stored as null) and chance level
    assert (s[4].staleness_median, s[4].staleness_max) == (3, 5)
    md = render_markdown(recs)
    assert "| mpi_ps:downpour | 4 | ok, collapsed | 0.267 |" in md and md.count("| 3/5 |") == 1
    assert "| single | 1 | ok | 0.950 | 10.00 | 4.0 | 15.0 | 1000 | 4.00 | 1.00x | 1.00 | 1.00 | - |" in md
    assert ("Caution: mpi_ps:downpour (4 workers) collapsed, median test accuracy 0.267 (target 0.9), commit "
            "staleness median 3, max 5, while mpi_ps:downpour (2 workers) reached 0.969") in md
    assert "Caution: mpi_ps:downpour (8 workers) diverged" in md


def test_no_staleness_column_without_parameter_servers():
    md = render_markdown(RECORDS)
    assert "staleness" not in md and "Caution" not in md
