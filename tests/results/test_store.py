"""Record writing and reading, including torn lines."""

from __future__ import annotations

import json
import math

import pytest

from distbench.results.records import REQUIRED_KEYS, config_id, new_record, time_to_target
from distbench.results.store import RESULTS_FILE, append_record, read_records


def test_new_record_has_every_required_key():
    r = new_record("run1", "spark_ps:adag", 2, 0, "unavailable", reason="no java")
    assert set(REQUIRED_KEYS) <= set(r)
    assert r["config_id"] == "spark_ps-adag_w2" == config_id("spark_ps:adag", 2)
    with pytest.raises(ValueError):
        new_record("run1", "single", 1, 0, "weird")


def test_append_and_read(tmp_path):
    append_record(tmp_path, new_record("r", "single", 1, 0, "ok", final_test_loss=math.nan))
    append_record(tmp_path, new_record("r", "mirrored", 2, 0, "failed", reason="boom"))
    recs = read_records(tmp_path)
    assert [r["strategy"] for r in recs] == ["single", "mirrored"]
    assert recs[0]["final_test_loss"] is None  # NaN is not JSON: stored as null


def test_torn_last_line_is_dropped_then_truncated(tmp_path, caplog):
    append_record(tmp_path, new_record("r", "single", 1, 0, "ok"))
    with open(tmp_path / RESULTS_FILE, "a") as f:
        f.write('{"run_id": "r", "strat')  # writer killed mid-line
    assert len(read_records(tmp_path)) == 1
    assert "torn" in caplog.text
    read_records(tmp_path)  # a resume reads the file several times: one warning, not three
    assert caplog.text.count("dropped 1 torn") == 1
    append_record(tmp_path, new_record("r", "mirrored", 2, 0, "ok"))
    lines = (tmp_path / RESULTS_FILE).read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(ln) for ln in lines)


def test_time_to_target():
    curve = [{"elapsed_s": 1.0, "test_accuracy": 0.5}, {"elapsed_s": 2.0, "test_accuracy": 0.91},
             {"elapsed_s": 3.0, "test_accuracy": 0.95}]
    assert time_to_target(curve, 0.9) == 2.0
    assert time_to_target(curve, 0.99) is None


def test_foreign_json_line_is_skipped(tmp_path, caplog):
    append_record(tmp_path, new_record("r", "single", 1, 0, "ok"))
    with open(tmp_path / RESULTS_FILE, "a") as f:
        f.write('{"a": 1}\n')
    append_record(tmp_path, new_record("r", "mirrored", 2, 0, "ok"))
    assert [r["strategy"] for r in read_records(tmp_path)] == ["single", "mirrored"]
    assert "dropped 1 torn or corrupt line(s) (line 2): not valid JSON or not a distbench record" in caplog.text
