"""A straggler sweep in the report: the lines against the slowdown, the straggler column,
table and plot, the CSV fields, the HTML sections."""

from __future__ import annotations

import csv

from distbench.results.report import write_report
from distbench.results.stats import summarize
from distbench.results.stragglers import bound_sentences, injected_delay_s, straggler_lines, straggler_table
from distbench.config.scenario import Scenario
from tests.results.test_advice import rec


def _sweep():
    out = [rec("single", 1, 0, 0.8)]
    for s, d, tr, ttt in ((1.0, 0.0, 1.0, 0.8), (2.0, 0.5, 1.5, 1.3), (4.0, 1.5, 2.5, 2.3)):
        out.append(rec("horovod", 2, 0, ttt, train_s=tr, scenario=Scenario(1, s), delay=d))
    for s, d, tr, ttt in ((1.0, 0.0, 1.2, 1.0), (4.0, 1.5, 2.7, 1.1)):
        out.append(rec("mpi_ps:adag", 2, 0, ttt, train_s=tr, scenario=Scenario(1, s), delay=d))
    return out


def test_lines_follow_each_configuration_against_its_baseline():
    records = _sweep()
    assert injected_delay_s(records[3]) == 1.5 and injected_delay_s(records[0]) is None
    lines = straggler_lines(summarize(records))
    assert [(ln.label, ln.synchronous, [p.slowdown for p in ln.points]) for ln in lines] == [
        ("horovod (2 workers)", True, [1.0, 2.0, 4.0]), ("mpi_ps:adag (2 workers)", False, [1.0, 4.0])]
    top = lines[0].points[-1]
    assert top.train_growth_s == 1.5 and top.train_ratio == 1.0 and abs(top.ttt_ratio - 1.0) < 1e-9
    assert lines[1].points[-1].ttt_ratio is not None and abs(lines[1].points[-1].ttt_ratio - 0.1 / 1.5) < 1e-9
    assert all("one run each, so run-to-run noise is unknown" in t for t in bound_sentences(lines))
    rows = straggler_table(lines)
    assert rows[2] == ["horovod (2 workers)", "sync", "4x", "2.30", "+187%", "2.50", "+150%", "0.950", "1.50",
                       "1.00", "1.00"]


def test_report_outputs_show_the_sweep(tmp_path):
    paths = write_report(_sweep(), tmp_path)
    assert (tmp_path / "plots" / "straggler_sweep.png").stat().st_size > 10_000
    md = (tmp_path / "report.md").read_text()
    assert "| horovod | 2 | w1 4x | ok |" in md and "| single | 1 | - | ok |" in md
    assert "Fastest to 0.9 test accuracy (the ranking criterion, as in the recommendation): single (1 worker)" in md  # leaders are unslowed rows
    rows = {r["config_id"]: r for r in csv.DictReader(open(tmp_path / "summary.csv"))}
    assert rows["horovod_w2_slow4x"]["slowdown"] == "4.0" and rows["horovod_w2_slow4x"]["slow_worker"] == "1"
    assert rows["single_w1"]["slowdown"] == ""
    html = (tmp_path / "report.html").read_text()
    assert 'id="recommendation"' in html and 'id="stragglers-table"' in html and "<td>w1 4x</td>" in html
    assert paths
