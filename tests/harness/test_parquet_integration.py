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


SPARK_WRITER = """
import sys
import pandas as pd
from pyspark.sql import SparkSession
from sklearn.datasets import load_breast_cancer
d = load_breast_cancer()
x = (d.data - d.data.mean(0)) / d.data.std(0)
df = pd.DataFrame(x, columns=[f"f{i}" for i in range(x.shape[1])]).assign(label=d.target.astype("int64"))
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
spark.createDataFrame(df).repartition(3).write.partitionBy("label").parquet(sys.argv[1])
spark.stop()
"""


def write_wisconsin(writer: str, path) -> None:
    """The standardised Wisconsin table (30 columns f0..f29, an int label) as ``writer`` writes it."""
    import subprocess
    import sys

    if writer == "pyspark":
        cp = subprocess.run([sys.executable, "-c", SPARK_WRITER, str(path)], capture_output=True, text=True,
                            timeout=300)
        assert cp.returncode == 0, cp.stderr[-2000:]
        assert (path / "_SUCCESS").exists() and (path / "label=0").is_dir()
        return
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
    from sklearn.datasets import load_breast_cancer

    d = load_breast_cancer()
    x = (d.data - d.data.mean(0)) / d.data.std(0)
    df = pd.DataFrame(x, columns=[f"f{i}" for i in range(x.shape[1])]).assign(label=d.target.astype("int64"))
    if writer == "pandas":
        df.to_parquet(path)  # pandas' defaults: one row group
    else:
        pq.write_table(pa.Table.from_pandas(df), path)  # pyarrow's defaults: one row group
    assert pq.ParquetFile(path).num_row_groups == 1


def test_wisconsin_table_as_pyarrow_writes_it_is_the_data_pandas_writes(tmp_path):
    """pyarrow's write_table with its defaults gives the dataset pandas' to_parquet gives (one
    row group, the same rows): the sweep below trains the pandas file (a third sweep of the
    same data took 87-106 s of the suite)."""
    from distbench import config
    from distbench.data import fingerprint, load_dataset

    def dataset(writer):
        path = tmp_path / f"{writer}.parquet"
        write_wisconsin(writer, path)
        cfg = config.from_dict({"data": {"name": "parquet", "path": str(path), "label_col": "label",
                                         "features_col": [f"f{i}" for i in range(30)]}})
        return load_dataset(cfg.data, cfg.training.seed)

    a, b = dataset("pandas"), dataset("pyarrow")
    assert fingerprint(a) == fingerprint(b) and a.content_sha256() == b.content_sha256() and a.sizes() == b.sizes()


@pytest.mark.integration
@pytest.mark.parametrize("writer", ["pyspark", "pandas"])
def test_wisconsin_table_as_spark_and_pandas_write_it(tmp_path, writer):
    """Issue 33: the breast-cancer table written by pyspark's df.write.partitionBy("label").parquet
    (part files, _SUCCESS, .crc, label=K folders; each file one class) and by pandas' to_parquet
    with its defaults (one row group; pyarrow's write_table gives the same data, above) trains
    under single and horovod (2 ranks sharing its row groups), with a stratified held-out split
    of rows recorded. spark_ps's tasks read Parquet with the same reader as horovod's ranks
    (the digits sweep above runs it); its Spark start took 40-60 s of each of these two."""
    data = tmp_path / ("bc" if writer == "pyspark" else "bc.parquet")
    write_wisconsin(writer, data)
    cols = ", ".join(f'"f{i}"' for i in range(30))
    cfg = tmp_path / "bc.toml"
    cfg.write_text(f'[data]\nname = "parquet"\npath = "{data}"\nfeatures_col = [{cols}]\nlabel_col = "label"\n'
                   '[training]\nepochs = 8\nglobal_batch_size = 32\nlearning_rate = 0.05\ntarget_accuracy = 0.9\n')
    out = tmp_path / "run"
    cp = distbench("run", str(cfg), "--strategies", "single,horovod", "--workers", "2", "--out", str(out),
                   timeout=900)
    assert cp.returncode == 0, cp.stderr[-3000:]
    recs = read_records(out)
    assert sorted(r["strategy"] for r in recs) == ["horovod", "single"]
    for r in recs:
        assert r["status"] == "ok", (r["strategy"], r["reason"])
        assert r["final_test_accuracy"] >= 0.9, (r["strategy"], r["final_test_accuracy"])
        split = r["workload"]["test_split"]
        assert split["rows_per_class"] == {"0": 42, "1": 71} and split["rows"] == 113
