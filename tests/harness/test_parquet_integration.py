"""Parquet data through every strategy that can read it, block by block: digits written as
Parquet in small row groups (so every epoch crosses many blocks)."""

from __future__ import annotations

import numpy as np
import pytest

from distbench.results.store import read_records
from tests.conftest import distbench

STRATEGIES = ["single", "multi_worker_mirrored", "horovod", "tf_ps", "spark_ps:adag", "mpi_ps:adag"]
"""Every input path once: `mirrored` reads Parquet as `single` does (one process) and splits
global batches as `multi_worker_mirrored` does, so it is left out to keep this sweep short."""


def write_digits_parquet(path, rows_per_group: int = 100) -> None:
    """scikit-learn's digits as Parquet: a 64-float list column and an int label, small row groups."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    table = pa.table({"pixels": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), 64),
                      "digit": pa.array(d.target.astype(np.int64))})
    pq.write_table(table, path, row_group_size=rows_per_group)


@pytest.mark.integration
def test_parquet_trains_under_every_strategy_that_streams(tmp_path):
    data = tmp_path / "digits.parquet"
    write_digits_parquet(data)
    cfg = tmp_path / "pq.toml"
    cfg.write_text(f'[data]\nname = "parquet"\npath = "{data}"\nfeatures_col = "pixels"\nlabel_col = "digit"\n'
                   'feature_shape = [8, 8, 1]\n[training]\nepochs = 3\n')
    out = tmp_path / "run"
    cp = distbench("run", str(cfg), "--strategies", ",".join(STRATEGIES), "--workers", "2", "--out", str(out),
                   timeout=1200)
    assert cp.returncode == 0, cp.stderr[-3000:]
    recs = {r["strategy"]: r for r in read_records(out)}
    assert recs["tf_ps"]["status"] == "unavailable" and "Parquet" in recs["tf_ps"]["reason"]
    for name in [s for s in STRATEGIES if s != "tf_ps"]:
        r = recs[name]
        assert r["status"] == "ok", (name, r["reason"], r.get("log_tail", "")[-1500:])
        assert r["workload"]["shuffle"] == "row_groups"
        assert r["final_test_accuracy"] > 0.6, (name, r["final_test_accuracy"])
    sync = [recs[n] for n in ("single", "multi_worker_mirrored", "horovod")]
    # the same samples in the same order, block by block, whatever the replica count
    assert len({r["final_test_accuracy"] for r in sync}) == 1, [r["final_test_accuracy"] for r in sync]
    assert len({r["steps"] for r in sync}) == 1
