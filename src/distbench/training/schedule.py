"""The batch schedule shared by every strategy.

Each epoch the training split is permuted with a generator seeded by ``(seed, epoch)``;
step ``s`` uses the global batch ``perm[s*G:(s+1)*G]`` (``G`` = global batch size) and
replica ``r`` of ``N`` takes the ``r``-th contiguous ``G/N`` slice of it. The incomplete
last batch is dropped, so every strategy runs ``n_train // G`` optimizer steps per epoch
on exactly the same samples.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def epoch_permutation(n: int, epoch: int, seed: int) -> np.ndarray:
    """The sample order of ``epoch`` (int64 indices, shape ``(n,)``)."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def epoch_batches(n: int, global_batch: int, epoch: int, seed: int) -> Iterator[np.ndarray]:
    """Yield each step's global-batch indices (shape ``(global_batch,)``) for ``epoch``.

    Raises:
        ValueError: if ``global_batch`` is not in ``1..n``.
    """
    if not 1 <= global_batch <= n:
        raise ValueError(f"global batch {global_batch} must be in 1..{n} (training samples)")
    perm = epoch_permutation(n, epoch, seed)
    for s in range(n // global_batch):
        yield perm[s * global_batch:(s + 1) * global_batch]


def replica_slice(batch: np.ndarray, rank: int, world_size: int) -> np.ndarray:
    """Replica ``rank``'s share of a global batch (``len(batch) // world_size`` items).

    Raises:
        ValueError: the batch does not split evenly or ``rank`` is out of range.
    """
    if len(batch) % world_size or not 0 <= rank < world_size:
        raise ValueError(f"cannot give rank {rank} of {world_size} an equal share of {len(batch)} samples")
    b = len(batch) // world_size
    return batch[rank * b:(rank + 1) * b]


def epoch_order(n: int, global_batch: int, epoch: int, seed: int) -> np.ndarray:
    """All of ``epoch``'s global batches concatenated (shape ``(steps * global_batch,)``)."""
    steps = n // global_batch
    return epoch_permutation(n, epoch, seed)[: steps * global_batch]


def replica_indices(n: int, global_batch: int, epochs: int, seed: int, replicas: list[int],
                    world_size: int) -> np.ndarray:
    """Sample indices for ``replicas`` over all ``epochs``, in the order one input pipeline feeds them.

    For every step of every epoch, the slices of that step's global batch belonging to
    ``replicas`` (global replica indices, in that order) are concatenated, so batching the
    result by ``global_batch // world_size`` yields one per-replica batch after another:
    replica ``replicas[0]``'s batch of step 0, ``replicas[1]``'s batch of step 0, ...

    Args:
        n: training samples.
        global_batch: global batch size (samples per optimizer step).
        epochs: number of epochs.
        seed: the run's seed.
        replicas: the global replica indices this pipeline feeds.
        world_size: total replicas in sync.

    Returns:
        int64 array of shape ``(epochs * (n // global_batch) * len(replicas) * global_batch // world_size,)``.

    Raises:
        ValueError: as :func:`epoch_batches` and :func:`replica_slice`.
    """
    parts = [replica_slice(b, r, world_size)
             for e in range(epochs) for b in epoch_batches(n, global_batch, e, seed) for r in replicas]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
