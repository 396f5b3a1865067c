"""Dataset fingerprints: digits keeps its value; Parquet's comes from the footers, is the same
for copies of the files anywhere, and changes with the content, the row groups or the reading."""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from distbench.config import DataConfig
from distbench.data import fingerprint, load_dataset

# digits' fingerprint before datasets became splits (seed 42, the default config): unchanged
DIGITS_42 = "5787e3b19a3adf039d99d8fcd344bc0afded3cfd3cbcfbfa66217cd1aca9c782"


def test_digits_fingerprint_and_split_unchanged():
    ds = load_dataset(DataConfig(), seed=42)
    assert fingerprint(ds) == DIGITS_42
    assert ds.sizes() == {"train": 1293, "val": 144, "test": 360}


def _write(folder, x, y, group=50):
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"features": pa.array(list(x)), "label": y}), folder / "part-0.parquet",
                   row_group_size=group)
    return folder


def _load(folder, **kw):
    cfg = DataConfig(name="parquet", path=str(folder), features_col="features", label_col="label", **kw)
    return load_dataset(cfg, seed=0)


def _fp(folder, **kw):
    return fingerprint(_load(folder, **kw))


def test_parquet_fingerprint_follows_content_not_location(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.random((400, 5), dtype=np.float32), np.arange(400) % 4
    a = _write(tmp_path / "a", x, y)
    base, content = _fp(a), _load(a).content_sha256()
    copy = tmp_path / "elsewhere" / "deeper"
    shutil.copytree(a, copy)
    assert _fp(copy) == base and _load(copy).content_sha256() == content  # another folder or host: same
    x2 = x.copy()
    x2[123, 2] = 7.5  # one value changed, beyond the column's maximum: its row group's statistics change
    assert _fp(_write(tmp_path / "b", x2, y)) != base
    assert _fp(_write(tmp_path / "d", x, y, group=40)) != base  # other row groups: other blocks
    assert _fp(a, feature_shape=[5, 1]) != base  # read differently
    assert _fp(a, test_fraction=0.4) != base  # another held-out split
    # A label swapped inside its row group's range: footers and sizes may stay equal (the limit of a
    # footer fingerprint, documented); the content digest, computed once per run, always differs.
    y2 = y.copy()
    y2[5] = 3 - y2[5]
    assert _load(_write(tmp_path / "c", x, y2)).content_sha256() != content


def test_content_digest_of_in_memory_data_is_the_fingerprint():
    ds = load_dataset(DataConfig(name="breast_cancer"), seed=1)
    assert ds.content_sha256() == fingerprint(ds)
