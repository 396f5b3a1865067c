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
    assert ("| single | 1 | ok | 0.940 [0.930-0.950] | 12.00 [10.00-14.00] | 900 [800-1000] | "
            "not reached (2/3 reached) | 1.00x | 1.00 | 1.00 |") in md
    assert "| mirrored | 2 | 1/2 ok | 0.920 | 5.50 | 2000 | 3.00 | 2.18x | 1.09 | - |" in md
    assert "`tpu_w2` (unavailable): no TPU found" in md
    assert "`mirrored_w2` (failed, ok): worker 1 failed with exit code 3" in md
    paths = write_report(RECORDS, tmp_path)
    assert [p.name for p in paths[:4]] == ["report.md", "summary.csv", "summary.json", "report.html"]
    rows = list(csv.DictReader(open(paths[1])))
    assert [r["config_id"] for r in rows] == ["single_w1", "mirrored_w2", "tpu_w2"]
    assert float(rows[0]["acc_median"]) == 0.94 and rows[2]["status"] == "unavailable"
    assert rows[2]["reasons"].startswith("no TPU found")
