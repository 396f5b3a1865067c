"""The non-trainable-state rule: every strategy's evaluated BatchNormalization statistics come
from the training data (not the initial zeros and ones), and the synchronous strategies end
with one set of statistics on every replica (their weight-hash check passes)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from distbench.results.store import read_records
from tests.conftest import ROOT, distbench

STRATEGIES = ["single", "mirrored", "multi_worker_mirrored", "horovod", "tf_ps", "mpi_ps:easgd"]
"""Every training path once: spark_ps runs the same replica loop and export as mpi_ps (only the
transport differs), so it is left to the Spark tests to keep a Spark start out of this one."""


@pytest.mark.integration
def test_every_strategy_evaluates_statistics_of_the_training_data(tmp_path):
    cfg = tmp_path / "bn.toml"
    cfg.write_text('[model]\nfactory = "tests.plugins.models:with_batchnorm"\n[training]\nepochs = 2\n')
    out = tmp_path / "run"
    cp = distbench("run", str(cfg), "--strategies", ",".join(STRATEGIES), "--workers", "2", "--out", str(out),
                   cwd=ROOT, timeout=1200)
    assert cp.returncode == 0, cp.stderr[-3000:]
    meta = json.loads((out / "workload" / "workload.json").read_text())
    (mean_i, var_i) = meta["non_trainable"]  # one BatchNormalization layer: moving mean, moving variance
    recs = {r["strategy"]: r for r in read_records(out)}
    assert set(recs) == set(STRATEGIES)
    for name, r in recs.items():
        assert r["status"] == "ok", (name, r["reason"])  # synchronous ones: every replica ended with one hash
        with np.load(out / "artifacts" / f"{r['config_id']}_r0" / "final_weights.npz") as z:
            mean, var = z[f"w{mean_i}"], z[f"w{var_i}"]
        assert np.abs(mean).max() > 0.01 and np.abs(var - 1).max() > 0.01, (name, mean[:4], var[:4])
        assert r["final_test_accuracy"] > 0.5, (name, r["final_test_accuracy"])
