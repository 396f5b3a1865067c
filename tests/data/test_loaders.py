"""Data loading: digits split, IDX and npz files written here, synthetic, sharding."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from distbench.config import DataConfig
from distbench.data import DataError, fingerprint, load_dataset, shard
from distbench.data.loaders import read_idx


def test_digits_split_is_stratified_and_deterministic():
    a = load_dataset(DataConfig(), seed=1)
    b = load_dataset(DataConfig(), seed=1)
    c = load_dataset(DataConfig(), seed=2)
    sizes = a.sizes()
    assert sum(sizes.values()) == 1797
    assert sizes["test"] == 360  # 20 % of 1797, rounded up by scikit-learn
    assert a.input_shape == (8, 8, 1) and a.x_train.dtype == np.float32
    assert 0.0 <= a.x_train.min() and a.x_train.max() <= 1.0
    assert fingerprint(a) == fingerprint(b) != fingerprint(c)
    # stratified: every class is in the test split in nearly the overall proportion
    counts = np.bincount(a.y_test, minlength=10)
    assert counts.min() >= 34 and counts.max() <= 38


def _write_idx(path, arr, code):
    header = bytes([0, 0, code, arr.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
    path.write_bytes(header + arr.astype(arr.dtype.newbyteorder(">")).tobytes())


def _mnist_arrays(n_train=50, n_test=20):
    rng = np.random.default_rng(0)
    return (rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8), (np.arange(n_train) % 10).astype(np.uint8),
            rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8), (np.arange(n_test) % 10).astype(np.uint8))


def test_idx_directory(tmp_path):
    xt, yt, xs, ys = _mnist_arrays()
    _write_idx(tmp_path / "train-images-idx3-ubyte", xt, 0x08)
    _write_idx(tmp_path / "train-labels-idx1-ubyte", yt, 0x08)
    _write_idx(tmp_path / "t10k-images-idx3-ubyte", xs, 0x08)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(
        bytes([0, 0, 8, 1]) + len(ys).to_bytes(4, "big") + ys.tobytes()))
    ds = load_dataset(DataConfig(name="mnist", path=str(tmp_path), validation_fraction=0.2), seed=0)
    assert ds.sizes() == {"train": 40, "val": 10, "test": 20}
    assert ds.input_shape == (28, 28, 1) and ds.x_test.max() <= 1.0
    np.testing.assert_allclose(ds.x_test[..., 0], xs / 255.0, rtol=1e-6)


def test_npz(tmp_path):
    xt, yt, xs, ys = _mnist_arrays(n_train=100)
    p = tmp_path / "fashion.npz"
    np.savez(p, x_train=xt, y_train=yt, x_test=xs, y_test=ys)
    ds = load_dataset(DataConfig(name="fashion_mnist", path=str(p)), seed=0)
    assert ds.sizes()["test"] == 20 and ds.num_classes == 10


@pytest.mark.parametrize("corrupt,needle", [
    (lambda b: b[:-5], "truncated or corrupt"),
    (lambda b: b[:6], "truncated IDX header"),
    (lambda b: b"\x01\x02" + b[2:], "not an IDX file"),
    (lambda b: b[:2] + b"\x07" + b[3:], "unknown IDX type code"),
])
def test_corrupt_idx(tmp_path, corrupt, needle):
    p = tmp_path / "x-idx1-ubyte"
    _write_idx(p, np.arange(10, dtype=np.uint8), 0x08)
    p.write_bytes(corrupt(p.read_bytes()))
    with pytest.raises(DataError, match=needle):
        read_idx(p)


def test_too_few_samples_to_split(tmp_path):
    xt, yt, xs, ys = _mnist_arrays(n_train=30)
    p = tmp_path / "tiny.npz"
    np.savez(p, x_train=xt, y_train=yt, x_test=xs, y_test=ys)
    # helper-36: the setting to change was not named
    with pytest.raises(DataError, match=r"cannot split 30 samples of 10 classes with data.validation_fraction = 0.1: "
                                        r".*; set data.validation_fraction = 0.34 or more"):
        load_dataset(DataConfig(name="mnist", path=str(p)), seed=0)


def test_bad_npz(tmp_path):
    xt, yt, xs, ys = _mnist_arrays()
    p = tmp_path / "m.npz"
    np.savez(p, x_train=xt, y_train=yt + 5, x_test=xs, y_test=ys)
    with pytest.raises(DataError, match="label values range 5..14, expected 0..9"):
        load_dataset(DataConfig(name="mnist", path=str(p)), seed=0)
    np.savez(p, x_train=xt, y_train=yt)
    with pytest.raises(DataError, match="lacks keys"):
        load_dataset(DataConfig(name="mnist", path=str(p)), seed=0)
    p.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(DataError, match="cannot read as .npz"):
        load_dataset(DataConfig(name="mnist", path=str(p)), seed=0)
    p.write_bytes(np.random.default_rng(0).bytes(3000))  # random bytes: NumPy's message suggests unpickling
    with pytest.raises(DataError, match="not a valid .npz file") as e:
        load_dataset(DataConfig(name="mnist", path=str(p)), seed=0)
    assert "allow_pickle" not in str(e.value) and "pickle.load" not in str(e.value)
    np.savez(p, x_train=xt.astype(np.complex64), y_train=yt, x_test=xs, y_test=ys)
    with pytest.raises(DataError, match="dtype complex64"):
        load_dataset(DataConfig(name="mnist", path=str(p)), seed=0)


def test_synthetic():
    ds = load_dataset(DataConfig(name="synthetic", samples=200, image_shape=[16, 16, 3], classes=4), seed=3)
    assert ds.input_shape == (16, 16, 3) and ds.num_classes == 4
    assert sum(ds.sizes().values()) == 200 and set(np.unique(ds.y_train)) == {0, 1, 2, 3}


def test_shard_covers_everything_once():
    x = np.arange(11)[:, None]
    y = np.arange(11)
    parts = [shard(x, y, r, 3)[1] for r in range(3)]
    assert [len(p) for p in parts] == [4, 4, 3]
    assert sorted(np.concatenate(parts).tolist()) == list(range(11))
    with pytest.raises(ValueError, match="outside"):
        shard(x, y, 3, 3)


def test_a_label_in_one_sample_only_is_named_with_its_sample(tmp_path):
    # the user test: one stray label 99 among 4 classes gave scikit-learn's "least populated
    # class" message and the advice to use more samples or a larger fraction
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(300, 8)).astype(np.float32), rng.integers(0, 4, 300)
    y[7] = 99
    p = tmp_path / "stray.npz"
    np.savez(p, x=x, y=y)
    with pytest.raises(DataError) as e:
        load_dataset(DataConfig(name="npz", path=str(p)), seed=0)
    msg = str(e.value)
    assert "label(s) 99 (sample 7) occur in one sample only" in msg and "correct or drop that sample" in msg, msg
    assert "\n" not in msg
