"""The :class:`Dataset` container (train/validation/test splits) and its fingerprint."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distbench.data.base import DataError
from distbench.data.splits import ArraySplit, Split


@dataclass
class Dataset:
    """The train, validation and test splits of one dataset.

    In-memory sources (digits, breast_cancer, mnist, fashion_mnist, synthetic, npz) hold
    :class:`~distbench.data.splits.ArraySplit` s and expose their arrays as ``x_train``,
    ``y_train``, ``x_val``, ``y_val``, ``x_test``, ``y_test``. Parquet's train and test
    splits are read block by block and have no such arrays; its validation split is empty.

    Attributes:
        name: dataset name (``digits``, ``npz``, ``parquet``, ...).
        train, val, test: the splits.
        num_classes: number of classes.
        details: JSON-able facts recorded in the workload: the shuffle unit (``rows`` or
            ``row_groups``), the sources, feature scaling or standardisation, how the test
            split was chosen.
    """

    name: str
    train: Split
    val: Split
    test: Split
    num_classes: int
    details: dict[str, Any] = field(default_factory=dict)
    _label_counts: dict[str, np.ndarray] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_arrays(cls, name: str, x_train: np.ndarray, y_train: np.ndarray, x_val: np.ndarray,
                    y_val: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, num_classes: int,
                    details: dict[str, Any] | None = None) -> "Dataset":
        """An in-memory dataset from float32 features and int32 labels of each split."""
        return cls(name, ArraySplit(x_train, y_train), ArraySplit(x_val, y_val), ArraySplit(x_test, y_test),
                   num_classes, {"shuffle": "rows", **(details or {})})

    @property
    def in_memory(self) -> bool:
        """``True`` when every split is one in-memory array pair."""
        return all(s.in_memory for s in (self.train, self.val, self.test))

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one sample, e.g. ``(H, W, C)`` or ``(features,)``."""
        return self.train.sample_shape

    def sizes(self) -> dict[str, int]:
        """Number of samples per split, e.g. ``{"train": 1257, "val": 180, "test": 360}``."""
        return {"train": len(self.train), "val": len(self.val), "test": len(self.test)}

    def content_sha256(self) -> str:
        """Read every block of every split once and return the SHA-256 (hex) of their content.

        Each block is checked as it is read (Parquet), so a bad value fails here, before
        training starts; one block is in memory at a time. The digest covers the decoded
        blocks, train then validation then test, each as its ``x`` and ``y`` dtype, shape
        and bytes: for an in-memory dataset it equals :func:`fingerprint`; for Parquet it
        is the exact-content identity that the footer-based :func:`fingerprint` is not.

        Raises:
            DataError: naming the file, row group and row of the first bad value.
        """
        h = hashlib.sha256()
        counts = {}
        for name in ("train", "val", "test"):
            counts[name] = np.zeros(self.num_classes, np.int64)
            for block in getattr(self, name).iter_blocks():
                for a in block:
                    h.update(f"{a.dtype.str}{a.shape}".encode())
                    h.update(np.ascontiguousarray(a).data)  # no copy
                counts[name] += np.bincount(block[1], minlength=self.num_classes)[:self.num_classes]
        self._label_counts = counts  # the same pass counts the labels (:meth:`label_counts`)
        return h.hexdigest()

    def label_counts(self) -> dict[str, np.ndarray]:
        """Samples per class in each split: ``{"train": (C,), "val": (C,), "test": (C,)}``
        int64 counts (C = ``num_classes``). In-memory splits are counted directly; a
        block-read dataset is counted by the one pass of :meth:`content_sha256` (run by
        :meth:`validate`), or read once here if that did not run yet."""
        if self._label_counts is None:
            if self.in_memory:
                self._label_counts = {n: np.bincount(getattr(self, n).y, minlength=self.num_classes)
                                      [:self.num_classes].astype(np.int64) for n in ("train", "val", "test")}
            else:
                self.content_sha256()
        return self._label_counts

    def validate(self) -> None:
        """Check every value of every split (see :meth:`content_sha256`); in-memory splits were checked on load."""
        if not self.in_memory:
            self.details["content_sha256"] = self.content_sha256()

    def _array(self, split: str, i: int) -> np.ndarray:
        s = getattr(self, split)
        if not isinstance(s, ArraySplit):
            attr = ("x_", "y_")[i] + split
            raise DataError(f"dataset {self.name!r} is read block by block ({len(s)} {split} rows in "
                            f"{s.num_blocks} blocks), but this code asked for {attr} as one in-memory array: "
                            "this training loop is not yet integrated with the streaming readers; read it with "
                            "distbench.training.schedule.replica_batches/shard_batches or Split.iter_blocks")
        return (s.x, s.y)[i]

    x_train = property(lambda self: self._array("train", 0), doc="Training features (in-memory sources).")
    y_train = property(lambda self: self._array("train", 1), doc="Training labels (in-memory sources).")
    x_val = property(lambda self: self._array("val", 0), doc="Validation features (in-memory sources).")
    y_val = property(lambda self: self._array("val", 1), doc="Validation labels (in-memory sources).")
    x_test = property(lambda self: self._array("test", 0), doc="Test features (in-memory sources).")
    y_test = property(lambda self: self._array("test", 1), doc="Test labels (in-memory sources).")


def fingerprint(ds: Dataset) -> str:
    """SHA-256 (hex) identifying every split's content, train then validation then test.

    In-memory splits contribute their arrays' raw bytes, shapes and dtypes (so digits keeps
    the fingerprint it always had); Parquet splits contribute their files' footers (row
    counts, schema, per-column statistics, sizes), their row groups and how they are read
    (see :meth:`distbench.data.parquet.ParquetSplit.hash_into`), not paths or times, so
    two hosts with copies of the same files agree, and it costs one small read per file.
    It detects a changed row count, schema, column statistic (min, max, nulls) or size,
    not a value rewritten in place that leaves all of those equal; the exact content
    digest is :meth:`Dataset.content_sha256`, computed once per run when the workload is
    created. The workload stores both and every configuration checks this one.
    """
    h = hashlib.sha256()
    for split in (ds.train, ds.val, ds.test):
        split.hash_into(h)
    return h.hexdigest()
