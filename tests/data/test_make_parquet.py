"""benchmarks/make_parquet.py: the streaming writer of synthetic Parquet data and its read-back."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from benchmarks.make_parquet import main, write_synthetic_parquet


def test_write_then_read_back(tmp_path, capsys):
    assert main([str(tmp_path / "d"), "--rows", "1000", "--rows-per-group", "300", "--files", "2"]) == 0
    wrote = json.loads(capsys.readouterr().out)["write"]
    assert wrote["rows"] == 1000 and wrote["row_groups"] == 4 and wrote["files"] == 2  # 500 + 500 rows: 300 + 200
    meta = pq.read_metadata(tmp_path / "d" / "part-00001.parquet")
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [300, 200]
    assert main([str(tmp_path / "d"), "--read", "--global-batch", "64", "--world-size", "2"]) == 0
    read = json.loads(capsys.readouterr().out)["read"]
    assert read["train_rows"] + read["test_rows"] == 1000 and read["batches"] == read["train_rows"] // 64
    assert read["peak_rss_bytes"] > 0
    with pytest.raises(ValueError, match="already holds"):
        write_synthetic_parquet(tmp_path / "d", rows=10)
    with pytest.raises(ValueError, match="exactly one of gb and rows"):
        write_synthetic_parquet(tmp_path / "e")
    uint8 = write_synthetic_parquet(tmp_path / "u", gb=0.0001, rows_per_group=8, dtype="uint8")
    assert uint8["rows"] == int(0.0001 * 1e9 // 3072)  # one byte per value
