"""Your own data: npz arrays, scikit-learn's breast-cancer table and Parquet files read block by block."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks.make_parquet import write_synthetic_parquet
from distbench.config import DataConfig
from distbench.data import DataError, fingerprint, load_dataset
from distbench.data.splits import ArraySplit


def _npz(path, **arrays):
    np.savez(path, **arrays)
    return DataConfig(name="npz", path=str(path))


def _parquet(path, columns: dict, row_group_size: int, **kw):
    pq.write_table(pa.table(columns), path, row_group_size=row_group_size, **kw)
    return path


def _pq_cfg(path, features="features", label="label", **kw) -> DataConfig:
    return DataConfig(name="parquet", path=str(path), features_col=features, label_col=label, **kw)


# ---------------------------------------------------------------------------------- npz
def test_npz_tabular_with_inferred_classes_and_stratified_splits(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 7)).astype(np.float64)
    y = np.arange(300) % 3
    ds = load_dataset(_npz(tmp_path / "d.npz", x=x, y=y), seed=5)
    assert ds.num_classes == 3 and ds.input_shape == (7,) and ds.in_memory
    assert ds.sizes() == {"train": 216, "val": 24, "test": 60}
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int32
    assert np.bincount(ds.y_test).tolist() == [20, 20, 20]  # stratified as digits
    # every sample lands in exactly one split, unchanged (float64 -> float32 only)
    together = np.concatenate([ds.x_train, ds.x_val, ds.x_test])
    assert sorted(map(tuple, together.tolist())) == sorted(map(tuple, x.astype(np.float32).tolist()))
    assert ds.details["shuffle"] == "rows" and ds.details["labels"] == "class indices"


def test_npz_sequences_one_hot_own_test_set_and_feature_shape(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (80, 12, 4), dtype=np.uint8)  # sequences of 12 steps x 4 channels
    y = np.eye(4, dtype=np.float32)[np.arange(80) % 4]
    xt = rng.integers(0, 256, (20, 12, 4), dtype=np.uint8)
    yt = np.eye(4, dtype=np.float32)[np.arange(20) % 4]
    cfg = _npz(tmp_path / "s.npz", x=x, y=y, x_test=xt, y_test=yt)
    ds = load_dataset(cfg, seed=0)
    assert ds.num_classes == 4 and ds.input_shape == (12, 4) and ds.sizes()["test"] == 20
    np.testing.assert_allclose(ds.x_test, xt / 255.0, rtol=1e-6)  # uint8 scaled by 1/255
    assert ds.y_test.tolist() == (np.arange(20) % 4).tolist() and ds.details["labels"] == "one-hot"
    cfg.feature_shape = [48]
    assert load_dataset(cfg, seed=0).input_shape == (48,)


def test_npz_integral_float_labels_and_given_classes(tmp_path):
    x = np.random.default_rng(2).random((60, 3))
    cfg = _npz(tmp_path / "f.npz", x=x, y=(np.arange(60) % 2).astype(np.float64))
    cfg.classes = 5  # more classes than the labels use: allowed
    ds = load_dataset(cfg, seed=0)
    assert ds.num_classes == 5 and set(ds.y_train.tolist()) == {0, 1}


# ---------------------------------------------------------------------- breast cancer
def test_breast_cancer_standardised_with_training_statistics():
    ds = load_dataset(DataConfig(name="breast_cancer"), seed=42)
    assert sum(ds.sizes().values()) == 569 and ds.num_classes == 2 and ds.input_shape == (30,)
    assert ds.sizes()["test"] == 114  # 20 %, stratified as digits
    np.testing.assert_allclose(ds.x_train.mean(axis=0), 0, atol=1e-4)
    np.testing.assert_allclose(ds.x_train.std(axis=0), 1, atol=1e-3)
    assert abs(ds.x_test.mean()) > 1e-4  # the test split is scaled with the training statistics, not its own
    std = ds.details["standardised"]
    assert len(std["mean"]) == 30 and len(std["std"]) == 30 and "training split" in std["by"]
    counts = np.bincount(ds.y_test)
    assert counts.tolist() == [42, 72]  # 212 malignant, 357 benign overall
    assert fingerprint(ds) == fingerprint(load_dataset(DataConfig(name="breast_cancer"), seed=42))


# -------------------------------------------------------------------------- parquet
def test_parquet_list_column_held_out_rows_stratified(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.random((1000, 6), dtype=np.float32)
    y = (np.arange(1000) % 3).astype(np.float64)  # Spark ML writes labels as doubles
    p = _parquet(tmp_path / "t.parquet", {"features": pa.array(list(x)), "label": y}, 100)
    ds = load_dataset(_pq_cfg(p, test_fraction=0.25), seed=7)
    assert not ds.in_memory and ds.num_classes == 3 and ds.input_shape == (6,)
    assert ds.sizes() == {"train": 750, "val": 0, "test": 250}  # rows, per class: round(0.25 x 334), ...
    how = ds.details["test_split"]
    assert how["rows_per_class"] == {"0": 84, "1": 83, "2": 83} and how["fraction"] == 0.25
    assert ds.train.num_blocks == 10 and ds.test.num_blocks == 10 and ds.details["shuffle"] == "row_groups"
    # blocks are the kept rows of each row group, in storage order; train and test are disjoint and complete
    seen = []
    for split in (ds.train, ds.test):
        for i in range(split.num_blocks):
            xb, yb = split.read_block(i)
            assert yb.dtype == np.int32
            seen += [tuple(r) for r in xb]
    assert sorted(seen) == sorted(tuple(r) for r in x)
    xb, yb = ds.train.read_block(2)
    rows = np.flatnonzero(ds.train.masks[2]) + 200
    np.testing.assert_array_equal(xb, x[rows])
    assert yb.tolist() == y[rows].astype(int).tolist()
    # a row range across blocks
    xr, _ = ds.train.read_rows(60, 90)
    kept = np.concatenate([np.flatnonzero(m) + 100 * g for g, m in enumerate(ds.train.masks)])
    np.testing.assert_array_equal(xr, x[kept[60:90]])
    again = load_dataset(_pq_cfg(p, test_fraction=0.25), seed=7)
    assert all((a == b).all() for a, b in zip(again.test.masks, ds.test.masks))
    other = load_dataset(_pq_cfg(p, test_fraction=0.25), seed=8)
    assert any((a != b).any() for a, b in zip(other.test.masks, ds.test.masks))


def _cancer_table():
    from sklearn.datasets import load_breast_cancer

    d = load_breast_cancer()
    return d.data.astype(np.float64), d.target.astype(np.int64), list(d.feature_names)


def test_parquet_as_pandas_pyarrow_and_a_partitioned_job_write_it(tmp_path):
    # issue 33: pq.write_table / df.to_parquet defaults write one row group, which was refused
    import pandas as pd
    import pyarrow.parquet as pq

    x, y, names = _cancer_table()
    cols = [n.replace(" ", "_") for n in names]
    df = pd.DataFrame(x, columns=cols).assign(label=y)
    df.to_parquet(tmp_path / "pandas.parquet")
    pq.write_table(pa.Table.from_pandas(df), tmp_path / "pyarrow.parquet")
    # as Spark's df.write.partitionBy("label").parquet(dir) lays it out: label=K folders, part files,
    # _SUCCESS and .crc files beside them, the label not stored in the files
    spark = tmp_path / "spark"
    for k in (0, 1):
        d = spark / f"label={k}"
        d.mkdir(parents=True)
        part = df[df.label == k].drop(columns="label")
        pq.write_table(pa.Table.from_pandas(part.iloc[: len(part) // 2], preserve_index=False), d / "part-00000.parquet")
        pq.write_table(pa.Table.from_pandas(part.iloc[len(part) // 2:], preserve_index=False), d / "part-00001.parquet")
        (d / ".part-00000.parquet.crc").write_bytes(b"crc")
    (spark / "_SUCCESS").write_text("")
    sizes = {}
    for path in (tmp_path / "pandas.parquet", tmp_path / "pyarrow.parquet", spark):
        ds = load_dataset(_pq_cfg(path, features=cols, test_fraction=0.2), seed=0)
        how = ds.details["test_split"]
        assert how["rows_per_class"] == {"0": 42, "1": 71}, (path, how)  # round(0.2 x 212), round(0.2 x 357)
        assert ds.num_classes == 2 and ds.input_shape == (30,)
        sizes[path.name] = ds.sizes()
        _, yt = ds.test.read_block(0)
        assert set(yt.tolist()) <= {0, 1}
    assert len({tuple(v.items()) for v in sizes.values()}) == 1 and sizes["spark"]["test"] == 113
    ds = load_dataset(_pq_cfg(spark, features=cols), seed=0)
    assert ds.details["label_from"] == "Hive partition folders"
    with pytest.raises(DataError, match="has no such column; its columns are .*, and its partition folders give label"):
        load_dataset(_pq_cfg(spark, features=cols, label="lbl"), seed=0)  # user test: the folders' column was not named
    ytest = np.concatenate([ds.test.read_block(i)[1] for i in range(ds.test.num_blocks)])
    assert np.bincount(ytest).tolist() == [42, 71]
    (spark / "label=one").mkdir()
    pq.write_table(pa.Table.from_pandas(df.drop(columns="label").iloc[:3], preserve_index=False),
                   spark / "label=one" / "part-0.parquet")
    with pytest.raises(DataError, match="partition folder label=one: labels must be class indices"):
        load_dataset(_pq_cfg(spark, features=cols), seed=0)


def test_parquet_directory_glob_test_path_uint8_and_feature_shape(tmp_path):
    info = write_synthetic_parquet(tmp_path / "train", rows=900, rows_per_group=128, files=3, dtype="uint8")
    assert info["rows"] == 900 and info["files"] == 3
    (tmp_path / "train" / "_SUCCESS").write_text("")  # Spark's marker: skipped
    write_synthetic_parquet(tmp_path / "test", rows=200, rows_per_group=128, dtype="uint8")
    cfg = _pq_cfg(tmp_path / "train", feature_shape=[32, 32, 3], test_path=str(tmp_path / "test"))
    ds = load_dataset(cfg, seed=0)
    assert ds.sizes() == {"train": 900, "val": 0, "test": 200} and ds.input_shape == (32, 32, 3)
    assert ds.train.num_blocks == 9 and ds.details["test_split"]["method"] == "data.test_path"
    x, y = ds.test.read_block(0)
    assert x.shape == (128, 32, 32, 3) and 0.0 <= x.min() and x.max() <= 1.0
    assert ds.details["features_scaled"] == "1/255 (uint8)" and ds.num_classes == 10
    glob = load_dataset(_pq_cfg(str(tmp_path / "tr*" / "part-0000[02].parquet"), feature_shape=[3072]), seed=0)
    assert len(glob.train) + len(glob.test) == 600 and glob.input_shape == (3072,)
    ds.validate()


def test_parquet_numeric_columns_one_hot_labels_and_nested_fixed_lists(tmp_path):
    rng = np.random.default_rng(4)
    a, b = rng.random(300), rng.integers(0, 9, 300)
    onehot = np.eye(3, dtype=np.int8)[np.arange(300) % 3]
    p = _parquet(tmp_path / "cols.parquet", {"a": a, "b": b, "label": pa.array(list(onehot))}, 50)
    ds = load_dataset(_pq_cfg(p, features=["a", "b"]), seed=0)
    assert ds.input_shape == (2,) and ds.num_classes == 3 and ds.details["labels"] == "one-hot"
    x, y = ds.train.read_rows(0, 5)
    rows = np.flatnonzero(ds.train.masks[0])[:5]  # the first row group's kept rows
    np.testing.assert_allclose(x[:, 0], a[rows].astype(np.float32))
    assert y.tolist() == (rows % 3).tolist()
    img = pa.FixedSizeListArray.from_arrays(rng.random(300 * 8, dtype=np.float32), 4)
    nested = pa.FixedSizeListArray.from_arrays(img, 2)  # (2, 4) per row
    p2 = _parquet(tmp_path / "nested.parquet", {"features": nested, "label": np.arange(300) % 2}, 60)
    assert load_dataset(_pq_cfg(p2), seed=0).input_shape == (2, 4)


def test_parquet_classes_without_statistics_and_pickled_splits(tmp_path):
    x = np.random.default_rng(5).random((200, 4), dtype=np.float32)
    p = _parquet(tmp_path / "nostats.parquet", {"features": pa.array(list(x)), "label": np.arange(200) % 7},
                 40, write_statistics=False)
    ds = load_dataset(_pq_cfg(p), seed=0)
    assert ds.num_classes == 7
    clone = pickle.loads(pickle.dumps(ds.train))  # a replica on another process can read the same blocks
    for i in range(ds.train.num_blocks):
        for u, v in zip(clone.read_block(i), ds.train.read_block(i)):
            np.testing.assert_array_equal(u, v)


def test_block_dataset_has_no_whole_arrays(tmp_path):
    x = np.random.default_rng(6).random((100, 2), dtype=np.float32)
    p = _parquet(tmp_path / "t.parquet", {"features": pa.array(list(x)), "label": np.arange(100) % 2}, 25)
    ds = load_dataset(_pq_cfg(p), seed=0)
    for attr in ("x_train", "y_train", "x_test"):
        with pytest.raises(DataError, match=f"asked for {attr} as one in-memory array: this training loop is not "
                                            "yet integrated with the streaming readers"):
            getattr(ds, attr)
    assert isinstance(ds.val, ArraySplit) and len(ds.val) == 0 and ds.val.sample_shape == (2,)


def test_messages_for_negative_labels_object_arrays_and_a_parquet_file_read_as_npz(tmp_path):
    x = np.random.default_rng(0).random((60, 4)).astype(np.float32)
    y = np.repeat(np.arange(-1, 2), 20)
    with pytest.raises(DataError, match="label -1 at row 0 is negative: class indices start at 0: shift the labels"):
        load_dataset(_npz(tmp_path / "neg.npz", x=x, y=y), 0)
    with pytest.raises(DataError, match=r"holds an object \(pickled\) array.*np.savez"):
        load_dataset(_npz(tmp_path / "obj.npz", x=np.array([{"a": 1}] * 60, dtype=object), y=y + 1), 0)
    pq_file = _parquet(tmp_path / "t.parquet", {"features": x[:, 0], "label": y + 1}, 20)
    with pytest.raises(DataError, match=r"not a valid .npz file \(a Parquet file: set data.name = 'parquet'\)"):
        load_dataset(DataConfig(name="npz", path=str(pq_file)), 0)


def test_a_row_group_larger_than_a_block_is_read_in_row_ranges(tmp_path, monkeypatch):
    # pandas and pyarrow write up to a million rows in one row group: a 3 GB file of one
    # group was one block, read whole into memory by every process (issue 33)
    import distbench.data.parquet as dp

    rng = np.random.default_rng(4)
    x = rng.random((1000, 6), dtype=np.float32)
    y = np.arange(1000) % 3
    p = _parquet(tmp_path / "one.parquet", {"features": pa.array(list(x)), "label": y}, 1000)
    whole = load_dataset(_pq_cfg(p, test_fraction=0.2), seed=1)
    assert whole.train.num_blocks == 1
    monkeypatch.setattr(dp, "BLOCK_BYTES", 150 * 6 * 4)  # 150 rows of 6 float32 features per block
    ds = load_dataset(_pq_cfg(p, test_fraction=0.2), seed=1)
    assert ds.train.num_blocks == ds.test.num_blocks == 7 and ds.train.describe()["row_groups"] == 1
    assert fingerprint(ds) == fingerprint(whole)  # the same rows: the same dataset
    for a, b in ((ds.train, whole.train), (ds.test, whole.test)):
        assert a.block_sizes().sum() == len(b)
        xa = np.concatenate([a.read_block(i)[0] for i in range(a.num_blocks)])
        ya = np.concatenate([a.read_block(i)[1] for i in range(a.num_blocks)])
        np.testing.assert_array_equal(xa, b.read_block(0)[0])
        np.testing.assert_array_equal(ya, b.read_block(0)[1])
        assert max(len(a.read_block(i)[1]) for i in range(a.num_blocks)) <= 150
