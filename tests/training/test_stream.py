"""The batch schedule over splits read block by block: same order as today for in-memory
data, the same global batches for any replica count, shards covered, one block at a time."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from distbench.config import DataConfig
from distbench.data import ArraySplit, load_dataset, shard
from distbench.training.schedule import (epoch_blocks, epoch_permutation, epoch_stream, replica_batches,
                                         replica_indices, shard_batches, shard_bounds,
                                         shard_indices)


def _array_split(n=203, features=3):
    x = np.arange(n * features, dtype=np.float32).reshape(n, features)
    return ArraySplit(x, np.arange(n, dtype=np.int32))  # y = the row number: batches show their rows


def _parquet_split(tmp_path, n=1000, group=90):
    x = np.repeat(np.arange(n, dtype=np.float32)[:, None], 2, axis=1)
    p = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"features": pa.array(list(x)), "label": np.arange(n) % 4}), p, row_group_size=group)
    ds = load_dataset(DataConfig(name="parquet", path=str(p), features_col="features", label_col="label"), seed=0)
    return ds.train  # x[:, 0] is the stored row number


class CountingSplit(ArraySplit):
    """An in-memory split whose one block is read through a counter (the stream must read it once per epoch)."""

    reads = 0

    def read_block(self, i):
        CountingSplit.reads += 1
        return super().read_block(i)


def test_in_memory_stream_is_todays_permutation():
    s = _array_split()
    for epoch in range(3):
        ((blocks, rows),) = list(epoch_stream(s, epoch, seed=11))
        assert blocks == [0] and rows.tolist() == epoch_permutation(len(s), epoch, 11).tolist()


@pytest.mark.parametrize("world,ranks", [(1, [0]), (2, [1]), (4, [2, 3]), (4, [3, 1])])
def test_in_memory_replica_batches_equal_replica_indices_and_gather(world, ranks):
    s = _array_split()
    G, epochs, seed = 32, 3, 5
    got = list(replica_batches(s, epochs, seed, G, ranks if len(ranks) > 1 else ranks[0], world))
    B = G // world
    if sorted(ranks) == ranks:  # replica_indices feeds ascending replicas of one pipeline
        idx = replica_indices(len(s), G, epochs, seed, ranks, world).reshape(-1, B)
    else:
        idx = np.stack([replica_indices(len(s), G, epochs, seed, [r], world).reshape(-1, B) for r in ranks], 1)
        idx = idx.reshape(-1, B)
    assert len(got) == len(idx) == epochs * (len(s) // G) * len(ranks)
    for (x, y), i in zip(got, idx):
        np.testing.assert_array_equal(x, s.x[i])
        np.testing.assert_array_equal(y, s.y[i])


def _global_batches(split, world, G=40, epochs=2, seed=3):
    per_rank = [list(replica_batches(split, epochs, seed, G, r, world)) for r in range(world)]
    return [np.concatenate([per_rank[r][k][0][:, 0] for r in range(world)]) for k in range(len(per_rank[0]))]


@pytest.mark.parametrize("kind", ["array", "parquet"])
def test_global_batches_do_not_depend_on_the_replica_count(tmp_path, kind):
    split = _array_split(n=1000, features=2) if kind == "array" else _parquet_split(tmp_path)
    one = _global_batches(split, 1)
    assert len(one) == 2 * (len(split) // 40)
    for world in (2, 4):
        assert all((a == b).all() for a, b in zip(one, _global_batches(split, world)))
    if kind == "parquet":  # each epoch: blocks in a seeded order, rows permuted across each window of blocks
        ends = np.cumsum(split.block_sizes())
        stored = np.concatenate([split.read_block(b)[0][:, 0] for b in range(split.num_blocks)])
        order = np.concatenate([np.concatenate([np.arange(ends[b] - split.block_sizes()[b], ends[b])
                                                for b in blocks])[rows] for blocks, rows in epoch_stream(split, 0, 3)])
        steps = len(split) // 40
        assert np.concatenate(one[:steps]).tolist() == stored[order[:steps * 40]].tolist()
        assert epoch_blocks(split, 0, 3).tolist() != epoch_blocks(split, 1, 3).tolist()
        assert sorted(np.concatenate(one[:steps]).tolist()) != np.concatenate(one[:steps]).tolist()


def schedule_windows_of(split, blocks_per_window):
    """epoch_stream with a shuffle budget of ``blocks_per_window`` full blocks."""
    import distbench.training.schedule as sch

    saved = sch.SHUFFLE_BYTES
    sch.SHUFFLE_BYTES = blocks_per_window * int(split.block_sizes().max()) * 4 * int(np.prod(split.sample_shape))
    try:
        return list(sch.epoch_stream(split, 0, 0))
    finally:
        sch.SHUFFLE_BYTES = saved


def test_replica_batches_reads_each_block_once_per_epoch(tmp_path):
    split = _parquet_split(tmp_path)
    reads = []
    original = split.read_block
    split.read_block = lambda i: (reads.append(i), original(i))[1]
    list(replica_batches(split, 2, 0, 40, 1, 2))
    expected = []  # per epoch, in stream order, the blocks of the windows holding positions of rank 1 (of 2)
    used = len(split) // 40 * 40
    for epoch in range(2):
        start, needed = 0, []
        for blocks, rows in epoch_stream(split, epoch, 0):
            pos = np.arange(start, min(start + len(rows), used))
            if ((pos % 40) // 20 == 1).any():
                needed += blocks
            start += len(rows)
        assert len(set(needed)) == len(needed) == split.num_blocks  # each block once (one window here)
        assert needed == epoch_blocks(split, epoch, 0).tolist()
        expected += needed
    assert reads == expected
    monkey = schedule_windows_of(split, 3)  # a budget of 3 blocks: windows of 3 consecutive blocks
    assert [len(b) for b, _ in monkey] == [3] * (split.num_blocks // 3) + ([split.num_blocks % 3] if split.num_blocks % 3 else [])
    CountingSplit.reads = 0
    s = CountingSplit(*(lambda a: (a.x, a.y))(_array_split()))
    list(replica_batches(s, 3, 0, 32, 0, 2))
    assert CountingSplit.reads == 3


def test_replica_batches_bad_arguments():
    s = _array_split(n=10)
    with pytest.raises(ValueError, match="global batch 11 must be in 1..10"):
        next(replica_batches(s, 1, 0, 11, 0, 1))
    with pytest.raises(ValueError, match="cannot give ranks \\[2\\] of 2 equal shares"):
        next(replica_batches(s, 1, 0, 4, 2, 2))


def test_shard_batches_in_memory_equal_todays_replica_order():
    s = _array_split(n=203)
    seed, N, B, steps = 9, 3, 16, 4
    for wid in range(N):
        x, y = shard(s.x, s.y, wid, N)
        got = list(shard_batches(s, 2, seed, B, wid, N, steps))
        assert len(got) == 2 * steps
        for epoch in range(2):
            perm = np.random.default_rng([seed, epoch, wid]).permutation(len(y))  # ps_async/worker.py today
            for k in range(steps):
                idx = perm[k * B:(k + 1) * B]
                np.testing.assert_array_equal(got[epoch * steps + k][0], x[idx])
                np.testing.assert_array_equal(got[epoch * steps + k][1], y[idx])


def test_shard_indices_gather_exactly_shard_batches():
    s = _array_split(n=203)
    for seed, N, B, steps, wid in [(9, 3, 16, 4, 0), (9, 3, 16, 4, 2), (1, 1, 7, 29, 0)]:
        idx = shard_indices(len(s), 3, seed, B, wid, N, steps)
        got = list(shard_batches(s, 3, seed, B, wid, N, steps))
        assert len(idx) == len(got) * B
        for k, (x, y) in enumerate(got):
            np.testing.assert_array_equal(s.x[idx[k * B:(k + 1) * B]], x)
            np.testing.assert_array_equal(s.y[idx[k * B:(k + 1) * B]], y)
    with pytest.raises(ValueError, match="shard 2 holds 67 rows, fewer than 5 batches of 16"):
        shard_indices(203, 1, 0, 16, 2, 3, 5)


def test_shard_batches_cover_the_shard_of_a_block_split(tmp_path):
    split = _parquet_split(tmp_path)
    N = 3
    stored = np.concatenate([split.read_block(b)[0][:, 0] for b in range(split.num_blocks)])
    for wid in range(N):
        lo, hi = shard_bounds(len(split), wid, N)
        assert (lo, hi) == (lambda r: (r[0], r[-1] + 1))(np.array_split(np.arange(len(split)), N)[wid])
        B = 10
        steps = (hi - lo) // B
        got = list(shard_batches(split, 2, 4, B, wid, N, steps))
        epochs = [np.concatenate([x[:, 0] for x, _ in got[e * steps:(e + 1) * steps]]) for e in range(2)]
        mine = stored[wid::N]  # every N-th row in storage order: a share of every block
        assert len(mine) == hi - lo
        for rows in epochs:
            assert len(set(rows.tolist())) == steps * B  # no row twice in an epoch
            assert set(rows.tolist()) <= set(mine.tolist())  # only the shard's rows
        assert epochs[0].tolist() != epochs[1].tolist()
        full = list(shard_batches(split, 1, 4, 1, wid, N, hi - lo))  # batch 1: the whole shard, each row once
        assert sorted(np.concatenate([x[:, 0] for x, _ in full]).tolist()) == sorted(mine.tolist())
    with pytest.raises(ValueError, match=f"shard 0 holds {shard_bounds(len(split), 0, 3)[1]} rows, fewer than 40 "
                                         "batches of 10"):
        next(shard_batches(split, 1, 0, 10, 0, 3, 40))


def test_a_replica_of_a_label_sorted_table_sees_every_class(tmp_path):
    # a table partitioned by its label is stored one class after another: a contiguous
    # shard gave each parameter-server replica one or two classes (issue 33)
    n, classes = 800, 4
    p = tmp_path / "sorted.parquet"
    y = np.repeat(np.arange(classes), n // classes)
    pq.write_table(pa.table({"features": pa.array(list(np.ones((n, 2), np.float32))), "label": y}), p,
                   row_group_size=50)
    split = load_dataset(DataConfig(name="parquet", path=str(p), features_col="features", label_col="label"),
                         seed=0).train
    stored = np.bincount(np.concatenate([split.read_block(b)[1] for b in range(split.num_blocks)]),
                         minlength=classes)
    assert (stored > 0).all()
    for wid in range(2):
        rows = shard_bounds(len(split), wid, 2)
        labels = np.concatenate([y for _, y in shard_batches(split, 1, 0, 1, wid, 2, rows[1] - rows[0])])
        np.testing.assert_allclose(np.bincount(labels, minlength=classes), stored / 2, atol=1)
    # the synchronous strategies' global batches mix the classes too (user test: one class per
    # file trained single and horovod to chance, 0.109, when rows were shuffled only inside a block)
    for _x, y in list(replica_batches(split, 1, 0, 32, 0, 1))[:5]:
        assert len(np.unique(y)) == classes, np.bincount(y)
