"""Datasets: the embedded digits and breast-cancer defaults, MNIST/Fashion-MNIST from local
files, synthetic images, your own arrays (``.npz``) and Parquet files; a deterministic
stratified split; sharding by rank; the dataset fingerprint.

Every loader returns a :class:`Dataset` of three :class:`Split` s whose blocks are
float32 features of shape ``(rows, *input_shape)`` and int32 class indices ``(rows,)``.
In-memory datasets also expose their arrays (``x_train``, ``y_train``, ...); Parquet
splits are read one row group at a time.
"""

from __future__ import annotations

from distbench.data.base import DataError, shard, split_stratified
from distbench.data.dataset import Dataset, fingerprint
from distbench.data.loaders import load_dataset
from distbench.data.splits import ArraySplit, Split

__all__ = ["ArraySplit", "Dataset", "DataError", "Split", "fingerprint", "load_dataset", "shard",
           "split_stratified"]
