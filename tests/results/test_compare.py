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
