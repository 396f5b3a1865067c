"""Write a synthetic Parquet image dataset of a given size, streaming; optionally read it back.

The dataset is what ``[data] name = "parquet"`` reads: a ``features`` column of
fixed-size lists (one 32x32x3 image per row, float32 in [0, 1] or uint8) and an int64
``label`` column, in row groups of ``--rows-per-group`` rows, over ``--files`` files.
Each row group is generated from its own seeded generator and written at once, so the
writer holds one row group, whatever the total size (a 3 GB dataset is written on a
machine with far less free memory). Images are learnable: each is half a fixed random
pattern of its class and half noise.

``--read`` streams the training split through
:func:`distbench.training.schedule.replica_batches` (one block at a time) and reports
the rows per second and the process's peak resident memory (``VmHWM``), which must stay
far below the data size; run it alone (without ``--gb``/``--rows``) so the peak is the
reader's, not the writer's.

Usage::

    python benchmarks/make_parquet.py OUT_DIR --gb 3 --rows-per-group 8192 [--dtype uint8]
    python benchmarks/make_parquet.py OUT_DIR --read [--global-batch 256 --world-size 2]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

SHAPE = (32, 32, 3)


def peak_rss_bytes() -> int:
    """This process's peak resident set size (``VmHWM`` in ``/proc/self/status``), bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def row_group(index: int, rows: int, seed: int, classes: int, dtype: str,
              shape: tuple[int, ...] = SHAPE) -> Any:
    """Row group ``index`` of the synthetic dataset: a ``pyarrow.Table`` of ``rows`` rows.

    Args:
        index: the row group's number (with ``seed``, it seeds the group's generator).
        rows: rows in the group.
        seed: the dataset's seed.
        classes: number of classes.
        dtype: ``float32`` (values in [0, 1]) or ``uint8`` (0..255).
        shape: one image's shape.

    Returns:
        A table with ``features`` (fixed-size list of ``prod(shape)`` values) and ``label`` (int64).
    """
    import pyarrow as pa

    size = math.prod(shape)
    half_patterns = np.float32(0.5) * np.random.default_rng([seed, 0]).random((classes, size), dtype=np.float32)
    rng = np.random.default_rng([seed, 1, index])
    y = rng.integers(0, classes, rows)
    x = rng.random((rows, size), dtype=np.float32)
    x *= 0.5
    x += half_patterns[y]
    if dtype == "uint8":
        x = (x * 255).astype(np.uint8)
    feats = pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), size)
    return pa.table({"features": feats, "label": pa.array(y, pa.int64())})


def write_synthetic_parquet(out: str | Path, *, gb: float | None = None, rows: int | None = None,
                            rows_per_group: int = 4096, files: int = 1, dtype: str = "float32",
                            classes: int = 10, seed: int = 0, compression: str = "none",
                            shape: tuple[int, ...] = SHAPE) -> dict[str, Any]:
    """Write the synthetic dataset into directory ``out`` (``part-00000.parquet``, ...), one row group at a time.

    Args:
        out: directory to create (must not hold ``part-*.parquet`` files already).
        gb: feature bytes to write, in units of 1e9 bytes (rows = gb * 1e9 / bytes per image).
        rows: rows to write instead of ``gb``.
        rows_per_group: rows per row group (the last group of each file may be smaller).
        files: number of files the rows are spread over.
        dtype: ``float32`` or ``uint8`` features.
        classes: number of classes.
        seed: seed of every generator.
        compression: Parquet compression codec (``none``, ``snappy``, ``zstd``, ...).
        shape: one image's shape.

    Returns:
        ``{"rows", "row_groups", "files", "bytes", "seconds", "peak_rss_bytes"}``.

    Raises:
        ValueError: neither or both of ``gb`` and ``rows``; ``out`` already holds parts.
    """
    import pyarrow.parquet as pq

    if (gb is None) == (rows is None):
        raise ValueError("give exactly one of gb and rows")
    per_row = math.prod(shape) * np.dtype(dtype).itemsize
    total = rows if rows is not None else max(1, int(gb * 1e9 // per_row))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if any(out.glob("part-*.parquet")):
        raise ValueError(f"{out} already holds part-*.parquet files")
    t0 = time.perf_counter()
    group, written = 0, 0
    bounds = np.linspace(0, total, files + 1).astype(np.int64)
    for f in range(files):
        n_file = int(bounds[f + 1] - bounds[f])
        if not n_file:
            continue
        table = row_group(group, min(rows_per_group, n_file), seed, classes, dtype, shape)
        with pq.ParquetWriter(out / f"part-{f:05d}.parquet", table.schema, compression=compression,
                              use_dictionary=["label"]) as w:  # random pixels never repeat
            done = 0
            while done < n_file:
                k = min(rows_per_group, n_file - done)
                if done:
                    table = row_group(group, k, seed, classes, dtype, shape)
                w.write_table(table, row_group_size=k)
                done, group, written = done + k, group + 1, written + k
    size = sum(p.stat().st_size for p in out.glob("part-*.parquet"))
    return {"rows": written, "row_groups": group, "files": files, "bytes": size,
            "seconds": time.perf_counter() - t0, "peak_rss_bytes": peak_rss_bytes()}


def read_back(out: str | Path, global_batch: int, world_size: int, epochs: int = 1) -> dict[str, Any]:
    """Stream ``out`` as ``[data] name = "parquet"`` through ``replica_batches`` (rank 0) and time it.

    Returns:
        ``{"train_rows", "blocks", "batches", "seconds", "rows_per_s", "peak_rss_bytes", "validate_s"}``.
    """
    from distbench.config import DataConfig
    from distbench.data import load_dataset
    from distbench.training.schedule import replica_batches

    cfg = DataConfig(name="parquet", path=str(out), features_col="features", label_col="label",
                     feature_shape=list(SHAPE))
    t0 = time.perf_counter()
    ds = load_dataset(cfg, seed=0)
    open_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ds.validate()
    validate_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    batches = rows = 0
    for x, _ in replica_batches(ds.train, epochs, 0, global_batch, 0, world_size):
        batches, rows = batches + 1, rows + len(x)
    secs = time.perf_counter() - t0
    return {"train_rows": len(ds.train), "test_rows": len(ds.test), "blocks": ds.train.num_blocks,
            "batches": batches, "open_s": open_s, "validate_s": validate_s, "seconds": secs,
            "rows_per_s": rows / secs if secs else 0.0, "peak_rss_bytes": peak_rss_bytes()}


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="directory to write part-*.parquet into")
    ap.add_argument("--gb", type=float, default=None, help="feature bytes to write (1e9 bytes)")
    ap.add_argument("--rows", type=int, default=None, help="rows to write (instead of --gb)")
    ap.add_argument("--rows-per-group", type=int, default=4096)
    ap.add_argument("--files", type=int, default=1)
    ap.add_argument("--dtype", choices=("float32", "uint8"), default="float32")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--compression", default="none")
    ap.add_argument("--read", action="store_true", help="then stream it back and report peak memory")
    ap.add_argument("--global-batch", type=int, default=256)
    ap.add_argument("--world-size", type=int, default=2)
    a = ap.parse_args(argv)
    if a.gb is None and a.rows is None and not a.read:
        ap.error("give --gb or --rows to write, and/or --read")
    res = {}
    if a.gb is not None or a.rows is not None:
        res["write"] = write_synthetic_parquet(a.out, gb=a.gb, rows=a.rows, rows_per_group=a.rows_per_group,
                                               files=a.files, dtype=a.dtype, classes=a.classes,
                                               compression=a.compression)
    if a.read:
        res["read"] = read_back(a.out, a.global_batch, a.world_size)
    json.dump(res, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
