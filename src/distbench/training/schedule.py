"""The batch schedule shared by every strategy.

Each epoch the training split is permuted with a generator seeded by ``(seed, epoch)``;
step ``s`` uses the global batch ``perm[s*G:(s+1)*G]`` (``G`` = global batch size) and
replica ``r`` of ``N`` takes the ``r``-th contiguous ``G/N`` slice of it. The incomplete
last batch is dropped, so every strategy runs ``n_train // G`` optimizer steps per epoch
on exactly the same samples.

The same rule streams over a :class:`~distbench.data.splits.Split` read block by block
(:func:`replica_batches`, :func:`shard_batches`): an in-memory split's order is the
permutation above; a block split (Parquet row groups) permutes its blocks with a seeded
generator, cuts that order into **shuffle windows** of consecutive blocks holding at most
:data:`SHUFFLE_BYTES` of features (at least one block each), and permutes the rows of each
window across all its blocks. A table stored one class per file (Spark's
``partitionBy("label")``, pandas' ``partition_cols``) thus trains on mixed batches: a
window holds several classes, and a dataset under the budget is one window, shuffled as
if in memory. Memory: one window.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

SHUFFLE_BYTES = 128 << 20
"""The most features (bytes, decoded) one shuffle window of a block split holds: as much as
one block of a large row group (:data:`distbench.data.parquet.BLOCK_BYTES`), so a window
never holds more than the largest block did (the 3 GB benchmark's peaks stay below half)."""


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


def epoch_blocks(split: Any, epoch: int, seed: int) -> np.ndarray:
    """The order ``epoch`` visits ``split``'s blocks: ``default_rng([seed, epoch]).permutation(blocks)``.

    An in-memory split is one block (order ``[0]``). Returns int64 block indices.
    """
    if split.in_memory:
        return np.arange(split.num_blocks, dtype=np.int64)
    return np.random.default_rng([seed, epoch]).permutation(split.num_blocks)


def windows(sizes: Sequence[int], row_bytes: int, budget: int = 0) -> list[list[int]]:
    """Positions ``0..len(sizes)-1`` cut into consecutive groups of at most ``budget`` bytes
    (``sizes[i] x row_bytes`` each; a group holds at least one; default :data:`SHUFFLE_BYTES`)."""
    budget = budget or SHUFFLE_BYTES
    groups: list[list[int]] = []
    held = budget + 1
    for i, size in enumerate(sizes):
        b = int(size) * row_bytes
        if groups and held + b <= budget:
            groups[-1].append(i)
            held += b
        else:
            groups.append([i])
            held = b
    return groups


def _row_bytes(split: Any) -> int:
    return 4 * max(1, int(np.prod(split.sample_shape)))


def epoch_stream(split: Any, epoch: int, seed: int) -> Iterator[tuple[list[int], np.ndarray]]:
    """``epoch``'s stream as ``(blocks of a window, row order)``, one window at a time: the
    row order indexes the window's blocks' rows concatenated in the order given.

    In-memory split: one window, :func:`epoch_permutation` of all its rows. Block split: the
    blocks in :func:`epoch_blocks`' order cut into :func:`windows`; window ``w``'s rows
    permuted by ``default_rng([seed, epoch, w])``.
    """
    if split.in_memory:
        yield [0], epoch_permutation(len(split), epoch, seed)
        return
    order = [int(b) for b in epoch_blocks(split, epoch, seed)]
    sizes = split.block_sizes()
    for w, group in enumerate(windows([sizes[b] for b in order], _row_bytes(split))):
        blocks = [order[i] for i in group]
        yield blocks, np.random.default_rng([seed, epoch, w]).permutation(int(sum(sizes[b] for b in blocks)))


def _gather(parts: list[tuple[np.ndarray, np.ndarray]], offsets: np.ndarray, idx: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``idx`` (positions in the blocks' rows concatenated) of the blocks ``parts``, in that order."""
    if len(parts) == 1:
        return parts[0][0][idx], parts[0][1][idx]
    which = np.searchsorted(offsets, idx, side="right") - 1
    x = np.empty((len(idx), *parts[0][0].shape[1:]), parts[0][0].dtype)
    y = np.empty(len(idx), parts[0][1].dtype)
    for k in np.unique(which):
        m = which == k
        x[m], y[m] = parts[k][0][idx[m] - offsets[k]], parts[k][1][idx[m] - offsets[k]]
    return x, y


def _chunks(split: Any, pieces: Iterator[tuple[list[int], int, int, Any]], take: Any,
            batch: int, select: Any = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Cut the rows ``take`` selects from a stream of pieces into batches of ``batch`` rows.

    Args:
        split: the split the pieces' blocks belong to.
        pieces: ``(blocks, start, size, rows)`` in stream order: ``size`` rows occupying
            stream positions ``[start, start + size)``; ``rows()`` returns their positions
            in the blocks' rows (after ``select``) concatenated, in stream order (called
            only when the piece has selected positions).
        take: ``take(start, size)`` -> offsets (ascending, in ``[0, size)``) of the positions
            this reader takes.
        batch: rows per yielded batch.
        select: ``select(block, x, y) -> (x, y)``: the rows of a block the stream uses
            (default: all).

    Yields:
        ``(x, y)`` batches of exactly ``batch`` rows (a trailing partial batch is not yielded),
        holding at most one window and one batch in memory.
    """
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    have = 0
    for blocks, start, size, rows in pieces:
        offsets_taken = take(start, size)
        if not len(offsets_taken):
            continue
        parts = [split.read_block(b) for b in blocks]
        if select is not None:
            parts = [select(b, *p) for b, p in zip(blocks, parts)]
        offsets = np.concatenate([[0], np.cumsum([len(p[1]) for p in parts])[:-1]]).astype(np.int64)
        idx = rows()[offsets_taken]
        i = 0
        while i < len(idx):
            x, y = _gather(parts, offsets, idx[i:i + batch - have])
            xs.append(x)
            ys.append(y)
            have += len(y)
            i += len(y)
            if have == batch:
                yield (xs[0], ys[0]) if len(xs) == 1 else (np.concatenate(xs), np.concatenate(ys))
                xs, ys, have = [], [], 0
        del parts


def _epoch_pieces(split: Any, epoch: int, seed: int) -> Iterator[tuple[list[int], int, int, Any]]:
    start = 0
    for blocks, rows in epoch_stream(split, epoch, seed):
        yield blocks, start, len(rows), (lambda rows=rows: rows)
        start += len(rows)


def replica_batches(split: Any, epochs: int, seed: int, global_batch: int, rank: int | Sequence[int],
                    world_size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Replica ``rank``'s per-replica batches ``(x, y)`` of every global step, in order.

    Global batch ``s`` of an epoch is rows ``[s*G, (s+1)*G)`` of that epoch's stream
    (:func:`epoch_stream`); the last partial global batch is dropped (``n // G`` steps);
    replica ``r`` of ``N`` takes the ``r``-th ``G/N`` slice. For an in-memory split this is
    exactly ``gather(replica_indices(n, G, epochs, seed, [rank], N))``. Reads one shuffle
    window at a time: memory is O(window + per-replica batch).

    Args:
        split: a :class:`~distbench.data.splits.Split`.
        epochs: number of epochs.
        seed: the run's seed.
        global_batch: ``G``, samples per optimizer step over all replicas.
        rank: the replica (global index), or several replicas fed by one input pipeline:
            then each step yields their batches in the order given.
        world_size: ``N``, replicas in sync.

    Yields:
        ``(x, y)``: float32 ``(G/N, *sample_shape)`` and int32 ``(G/N,)``;
        ``epochs * (n // G) * len(ranks)`` batches in all.

    Raises:
        ValueError: ``G`` not in ``1..n``, not divisible by ``N``, or a rank outside ``0..N-1``.
    """
    n = len(split)
    ranks = [rank] if isinstance(rank, (int, np.integer)) else [int(r) for r in rank]
    if not 1 <= global_batch <= n:
        raise ValueError(f"global batch {global_batch} must be in 1..{n} (training samples)")
    if global_batch % world_size or not ranks or len(set(ranks)) < len(ranks) \
            or any(not 0 <= r < world_size for r in ranks):
        raise ValueError(f"cannot give ranks {ranks} of {world_size} equal shares of {global_batch} samples")
    B, used = global_batch // world_size, (n // global_batch) * global_batch
    wanted = np.zeros(world_size, dtype=bool)
    wanted[ranks] = True

    def take(start: int, size: int) -> np.ndarray:
        pos = np.arange(start, min(start + size, used))
        return pos[wanted[(pos % global_batch) // B]] - start

    order = np.argsort(ranks)  # chunks come in ascending rank order within each step
    for epoch in range(epochs):
        step: list[tuple[np.ndarray, np.ndarray]] = []
        for batch in _chunks(split, _epoch_pieces(split, epoch, seed), take, B):
            step.append(batch)
            if len(step) == len(ranks):
                out = [None] * len(ranks)
                for k, i in enumerate(order):
                    out[i] = step[k]
                yield from out
                step = []


def shard_bounds(n: int, shard: int, num_shards: int) -> tuple[int, int]:
    """Rows ``[lo, hi)`` of shard ``shard`` of ``num_shards`` over ``n`` rows (``np.array_split``'s bounds).

    Raises:
        ValueError: ``shard`` is not in ``[0, num_shards)``.
    """
    if not 0 <= shard < num_shards:
        raise ValueError(f"rank {shard} is outside 0..{num_shards - 1} (world size {num_shards})")
    q, r = divmod(n, num_shards)
    lo = shard * q + min(shard, r)
    return lo, lo + q + (shard < r)


def shard_indices(n: int, epochs: int, seed: int, batch: int, shard: int, num_shards: int,
                  steps_per_epoch: int) -> np.ndarray:
    """The rows, in order, of :func:`shard_batches` over an in-memory split of ``n`` rows:
    batch ``k`` of the run is ``x[idx[k*batch:(k+1)*batch]]`` (a replica gathers them in its
    input pipeline instead of Python handing it one batch per step).

    Args:
        n: rows in the split.
        epochs, seed, batch, shard, num_shards, steps_per_epoch: as :func:`shard_batches`.

    Returns:
        int64 row numbers, shape ``(epochs * steps_per_epoch * batch,)``, all within the
        shard's rows :func:`shard_bounds`.

    Raises:
        ValueError: as :func:`shard_batches`.
    """
    lo, hi = shard_bounds(n, shard, num_shards)
    if steps_per_epoch * batch > hi - lo or batch < 1:
        raise ValueError(f"shard {shard} holds {hi - lo} rows, fewer than {steps_per_epoch} batches of {batch}")
    used = steps_per_epoch * batch
    return np.concatenate([lo + np.random.default_rng([seed, epoch, shard]).permutation(hi - lo)[:used]
                           for epoch in range(epochs)] or [np.zeros(0, np.int64)]).astype(np.int64)


def shard_batches(split: Any, epochs: int, seed: int, batch: int, shard: int, num_shards: int,
                  steps_per_epoch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """A parameter-server replica's local batches: ``steps_per_epoch`` per epoch from its shard.

    An in-memory split's shard is the contiguous row range :func:`shard_bounds` (as
    :func:`distbench.data.shard`; its rows were shuffled by the stratified split), and each
    epoch permutes it with ``default_rng([seed, epoch, shard]).permutation(shard rows)``.
    A block split's rows are in storage order, which is often sorted by label (a Spark
    table partitioned by its label is one class per file), so a contiguous range would
    give a replica one class: its shard is the rows whose storage position ``p`` has
    ``p % num_shards == shard`` (:func:`shard_bounds`'s row count, a share of every block);
    each epoch orders its pieces of blocks by ``default_rng([seed, epoch, shard])``, cuts
    that order into :func:`windows`, and permutes window ``w``'s rows (across its blocks)
    with ``default_rng([seed, epoch, shard, w])``. Batch ``s`` is positions
    ``[s*batch, (s+1)*batch)`` of that order. Memory is O(window + batch).

    Args:
        split: a :class:`~distbench.data.splits.Split`.
        epochs: number of epochs.
        seed: the run's seed.
        batch: rows per local batch (the per-replica batch).
        shard, num_shards: this replica's shard and the number of shards.
        steps_per_epoch: local batches per epoch.

    Yields:
        ``(x, y)`` batches of ``batch`` rows, ``epochs * steps_per_epoch`` in all.

    Raises:
        ValueError: the shard holds fewer than ``steps_per_epoch * batch`` rows, or ``shard`` is out of range.
    """
    lo, hi = shard_bounds(len(split), shard, num_shards)
    if steps_per_epoch * batch > hi - lo or batch < 1:
        raise ValueError(f"shard {shard} holds {hi - lo} rows, fewer than {steps_per_epoch} batches of {batch}")
    sizes = [int(s) for s in split.block_sizes()]
    pieces = []  # (block, the shard's rows in it) in storage order
    if split.in_memory:
        pieces.append((0, np.arange(lo, hi)))
    else:
        begin = 0
        for b, size in enumerate(sizes):
            rows = np.arange((shard - begin) % num_shards, size, num_shards)
            if len(rows):
                pieces.append((b, rows))
            begin += size
    used = steps_per_epoch * batch
    if not used:
        return

    def take(start: int, size: int) -> np.ndarray:
        return np.arange(0, max(0, min(size, used - start)))

    mine = dict(pieces)

    def select(b: int, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return x[mine[b]], y[mine[b]]

    for epoch in range(epochs):
        gen = np.random.default_rng([seed, epoch, shard])
        if split.in_memory:  # one block: the permutation of the shard's rows
            ((b, rows),) = pieces
            perm = gen.permutation(len(rows))
            yield from _chunks(split, iter([([b], 0, len(rows), lambda r=rows, p=perm: r[p])]), take, batch)
            continue
        order = [pieces[k] for k in gen.permutation(len(pieces))]
        stream, start = [], 0
        for w, group in enumerate(windows([len(order[i][1]) for i in range(len(order))], _row_bytes(split))):
            blocks = [order[i][0] for i in group]
            n = sum(len(mine[b]) for b in blocks)
            stream.append((blocks, start, n, lambda n=n, w=w, epoch=epoch: np.random.default_rng(
                [seed, epoch, shard, w]).permutation(n)))
            start += n
        yield from _chunks(split, iter(stream), take, batch, select)
