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


def test_replica_indices_interleave_local_replicas_over_all_epochs():
    from distbench.training.schedule import replica_indices

    n, G, world = 20, 8, 4
    idx = replica_indices(n, G, epochs=2, seed=3, replicas=[2, 3], world_size=world)
    steps = n // G
    assert idx.shape == (2 * steps * 2 * G // world,)
    expected = []
    for e in range(2):
        for b in epoch_batches(n, G, e, 3):
            expected += replica_slice(b, 2, world).tolist() + replica_slice(b, 3, world).tolist()
    assert idx.tolist() == expected
    # All replicas' pipelines together cover each step's global batch exactly once.
    both = [replica_indices(n, G, 1, 3, [r], world).reshape(steps, G // world) for r in range(world)]
    for s, b in enumerate(epoch_batches(n, G, 0, 3)):
        assert sorted(np.concatenate([p[s] for p in both]).tolist()) == sorted(b.tolist())


def test_gather_dataset_yields_the_indexed_samples():
    pytest.importorskip("tensorflow")
    from distbench.training.tf_loop import gather_dataset

    x = np.arange(30, dtype=np.float32).reshape(10, 3)
    y = np.arange(10, dtype=np.int64)
    got = [(a.numpy(), b.numpy()) for a, b in gather_dataset(np.array([4, 1, 7, 0, 9]), x, y, 2)]
    assert len(got) == 2  # the remainder (index 9) is dropped
    assert got[0][1].tolist() == [4, 1] and got[1][1].tolist() == [7, 0]
    assert (got[0][0] == x[[4, 1]]).all()
