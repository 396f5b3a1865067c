"""Loaders: scikit-learn digits, MNIST/Fashion-MNIST from ``.npz`` or IDX files, synthetic."""

from __future__ import annotations

import gzip
import zipfile
from pathlib import Path

import numpy as np

from distbench.config import DataConfig
from distbench.data.base import Dataset, DataError, check_arrays, split_stratified

# IDX type codes (LeCun's format description, http://yann.lecun.com/exdb/mnist/).
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str | Path) -> np.ndarray:
    """Read one IDX file (optionally gzip-compressed) into a NumPy array.

    Raises:
        DataError: bad magic, unknown type code, or a size that disagrees with the header.
    """
    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    try:
        with opener(p, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:
        raise DataError(f"{p}: cannot read IDX file: {e}") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise DataError(f"{p}: not an IDX file (expected magic 0x0000TTNN, got {raw[:4].hex() or 'nothing'})")
    code, ndim = raw[2], raw[3]
    if code not in _IDX_DTYPES:
        raise DataError(f"{p}: unknown IDX type code 0x{code:02x}; expected one of "
                        + ", ".join(f"0x{c:02x}" for c in _IDX_DTYPES))
    header = 4 + 4 * ndim
    if ndim == 0 or len(raw) < header:
        raise DataError(f"{p}: truncated IDX header ({len(raw)} bytes, {ndim} dimensions)")
    shape = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_DTYPES[code])
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - header != expected:
        raise DataError(f"{p}: IDX header declares shape {shape} ({expected} bytes of data) "
                        f"but the file holds {len(raw) - header}; the file is truncated or corrupt")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def _find_idx(directory: Path, stem: str) -> Path:
    for cand in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
        if (directory / cand).exists():
            return directory / cand
    raise DataError(f"{directory}: missing IDX file {stem}[.gz]; expected train-images-idx3-ubyte, "
                    "train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte")


def load_mnist_like(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Load MNIST-format data from a Keras ``.npz`` (keys ``x_train y_train x_test y_test``)
    or a directory of the four IDX files. Returns ``(x_train, y_train, x_test, y_test)``.

    Raises:
        DataError: missing file or key, corrupt archive, inconsistent shapes.
    """
    p = Path(path)
    if p.is_dir():
        arrays = [read_idx(_find_idx(p, s)) for s in (
            "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
            "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")]
        return tuple(arrays)  # type: ignore[return-value]
    try:
        with np.load(p, allow_pickle=False) as z:
            missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in z.files]
            if missing:
                raise DataError(f"{p}: .npz lacks keys {missing}; found {z.files}; expected the Keras "
                                "mnist.npz layout x_train, y_train, x_test, y_test")
            return z["x_train"], z["y_train"], z["x_test"], z["y_test"]
    except DataError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise DataError(f"{p}: not a valid .npz file (cannot read as .npz: {npz_problem(e)}); expected a "
                        "Keras-format .npz file or a directory of IDX files") from None


def npz_problem(e: BaseException) -> str:
    """Why NumPy could not read a file as ``.npz``, for an error message.

    NumPy's own message for a file that is not a plain archive of arrays suggests loading
    it with ``allow_pickle``; unpickling a data file can run arbitrary code, so that hint
    is replaced: distbench never unpickles data, and neither should its users.
    """
    text = " ".join(str(e).split())
    if "pickle" in text.lower():
        return "it is not a zip archive of NumPy arrays (distbench never loads pickled data)"
    return f"{type(e).__name__}: {text}"[:300]


def _images(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32)
    if x.max(initial=0.0) > 1.0:
        x = x / 255.0
    return x[..., None] if x.ndim == 3 else x


def load_dataset(cfg: DataConfig, seed: int) -> Dataset:
    """Build the dataset named by ``cfg`` and split it deterministically with ``seed``.

    digits and synthetic: test then validation split out of all samples (stratified);
    mnist/fashion_mnist: the file's test set is the test split, validation is split out
    of its training set.

    Raises:
        DataError: unreadable or invalid data files.
    """
    if cfg.name == "digits":
        from sklearn.datasets import load_digits

        d = load_digits()
        x = (d.images / 16.0).astype(np.float32)[..., None]
        y = d.target.astype(np.int32)
        classes = 10
        x, y, x_test, y_test = split_stratified(x, y, cfg.test_fraction, seed)
    elif cfg.name == "synthetic":
        rng = np.random.default_rng(seed)
        shape = tuple(cfg.image_shape) if len(cfg.image_shape) == 3 else (*cfg.image_shape, 1)
        x = rng.random((cfg.samples, *shape), dtype=np.float32)
        y = (np.arange(cfg.samples) % cfg.classes).astype(np.int32)
        rng.shuffle(y)
        classes = cfg.classes
        x, y, x_test, y_test = split_stratified(x, y, cfg.test_fraction, seed)
    else:
        x, y, x_test, y_test = load_mnist_like(cfg.path)
        classes = 10
        check_arrays(x, y, classes, f"{cfg.path} (train)")
        check_arrays(x_test, y_test, classes, f"{cfg.path} (test)")
        if x.shape[1:] != x_test.shape[1:]:
            raise DataError(f"{cfg.path}: training images have shape {x.shape[1:]} but test images "
                            f"{x_test.shape[1:]}; both splits must hold images of one shape")
        x, y, x_test, y_test = _images(x), y.astype(np.int32), _images(x_test), y_test.astype(np.int32)
    x_tr, y_tr, x_val, y_val = split_stratified(x, y, cfg.validation_fraction, seed)
    return Dataset(cfg.name, x_tr, y_tr, x_val, y_val, x_test, y_test, classes)
