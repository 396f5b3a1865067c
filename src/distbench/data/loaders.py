"""Loaders: scikit-learn's digits and breast-cancer data, MNIST/Fashion-MNIST from ``.npz``
or IDX files, synthetic images, your own arrays (``npz``) and Parquet files (``parquet``)."""

from __future__ import annotations

import gzip
import tokenize
import zipfile
from pathlib import Path

import numpy as np

from distbench.config import DataConfig
from distbench.data.base import DataError, check_arrays, check_label_range, class_indices, split_stratified, to_features
from distbench.data.dataset import Dataset

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
    except NPZ_ERRORS as e:
        raise DataError(f"{p}: not a valid .npz file (cannot read as .npz: {npz_problem(e)}); expected a "
                        "Keras-format .npz file or a directory of IDX files") from None


#: What NumPy raises for a file that is not a readable ``.npz``: a bad archive, a truncated
#: member, or a corrupt array header (parsed with ``ast.literal_eval``: SyntaxError, TokenError).
NPZ_ERRORS = (OSError, ValueError, SyntaxError, tokenize.TokenError, zipfile.BadZipFile, EOFError)


def npz_problem(e: BaseException) -> str:
    """Why NumPy could not read a file as ``.npz``, for an error message.

    NumPy's own message for a file that is not a plain archive of arrays suggests loading
    it with ``allow_pickle``; unpickling a data file can run arbitrary code, so that hint
    is replaced: distbench never unpickles data, and neither should its users.
    """
    text = " ".join(str(e).split())
    if "pickle" in text.lower():
        return ("it holds an object (pickled) array, or is not a zip archive of NumPy arrays at all; save plain "
                "numeric arrays with np.savez (distbench never loads pickled data)")
    return f"{type(e).__name__}: {text}"[:300]


def _images(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32)
    if x.max(initial=0.0) > 1.0:
        x = x / 255.0
    return x[..., None] if x.ndim == 3 else x


def load_npz(cfg: DataConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None, int, dict]:
    """Read and check ``data.path`` for ``name = "npz"``: arrays ``x``, ``y`` and optionally ``x_test``, ``y_test``.

    ``x`` is ``(n, ...)`` of any numeric dtype (``uint8`` is scaled by 1/255, others are
    cast to float32 unchanged), reshaped per row to ``cfg.feature_shape`` if given; ``y``
    is ``(n,)`` class indices (integers, or floats with whole values) or ``(n, classes)``
    one-hot.

    Returns:
        ``(x, y, x_test, y_test, num_classes, details)``: float32 features, int32 labels
        (the test pair ``None`` when the file has none).

    Raises:
        DataError: a missing key, lengths that differ, NaN/Inf features, labels that are
            strings, not whole numbers, not one-hot, or outside ``0..classes-1``; an empty array.
    """
    p = Path(cfg.path)
    try:
        with np.load(p, allow_pickle=False) as z:
            found = list(z.files)
            missing = [k for k in ("x", "y") if k not in found]
            if missing or (("x_test" in found) != ("y_test" in found)):
                raise DataError(f"{p}: .npz has keys {found}; expected arrays x and y (and optionally both "
                                "x_test and y_test): x of shape (n, ...) and y of n class indices or one-hot rows")
            arrays = {k: z[k] for k in ("x", "y", "x_test", "y_test") if k in found}
    except DataError:
        raise
    except NPZ_ERRORS as e:
        hint = " (a Parquet file: set data.name = 'parquet')" if p.suffix == ".parquet" else ""
        raise DataError(f"{p}: not a valid .npz file{hint} (cannot read as .npz: {npz_problem(e)}); expected arrays "
                        "x and y saved with numpy.savez") from None
    pairs, widths, details = [], set(), {"source": str(p)}
    for xk, yk in (("x", "y"), ("x_test", "y_test")):
        if xk not in arrays:
            pairs.append((None, None))
            continue
        x, y = arrays[xk], arrays[yk]
        if x.ndim < 2:
            raise DataError(f"{p}: {xk} has shape {x.shape}: one value per sample; expected (n, features...), one "
                            f"row per sample: for one feature per sample save {xk}.reshape(-1, 1)")
        if len(x) == 0:
            raise DataError(f"{p}: {xk} has shape {x.shape}: no samples; expected (n, ...) with n >= 1 rows")
        if len(y) != len(x):
            raise DataError(f"{p}: {xk} has {len(x)} rows but {yk} has {len(y)}; they must have one label per sample")
        if cfg.feature_shape:
            size = int(np.prod(cfg.feature_shape))
            if int(np.prod(x.shape[1:])) != size:
                raise DataError(f"data.feature_shape = {cfg.feature_shape}: holds {size} values per row, but {xk} "
                                f"rows have shape {x.shape[1:]}; give a shape of the same size")
            x = x.reshape(len(x), *cfg.feature_shape)
        details["features_scaled"] = "1/255 (uint8)" if x.dtype == np.uint8 else "none"
        idx, width = class_indices(y, f"{p} {yk}")
        widths.add(width)
        pairs.append((to_features(x, f"{p} {xk}"), idx))
    (x, y), (x_test, y_test) = pairs
    if "x_test" in arrays and (arrays["x"].dtype == np.uint8) != (arrays["x_test"].dtype == np.uint8):
        raise DataError(f"{p}: x is {arrays['x'].dtype} but x_test {arrays['x_test'].dtype}; uint8 features are "
                        "scaled by 1/255, so both must be uint8 or neither")
    if x_test is not None and x_test.shape[1:] != x.shape[1:]:
        raise DataError(f"{p}: x rows have shape {x.shape[1:]} but x_test rows {x_test.shape[1:]}; both need one shape")
    if len(widths) > 1:
        raise DataError(f"{p}: y and y_test are labelled differently (one-hot widths {sorted(map(str, widths))}); "
                        "use one kind of labels in both")
    width = widths.pop()
    inferred = width or int(max(y.max(), -1 if y_test is None else y_test.max())) + 1
    classes = cfg.classes or inferred
    if width and cfg.classes and cfg.classes != width:
        raise DataError(f"data.classes = {cfg.classes} but the one-hot labels in {p} have width {width}; "
                        "remove data.classes or fix it")
    for yk, labels in (("y", y), ("y_test", y_test)):
        if labels is not None:
            check_label_range(labels, classes, f"{p} {yk}")
    if classes < 2:
        raise DataError(f"{p}: every label is 0, a single class; a classifier needs at least 2 classes "
                        "(set data.classes if some classes are absent from the data)")
    details["labels"] = "one-hot" if width else "class indices"
    return (x, y.astype(np.int32), x_test, None if y_test is None else y_test.astype(np.int32), classes, details)


def load_parquet(cfg: DataConfig, seed: int) -> Dataset:
    """Open ``data.path`` (and ``data.test_path``) as Parquet splits read block by block.

    Reads the footers only (see :mod:`distbench.data.parquet`); the validation split is
    empty; the test split is ``test_path``, else a seeded, stratified choice of
    ``test_fraction`` of the rows of ``path``, made while streaming
    (:func:`~distbench.data.parquet.held_out_rows`; recorded in ``details``).

    Raises:
        DataError: see :meth:`~distbench.data.parquet.ParquetFiles.open` and
            :func:`~distbench.data.parquet.make_reader`.
    """
    from distbench.data.parquet import ParquetFiles, ParquetSplit, held_out_rows, make_reader
    from distbench.data.splits import empty_split

    files = ParquetFiles.open(cfg.path)
    test_files = ParquetFiles.open(cfg.test_path, "data.test_path") if cfg.test_path else None
    reader = make_reader(files, cfg.features_col, cfg.label_col, cfg.feature_shape, cfg.classes,
                         [test_files] if test_files else [])
    if test_files:
        train = ParquetSplit(files, reader, files.row_groups())
        test = ParquetSplit(test_files, reader, test_files.row_groups())
        how = {"method": "data.test_path", "path": cfg.test_path}
    else:
        train, test, how = held_out_rows(files, reader, cfg.test_fraction, seed)
    if not len(test):
        raise DataError(f"data.test_path = {cfg.test_path!r}: the test split is empty (0 rows); give test data")
    details = {"shuffle": "row_groups", "source": "parquet", "path": cfg.path, **reader.describe(),
               "test_split": how, "validation_split": "empty (Parquet data are read block by block; "
                                                      "distbench evaluates on the test split)"}
    return Dataset(cfg.name, train, empty_split(reader.sample_shape), test, reader.num_classes, details)


def load_dataset(cfg: DataConfig, seed: int) -> Dataset:
    """Build the dataset named by ``cfg`` and split it deterministically with ``seed``.

    digits, breast_cancer, synthetic and npz without a test set: test then validation
    split out of all samples (stratified); mnist/fashion_mnist and npz with ``x_test``:
    the file's test set is the test split, validation is split out of its training set;
    parquet: see :func:`load_parquet`. breast_cancer's features are standardised with the
    training split's mean and standard deviation (recorded in ``details``).

    Raises:
        DataError: unreadable or invalid data files; ``data.classes`` that contradicts a
            dataset with a fixed number of classes.
    """
    fixed = {"digits": 10, "breast_cancer": 2, "mnist": 10, "fashion_mnist": 10}
    if cfg.name in fixed and cfg.classes not in (0, fixed[cfg.name]):
        raise DataError(f"data.classes = {cfg.classes} but {cfg.name!r} has {fixed[cfg.name]} classes; "
                        "remove data.classes")
    if cfg.name == "parquet":
        return load_parquet(cfg, seed)
    details: dict = {}
    x_test = None
    if cfg.name == "digits":
        from sklearn.datasets import load_digits

        d = load_digits()
        x = (d.images / 16.0).astype(np.float32)[..., None]
        y = d.target.astype(np.int32)
        classes = 10
    elif cfg.name == "breast_cancer":
        from sklearn.datasets import load_breast_cancer

        d = load_breast_cancer()
        x, y, classes = d.data.astype(np.float32), d.target.astype(np.int32), 2
    elif cfg.name == "synthetic":
        rng = np.random.default_rng(seed)
        shape = tuple(cfg.image_shape) if len(cfg.image_shape) == 3 else (*cfg.image_shape, 1)
        x = rng.random((cfg.samples, *shape), dtype=np.float32)
        classes = cfg.classes or 10
        y = (np.arange(cfg.samples) % classes).astype(np.int32)
        rng.shuffle(y)
    elif cfg.name == "npz":
        x, y, x_test, y_test, classes, details = load_npz(cfg)
    else:
        x, y, x_test, y_test = load_mnist_like(cfg.path)
        classes = 10
        check_arrays(x, y, classes, f"{cfg.path} (train)")
        check_arrays(x_test, y_test, classes, f"{cfg.path} (test)")
        if x.shape[1:] != x_test.shape[1:]:
            raise DataError(f"{cfg.path}: training images have shape {x.shape[1:]} but test images "
                            f"{x_test.shape[1:]}; both splits must hold images of one shape")
        x, y, x_test, y_test = _images(x), y.astype(np.int32), _images(x_test), y_test.astype(np.int32)
    if x_test is None:
        x, y, x_test, y_test = split_stratified(x, y, cfg.test_fraction, seed, "data.test_fraction")
    x_tr, y_tr, x_val, y_val = split_stratified(x, y, cfg.validation_fraction, seed, "data.validation_fraction")
    if cfg.name == "breast_cancer":
        mean, std = x_tr.mean(axis=0), x_tr.std(axis=0)
        std = np.where(std > 0, std, np.float32(1.0))
        x_tr, x_val, x_test = ((a - mean) / std for a in (x_tr, x_val, x_test))
        details["standardised"] = {"by": "training split mean and standard deviation",
                                   "mean": mean.tolist(), "std": std.tolist()}
    return Dataset.from_arrays(cfg.name, x_tr, y_tr, x_val, y_val, x_test, y_test, classes, details)
