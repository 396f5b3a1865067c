"""End to end: ``distbench run`` trains on your own arrays (``npz``) and on breast_cancer with today's loops."""

from __future__ import annotations

import json

import numpy as np
import pytest

from distbench.results.store import read_records
from tests.conftest import distbench

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("name", ["npz", "breast_cancer"])
def test_run_single_on_own_data(tmp_path, name):
    cfg = tmp_path / "c.toml"
    if name == "npz":  # digits as sequences: 8 steps of 8 values each, float labels with whole values
        from sklearn.datasets import load_digits

        d = load_digits()
        np.savez(tmp_path / "seq.npz", x=(d.data / 16).reshape(-1, 8, 8), y=d.target.astype(np.float64))
        cfg.write_text(f'[data]\nname = "npz"\npath = "{tmp_path / "seq.npz"}"\n')
    else:
        cfg.write_text('[data]\nname = "breast_cancer"\n')
    out = tmp_path / "run"
    cp = distbench("run", str(cfg), "--strategies", "single", "--workers", "1", "--epochs", "2", "--out", str(out))
    assert cp.returncode == 0, cp.stderr[-3000:]
    (rec,) = read_records(out)
    assert rec["status"] == "ok", rec["reason"]
    assert rec["final_test_accuracy"] >= 0.85, rec["final_test_accuracy"]
    meta = json.loads((out / "workload" / "workload.json").read_text())
    assert meta["data"]["shuffle"] == "rows" and rec["workload"]["shuffle"] == "rows"
    assert meta["input_shape"] == ([8, 8] if name == "npz" else [30])
    assert meta["num_classes"] == (10 if name == "npz" else 2)
