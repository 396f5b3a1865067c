"""Splits: one train, validation or test split, read whole or block by block.

A :class:`Split` is a sequence of rows stored in **blocks** (an in-memory split is one
block; a Parquet split has one block per row group). Readers ask for one block
(:meth:`Split.read_block`) or a contiguous row range (:meth:`Split.read_rows`), so a
split larger than memory is never held whole: a reader holds one block at a time. The
batch schedule (:mod:`distbench.training.schedule`) decides which rows each replica
reads, from :meth:`Split.block_sizes` alone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

import numpy as np


class Split(ABC):
    """Rows ``(x, y)`` stored in blocks: ``x`` float32 ``(rows, *sample_shape)``, ``y`` int32 class indices.

    Attributes:
        in_memory: ``True`` when the rows are one in-memory block (today's arrays); the
            schedule then shuffles rows, otherwise blocks and rows inside each block.
    """

    in_memory: bool = False

    @abstractmethod
    def __len__(self) -> int:
        """Number of rows."""

    @property
    @abstractmethod
    def sample_shape(self) -> tuple[int, ...]:
        """Shape of one sample's features, e.g. ``(32, 32, 3)`` or ``(30,)``."""

    @abstractmethod
    def block_sizes(self) -> np.ndarray:
        """Rows per block in storage order (int64, shape ``(num_blocks,)``; no zero-row blocks)."""

    @abstractmethod
    def read_block(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Block ``i``: ``(x, y)``, x float32 ``(rows, *sample_shape)``, y int32 ``(rows,)``.

        Raises:
            IndexError: ``i`` is not in ``[0, num_blocks)``.
            DataError: the block holds invalid values (Parquet blocks are checked as read).
        """

    @abstractmethod
    def hash_into(self, h: Any) -> None:
        """Feed what identifies this split's content into ``h`` (a ``hashlib`` object)."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """Facts to record about the split (source, rows, blocks), JSON-able."""

    @property
    def num_blocks(self) -> int:
        """Number of blocks."""
        return len(self.block_sizes())

    def iter_blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield every block ``(x, y)`` in storage order (one block in memory at a time)."""
        for i in range(self.num_blocks):
            yield self.read_block(i)

    def read_rows(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``[start, stop)`` in storage order, read from the blocks they span.

        Args:
            start, stop: row numbers, ``0 <= start <= stop <= len(self)``.

        Returns:
            ``(x, y)`` with ``stop - start`` rows.

        Raises:
            ValueError: the range is outside the split.
        """
        if not 0 <= start <= stop <= len(self):
            raise ValueError(f"rows [{start}, {stop}) are outside the split's 0..{len(self)}")
        ends = np.cumsum(self.block_sizes())
        xs, ys = [], []
        first = int(np.searchsorted(ends, start, side="right"))
        for b in range(first, len(ends)):
            lo = int(ends[b - 1]) if b else 0
            if lo >= stop:
                break
            x, y = self.read_block(b)
            xs.append(x[max(start - lo, 0):min(stop, int(ends[b])) - lo])
            ys.append(y[max(start - lo, 0):min(stop, int(ends[b])) - lo])
        if not xs:
            return np.zeros((0, *self.sample_shape), np.float32), np.zeros(0, np.int32)
        return (xs[0], ys[0]) if len(xs) == 1 else (np.concatenate(xs), np.concatenate(ys))


class ArraySplit(Split):
    """An in-memory split: one block wrapping the arrays ``x`` and ``y`` (no copy).

    Args:
        x: float32 features, shape ``(n, *sample_shape)``.
        y: int32 class indices, shape ``(n,)``.
    """

    in_memory = True

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        if x.dtype != np.float32 or y.dtype != np.int32 or len(x) != len(y):
            raise ValueError(f"ArraySplit needs float32 x and int32 y of one length, got x {x.dtype}{x.shape}, "
                             f"y {y.dtype}{y.shape}")
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.y)

    def __repr__(self) -> str:
        return f"ArraySplit({len(self)} rows of {self.sample_shape})"

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.x.shape[1:])

    def block_sizes(self) -> np.ndarray:
        return np.array([len(self)] if len(self) else [], dtype=np.int64)

    def read_block(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        if i != 0 or not len(self):
            raise IndexError(f"block {i} of an in-memory split with {self.num_blocks} block(s)")
        return self.x, self.y

    def read_rows(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        if not 0 <= start <= stop <= len(self):
            raise ValueError(f"rows [{start}, {stop}) are outside the split's 0..{len(self)}")
        return self.x[start:stop], self.y[start:stop]

    def hash_into(self, h: Any) -> None:
        """The arrays' dtype, shape and raw bytes, ``x`` then ``y``."""
        for arr in (self.x, self.y):
            a = np.ascontiguousarray(arr)
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(a.data)  # no copy

    def describe(self) -> dict[str, Any]:
        return {"rows": len(self), "blocks": self.num_blocks, "in_memory": True}


def empty_split(sample_shape: tuple[int, ...]) -> ArraySplit:
    """An in-memory split with no rows and samples of ``sample_shape``."""
    return ArraySplit(np.zeros((0, *sample_shape), np.float32), np.zeros(0, np.int32))

