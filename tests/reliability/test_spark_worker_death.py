"""SIGKILL one Spark replica's Python process mid-run (local[2] with task retries):
the run completes or fails with a clear record, and every committed (worker, sequence)
delta reached the centre exactly once.

What the barrier stage does (Spark 4.3, documented in README "Guarantees"): the replicas
run in a barrier *ResultStage* (``rdd.barrier().mapPartitions(...).collect()``); when one of its
tasks dies, Spark kills the sibling tasks and aborts the job ("Could not recover from a
failed barrier ResultStage": only barrier shuffle-map stages are retried), whatever
``spark.task.maxFailures`` says. The record is ``failed`` with the reason, and it keeps the
server's accounting, which shows every applied (worker, sequence) commit counted once. If a
future Spark retried the stage, a re-run replica would commit with its attempt's own
sequence numbers (``attempt << 32``), so nothing would be applied twice either."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from distbench.results.store import read_records
from tests.conftest import requires

pytestmark = [pytest.mark.integration, requires(executable="java", module="pyspark")]


def test_killed_replica_is_retried_and_no_delta_counts_twice(tmp_path):
    cfg = tmp_path / "c.toml"
    # 200 epochs (about 6 s): at 40 the replicas could finish in the 0.3 s between the epoch-2 line and the kill,
    # which then hit an idle Python worker (fresh clone: ok with no attempt re-run)
    cfg.write_text('[spark]\nmaster = "local[2,4]"\n[training]\nepochs = 200\n')
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "distbench", "run", str(cfg), "--strategies", "spark_ps:adag",
                             "--workers", "2", "--timeout", "600", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    t0 = time.monotonic()
    pid = None
    while pid is None:
        assert proc.poll() is None and time.monotonic() - t0 < 240, "training never started"
        time.sleep(0.3)
        logs = "".join(p.read_text(errors="replace") for p in (out / "logs").glob("*.log"))  # the Spark engine's
        m = re.search(r"worker 1 \(pid (\d+), attempt 0\): epoch 2/", logs)
        pid = int(m.group(1)) if m else None
    os.kill(pid, signal.SIGKILL)  # the Python process running replica 1's Spark task
    proc.communicate(timeout=600)
    (rec,) = read_records(out)
    print(f"\nSpark replica killed: status {rec['status']}, reason {rec['reason']!r}, "
          f"details: { {k: (rec.get('details') or {}).get(k) for k in ('per_worker_attempts', 'commits', 'applied_commit_keys', 'duplicate_commits', 'per_worker_steps')} }")
    if rec["status"] == "ok":
        d = rec["details"]
        # each replica ran every step of its final attempt; commits from the killed attempt stay
        assert d["per_worker_steps"] == [4000, 4000]
        assert d["duplicate_commits"] == 0 and d["rejected"]["total"] == 0
        assert d["commits"] == d["staleness"]["count"]
        assert d["applied_commit_keys"] == d["commits"]  # distinct (worker, seq) == applied commits
        assert max(d["per_worker_attempts"]) >= 1  # the stage was re-run
        assert rec["final_test_accuracy"] >= 0.8
    else:  # Spark 4.3 here: a failed barrier ResultStage cannot be retried; the job fails
        assert rec["status"] == "failed" and "Python worker exited unexpectedly" in rec["reason"], rec
        d = rec["details"]
        assert d["commits"] > 0 and d["applied_commit_keys"] == d["commits"]  # each (worker, seq) once
        assert d["duplicate_commits"] == 0
