"""End to end: the user's factory model (with Dropout) under a synchronous, a mirrored and
a Spark parameter-server strategy, from the same initial weights."""

from __future__ import annotations

import os

import pytest

from distbench.results.store import read_records
from tests.conftest import ROOT, distbench, requires

pytestmark = [pytest.mark.integration, requires(executable="java", module="pyspark")]
ENV = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def test_factory_model_under_single_mirrored_and_spark_ps(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[model]\nfactory = "tests.plugins.models:with_dropout"\n')
    out = tmp_path / "run"
    cp = distbench("run", str(cfg), "--strategies", "single,mirrored,spark_ps:adag", "--workers", "2",
                   "--epochs", "2", "--out", str(out), env=ENV, timeout=900)
    assert cp.returncode == 0, cp.stderr[-3000:]
    recs = {r["strategy"]: r for r in read_records(out)}
    assert set(recs) == {"single", "mirrored", "spark_ps:adag"}
    for name, r in recs.items():
        assert r["status"] == "ok", (name, r.get("reason"), r.get("log_tail", "")[-2000:])
        assert r["workload"]["model"] == "factory:tests.plugins.models:with_dropout"
        assert r["workload"]["model_output"] == "logits" and r["workload"]["num_parameters"] == 64 * 32 + 32 + 330
        assert len(r["curve"]) >= 2 and 0 < r["final_test_loss"] < 2.2  # below ln 10: it learned
    assert len({r["initial_weights_sha256"] for r in recs.values()}) == 1
    assert recs["single"]["final_test_accuracy"] > 0.7 and recs["mirrored"]["final_test_accuracy"] > 0.7
