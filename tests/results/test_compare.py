"""``distbench report --compare``: the workload note names what changed and comes first; the
configurations only one run has are listed on one line per run."""

from __future__ import annotations

import io

from rich.console import Console

from distbench.results.compare import print_comparison, workload_changes
from tests.results.test_advice import rec


def test_workload_changes_name_each_setting():
    base = [rec("single", 1, 0, 0.5), rec("horovod", 2, 0, 0.4)]
    new = [{**r, "epochs": 3, "global_batch_size": 128} for r in base]
    assert workload_changes(base, new) == ["epochs: 2 -> 3", "global batch: 64 -> 128"]
    assert workload_changes(base, base) == []


def test_compare_prints_the_workload_note_first_and_one_line_per_unmatched_run(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    base = [rec("single", 1, 0, 0.5), rec("horovod", 2, 0, 0.4), rec("mirrored", 2, 0, 0.45),
            rec("spark_ps:adag", 2, 0, 0.9), rec("spark_ps:easgd", 2, 0, 0.8)]
    new = [{**r, "epochs": 3} for r in base[:2]] + [{**rec("mpi_ps:adag", 2, 0, 0.7), "epochs": 3}]
    buf = io.StringIO()
    print_comparison(base, new, "runs/a", "runs/b", Console(file=buf, width=120, color_system=None))
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("note: BASE and NEW trained different workloads (epochs: 2 -> 3)")
    assert "only in BASE (runs/a): mirrored (2 workers), spark_ps:adag (2 workers), spark_ps:easgd (2 workers)" \
        in lines
    assert "only in NEW (runs/b): mpi_ps:adag (2 workers)" in lines
    table = [ln for ln in lines if ln.startswith(("single", "horovod", "mirrored", "spark_ps", "mpi_ps"))]
    assert [ln.split()[0] for ln in table] == ["single", "horovod"]  # no per-configuration "only in" rows


def test_configurations_that_differ_only_in_their_links_are_compared_and_said(monkeypatch):
    # user test (helper-16): a one-host run against an emulated one compared single only, without a word
    monkeypatch.delenv("COLUMNS", raising=False)
    base = [rec("single", 1, 0, 0.5), rec("horovod", 2, 0, 0.4), rec("horovod", 2, 1, 0.42)]
    new = [rec("single", 1, 0, 0.5), rec("horovod", 2, 0, 0.8, bandwidth="1gbit"),
           rec("horovod", 2, 1, 0.82, bandwidth="1gbit"), rec("tf_ps", 2, 0, 0.9, bandwidth="1gbit"),
           rec("mpi_ps:adag", 2, 0, 0.7, bandwidth="1gbit"), rec("mpi_ps:adag", 2, 0, 0.7, bandwidth="100mbit")]
    buf = io.StringIO()
    print_comparison(base, new, "runs/a", "runs/b", Console(file=buf, width=200, color_system=None))
    lines = buf.getvalue().splitlines()
    assert lines[0] == ("note: 1 configuration(s) differ only in their links (BASE unshaped, NEW 1gbit): they are "
                        "compared by strategy and workers, so their time change is the network's as well as the code's.")
    assert [ln.split()[0] for ln in lines if ln.startswith(("single", "horovod"))] == ["single", "horovod"]
    # two rates of one configuration in NEW: no match to guess
    assert any(ln.startswith("only in NEW (runs/b): tf_ps") and "mpi_ps:adag (2 workers, 100mbit links)" in ln
               for ln in lines)


def test_another_target_accuracy_and_other_repeat_counts_are_said():
    from distbench.results.compare import compare

    base = [rec("single", 1, 0, 0.5), rec("horovod", 2, 0, 0.4)]
    new = [{**r, "target_accuracy": 0.95} for r in base] + [{**rec("horovod", 2, 1, 0.41), "target_accuracy": 0.95}]
    _, notes = compare(base, new)
    assert ("BASE and NEW were scored against different target accuracies (BASE 0.9, NEW 0.95): their times to "
            "target measure different things") in notes[0]
    assert notes[1].startswith("1 configuration(s) ran a different number of times (runs, BASE -> NEW: horovod "
                               "(2 workers) 1 -> 2)")
    assert compare(base, base)[1] == []
