"""The :class:`Dataset` container, the stratified split, sharding and fingerprints."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from distbench.config import ConfigError


class DataError(ConfigError):
    """A data file is missing, corrupt, or holds values outside what was expected."""


@dataclass
class Dataset:
    """Train/validation/test arrays of one dataset.

    Attributes:
        name: dataset name (``digits``, ``mnist``, ...).
        x_train, x_val, x_test: float32 arrays, shape ``(n, H, W, C)``, values in [0, 1].
        y_train, y_val, y_test: int32 arrays, shape ``(n,)``, values in ``[0, num_classes)``.
        num_classes: number of classes.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one sample, ``(H, W, C)``."""
        return tuple(int(s) for s in self.x_train.shape[1:])

    def sizes(self) -> dict[str, int]:
        """Number of samples per split, e.g. ``{"train": 1257, "val": 180, "test": 360}``."""
        return {"train": len(self.y_train), "val": len(self.y_val), "test": len(self.y_test)}


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
    x: np.ndarray, y: np.ndarray, fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Split ``(x, y)`` into ``(x_keep, y_keep, x_held, y_held)``, stratified by label.

    Uses scikit-learn's ``train_test_split`` with ``stratify=y`` and ``random_state=seed``,
    so the same inputs and seed always give the same split. ``fraction`` is the held-out
    share, in (0, 1).
    """
    from sklearn.model_selection import train_test_split

    try:
        x_keep, x_held, y_keep, y_held = train_test_split(
            x, y, test_size=fraction, random_state=seed, stratify=y
        )
    except ValueError as e:
        raise DataError(f"cannot split {len(y)} samples of {len(np.unique(y))} classes with a held-out "
                        f"fraction of {fraction}: {e}; use more samples or a larger fraction") from None
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


def fingerprint(ds: Dataset) -> str:
    """SHA-256 over every split's raw bytes, shapes and dtypes (hex string).

    Two processes that built the same dataset from the same config get the same value;
    the workload stores it and every configuration checks it.
    """
    h = hashlib.sha256()
    for arr in (ds.x_train, ds.y_train, ds.x_val, ds.y_val, ds.x_test, ds.y_test):
        a = np.ascontiguousarray(arr)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()
