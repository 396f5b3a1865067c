"""Datasets: the embedded digits default, MNIST/Fashion-MNIST from local files, and
synthetic images; a deterministic stratified split; and sharding by rank.

Every loader returns a :class:`Dataset` whose arrays are float32 images of shape
``(n, H, W, C)`` scaled to [0, 1] and int32 labels of shape ``(n,)``.
"""

from __future__ import annotations

from distbench.data.base import Dataset, DataError, fingerprint, shard, split_stratified
from distbench.data.loaders import load_dataset

__all__ = ["Dataset", "DataError", "fingerprint", "load_dataset", "shard", "split_stratified"]
