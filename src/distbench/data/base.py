"""Checks shared by every loader (features, labels), the stratified split and sharding.

Every reader turns what it read into float32 features and int32 class indices with the
functions here, so a bad value gets the same one-line :class:`DataError` whichever file
format it came from.
"""

from __future__ import annotations

import math

import numpy as np

from distbench.contracts import ConfigError, DataError  # noqa: F401 (re-exported: distbench.data.DataError)


def check_arrays(x: np.ndarray, y: np.ndarray, num_classes: int, source: str) -> None:
    """Validate images and labels read from ``source``.

    Raises:
        DataError: naming the source, what was found and what was expected.
    """
    if x.ndim not in (3, 4):
        raise DataError(f"{source}: images have shape {x.shape}, expected (n, H, W) or (n, H, W, C)")
    if y.ndim != 1 or len(y) != len(x):
        raise DataError(f"{source}: labels have shape {y.shape}, expected ({len(x)},) to match the images")
    if len(x) == 0:
        raise DataError(f"{source}: no samples")
    if not np.issubdtype(y.dtype, np.integer):
        raise DataError(f"{source}: labels have dtype {y.dtype}, expected an integer dtype")
    if not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
        raise DataError(f"{source}: images have dtype {x.dtype}, expected uint8 or float")
    if y.min() < 0 or y.max() >= num_classes:
        raise DataError(
            f"{source}: label values range {int(y.min())}..{int(y.max())}, expected 0..{num_classes - 1}"
        )
    if np.issubdtype(x.dtype, np.floating) and not np.all(np.isfinite(x)):
        raise DataError(f"{source}: images contain NaN or Inf")


def split_stratified(
    x: np.ndarray, y: np.ndarray, fraction: float, seed: int, key: str = "the held-out fraction"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Split ``(x, y)`` into ``(x_keep, y_keep, x_held, y_held)``, stratified by label.

    Uses scikit-learn's ``train_test_split`` with ``stratify=y`` and ``random_state=seed``,
    so the same inputs and seed always give the same split. ``fraction`` is the held-out
    share, in (0, 1); ``key`` names the setting it comes from in errors
    (``data.test_fraction``).

    Raises:
        DataError: a label occurs in one sample only (named with its sample index), or
            scikit-learn cannot split (e.g. fewer held-out samples than labels).
    """
    from sklearn.model_selection import train_test_split

    labels, counts = np.unique(y, return_counts=True)
    rare = labels[counts < 2]
    if len(rare):
        shown = ", ".join(f"{int(v)} (sample {int(np.flatnonzero(y == v)[0])})" for v in rare[:5])
        more = f" and {len(rare) - 5} more" if len(rare) > 5 else ""
        raise DataError(f"cannot split {len(y)} samples stratified by label: label(s) {shown}{more} occur in one "
                        f"sample only, and each label needs at least 2 (one per side); a label that rare is "
                        f"usually a mistake: correct or drop that sample, or add samples of it")
    try:
        x_keep, x_held, y_keep, y_held = train_test_split(
            x, y, test_size=fraction, random_state=seed, stratify=y
        )
    except ValueError as e:  # user test (helper-36): the key to change was not named
        k = len(labels)
        least = math.ceil(100 * k / len(y)) / 100 if len(y) else 1.0
        fix = (f"set {key} = {least:g} or more (each class needs a held-out sample), or use more samples"
               if least < 0.5 else "use more samples (each class needs a sample on each side of every split)")
        raise DataError(f"cannot split {len(y)} samples of {k} classes with {key} = {fraction}: {e}; {fix}") from None
    return x_keep, y_keep, x_held, y_held


def shard(x: np.ndarray, y: np.ndarray, rank: int, world_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Return rank ``rank``'s contiguous shard of ``(x, y)`` out of ``world_size``.

    Shards differ in size by at most one sample (``np.array_split``).

    Raises:
        ValueError: if ``rank`` is not in ``[0, world_size)``.
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside 0..{world_size - 1} (world size {world_size})")
    idx = np.array_split(np.arange(len(y)), world_size)[rank]
    return x[idx], y[idx]


LABELS_NOT_SUPPORTED = ("not supported: distbench compares classifiers; labels must be class indices "
                        "or one-hot")


def to_features(x: np.ndarray, where: str, first_row: int = 0) -> np.ndarray:
    """Features as float32, checked: numeric, finite; ``uint8`` values are scaled by 1/255.

    Args:
        x: features, shape ``(rows, ...)``, any integer, bool or float dtype.
        where: what the rows are, for messages (e.g. ``"data.npz x"``, ``"a.parquet row group 3"``).
        first_row: the number of ``x``'s first row in ``where`` (messages name rows by it).

    Returns:
        float32 array of ``x``'s shape (``x`` itself when it is already float32).

    Raises:
        DataError: strings or other non-numeric dtypes; NaN or Inf (naming the first bad row).
    """
    if x.dtype.kind not in "biuf":
        raise DataError(f"{where}: features have dtype {x.dtype}, expected integers or floats (encode "
                        "categorical features as numbers first)")
    if x.dtype.kind == "f":
        bad = ~np.isfinite(x).reshape(len(x), -1).all(axis=1)
        if bad.any():
            rows = np.flatnonzero(bad)
            raise DataError(f"{where}: row {first_row + rows[0]} holds NaN or Inf features ({len(rows)} such rows); "
                            "drop or impute them before training")
    if x.dtype == np.uint8:
        return x.astype(np.float32) / np.float32(255.0)
    return x.astype(np.float32, copy=False)


def class_indices(y: np.ndarray, where: str, first_row: int = 0) -> tuple[np.ndarray, int | None]:
    """Labels as int64 class indices, checked; and the one-hot width if they were one-hot.

    Accepted: integer or bool class indices ``(rows,)``; floats with integral values
    ``(rows,)`` (Spark ML writes labels as doubles); one-hot rows ``(rows, classes)`` (each
    row exactly one 1, the rest 0). Negative indices are left to :func:`check_label_range`.

    Args:
        y: labels, shape ``(rows,)`` or ``(rows, classes)``.
        where: what the rows are, for messages.
        first_row: the number of ``y``'s first row in ``where``.

    Returns:
        ``(indices, width)``: int64 indices of shape ``(rows,)``; ``width`` is the one-hot
        width, or ``None`` for index labels.

    Raises:
        DataError: string labels, non-integral float labels, rows that are not one-hot, other shapes.
    """
    if y.dtype.kind in "USO":
        raise DataError(f"{where}: labels are strings (dtype {y.dtype}); string labels are not supported: "
                        "encode them as class indices 0..k-1 (e.g. Spark ML's StringIndexer) or one-hot")
    if y.dtype.kind not in "biuf":
        raise DataError(f"{where}: labels have dtype {y.dtype}; {LABELS_NOT_SUPPORTED}")
    if y.ndim == 2 and y.shape[1] == 1:
        raise DataError(f"{where}: labels have shape {y.shape}, a column: expected (rows,) class indices or "
                        "(rows, classes) one-hot; for class indices flatten the column (y.ravel() or "
                        "y.reshape(-1)) before saving")
    if y.ndim == 2:
        ok = ((y == 0) | (y == 1)).all(axis=1) & (y.sum(axis=1) == 1)
        if not ok.all():
            rows = np.flatnonzero(~ok)
            shown = np.array2string(y[rows[0]][:8], separator=", ") + (" ..." if y.shape[1] > 8 else "")
            raise DataError(f"{where}: row {first_row + rows[0]} of the one-hot labels is {shown}, not one-hot "
                            f"({len(rows)} such rows); each row needs exactly one 1 and 0 elsewhere")
        return y.argmax(axis=1).astype(np.int64), int(y.shape[1])
    if y.ndim != 1:
        raise DataError(f"{where}: labels have shape {y.shape}, expected (rows,) class indices or "
                        "(rows, classes) one-hot")
    if y.dtype.kind == "f":
        bad = ~np.isfinite(y) | (y != np.round(y))
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise DataError(f"{where}: label {float(y[r])!r} at row {first_row + r} is not a whole number; "
                            f"{LABELS_NOT_SUPPORTED}")
    return y.astype(np.int64), None


def check_label_range(y: np.ndarray, num_classes: int, where: str, first_row: int = 0) -> None:
    """Raise :class:`DataError` unless every class index in ``y`` is in ``[0, num_classes)``."""
    if len(y) and (y.min() < 0 or y.max() >= num_classes):
        r = int(np.flatnonzero((y < 0) | (y >= num_classes))[0])
        if y[r] < 0:  # (helper-31: "outside 0..1 (2 classes)" for labels -1, 0, 1: a count the data does not have)
            raise DataError(f"{where}: label {int(y[r])} at row {first_row + r} is negative: class indices start at "
                            "0: shift the labels (e.g. y - y.min())")
        raise DataError(f"{where}: label {int(y[r])} at row {first_row + r} is outside 0..{num_classes - 1} "
                        f"({num_classes} class{'' if num_classes == 1 else 'es'}); set data.classes or fix the labels")
