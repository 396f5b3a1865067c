"""The batch schedule every strategy shares."""

from __future__ import annotations

import numpy as np
import pytest

from distbench.training.schedule import epoch_batches, epoch_order, replica_slice


def test_batches_drop_remainder_and_are_deterministic():
    b1 = list(epoch_batches(10, 3, epoch=0, seed=7))
    b2 = list(epoch_batches(10, 3, epoch=0, seed=7))
    assert len(b1) == 3 and all(len(b) == 3 for b in b1)
    assert all((x == y).all() for x, y in zip(b1, b2))
    assert len(set(np.concatenate(b1).tolist())) == 9
    other = np.concatenate(list(epoch_batches(10, 3, epoch=1, seed=7)))
    assert not (other == np.concatenate(b1)).all()
    assert (epoch_order(10, 3, 0, 7) == np.concatenate(b1)).all()


def test_replica_slices_partition_the_global_batch():
    batch = np.arange(8)
    parts = [replica_slice(batch, r, 4) for r in range(4)]
    assert [p.tolist() for p in parts] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    with pytest.raises(ValueError):
        replica_slice(np.arange(7), 0, 2)
    with pytest.raises(ValueError):
        list(epoch_batches(5, 6, 0, 0))
