"""The Spark standalone cluster of an emulated ``spark_ps`` configuration waits for what
its own processes write, not for what a killed run left in the same logs."""

from __future__ import annotations

import pytest

from distbench.cluster import spark_standalone
from distbench.cluster.spark_standalone import StandaloneCluster, StandaloneError
from distbench.launch.process import ProcSpec


def test_a_resumed_configuration_does_not_take_the_killed_runs_log_for_a_ready_master(tmp_path, monkeypatch):
    # user test: after a SIGKILL, --resume found "elected leader" in the old spark-master.log,
    # connected before its own master was up and failed "Spark master ... is unreachable"
    log = tmp_path / "spark-master.log"
    log.write_text("... INFO Master: I have been elected leader! New state: ALIVE\n")
    spec = ProcSpec("spark master", ["true"], {}, log)
    cluster = StandaloneCluster(None, tmp_path)
    cluster._offsets = {log: log.stat().st_size}
    monkeypatch.setattr(spark_standalone, "READY_S", 0.3)
    with pytest.raises(StandaloneError, match="was not ready after 0.3 s"):
        cluster._wait(spec, "I have been elected leader")
    with open(log, "a") as f:
        f.write("... INFO Master: I have been elected leader! New state: ALIVE\n")
    cluster._wait(spec, "I have been elected leader")  # what this start wrote
