"""Record writing and reading, including torn lines."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from distbench.results.records import FIELDS, REQUIRED_KEYS, config_id, new_record, schema_markdown, time_to_target
from distbench.results.store import RECORD_KEYS, RESULTS_FILE, append_record, read_records, record_problem


def test_new_record_has_every_required_key():
    r = new_record("run1", "spark_ps:adag", 2, 0, "unavailable", reason="no java")
    assert list(r) == list(REQUIRED_KEYS)  # every key, in the schema's order, nothing else
    assert r["config_id"] == "spark_ps-adag_w2" == config_id("spark_ps:adag", 2)
    assert record_problem(r) is None  # what new_record makes, the store reads
    with pytest.raises(ValueError):
        new_record("run1", "single", 1, 0, "weird")


def test_a_key_the_schema_does_not_define_is_refused_by_the_builder():
    # the schema is defined once: a builder adding a key without defining it fails here
    with pytest.raises(ValueError, match=r"\['speedup'\] are not defined in distbench.results.records.FIELDS"):
        new_record("run1", "single", 1, 0, "ok", speedup=2.0)
    r = new_record("run1", "single", 1, 0, "failed", log_tail="x", failed_process="rank 1")
    assert r["log_tail"] == "x" and list(r)[-1] == "finished_unix"  # optional keys take their place in the order
    assert record_problem(r) is None


def test_docs_record_table_is_the_schema():
    # docs/report.md's key table is generated from FIELDS; a key added to one and not the
    # other fails here (regenerate with `python -m distbench.results.records`)
    text = (Path(__file__).parents[2] / "docs" / "report.md").read_text()
    start, end = "<!-- record-fields:start -->\n", "<!-- record-fields:end -->"
    assert start in text and end in text
    assert text[text.index(start) + len(start):text.index(end)] == schema_markdown()
    assert {f.name for f in FIELDS} >= RECORD_KEYS


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
    assert "dropped 1 torn or corrupt line(s) (line 2: no config_id, repeat, status, strategy, workers)" in caplog.text


@pytest.mark.parametrize("field, value, why", [
    ("final_test_accuracy", "high", "final_test_accuracy = 'high' is not a number in [0, 1]"),
    ("final_test_accuracy", 7.5, "final_test_accuracy = 7.5 is not a number in [0, 1]"),
    ("status", "great", "status = 'great' is not one of ok, failed, timeout, unavailable"),
    ("workers", "2", "workers = '2' is not an integer >= 1"),
    ("workers", True, "workers = True is not an integer >= 1"),
    ("epochs", -1, "epochs = -1 is not an integer >= 0"),
    ("reason", 3, "reason = 3 is not a string"),
    ("hosts", "h1", "hosts = 'h1' is not a list"),
    ("strategy", "", "strategy = '' is not a non-empty string"),
    ("timings", {"train_s": "fast"}, "timings.train_s = 'fast' is not a number >= 0"),
    ("timings", {"phases": {"exit_s": [1]}}, "timings.phases.exit_s = [1] is not a number >= 0"),
    ("curve", [{"elapsed_s": 1.0, "test_accuracy": "x"}], "curve[0].test_accuracy = 'x' is not a number"),
    # helper-33: negative seconds passed, and a -5 s time to target read as "-0.09x faster"
    ("time_to_target_s", -5.0, "time_to_target_s = -5.0 is not a number >= 0"),
    ("timings", {"train_s": -1.0}, "timings.train_s = -1.0 is not a number >= 0"),
    ("curve", [{"elapsed_s": -0.5, "test_accuracy": 0.5}], "curve[0].elapsed_s = -0.5 is not a number >= 0"),
    ("details", [], "details = [] is not an object"),
])
def test_a_record_with_a_field_of_the_wrong_type_is_dropped_naming_line_and_field(tmp_path, caplog, field, value,
                                                                                  why):
    # a hand-edited line: the report would otherwise stop with a traceback in its arithmetic
    append_record(tmp_path, new_record("r", "single", 1, 0, "ok", final_test_accuracy=0.9))
    bad = new_record("r", "mirrored", 2, 0, "ok", final_test_accuracy=0.9)
    bad[field] = value
    with open(tmp_path / RESULTS_FILE, "a") as f:
        f.write(json.dumps(bad) + "\n")
    append_record(tmp_path, new_record("r", "horovod", 2, 0, "ok", final_test_accuracy=0.9))
    assert [r["strategy"] for r in read_records(tmp_path)] == ["single", "horovod"]
    assert f"dropped 1 torn or corrupt line(s) (line 2: {why})" in caplog.text


def test_every_record_has_the_keys_tools_may_rely_on_whatever_its_status():
    # the user test: failed and unavailable records had no steps, samples, details or log, which
    # README lists as keys tools may rely on (a CI parser read r["log"] and died)
    from distbench.results.records import new_record

    for status in ("ok", "failed", "timeout", "unavailable"):
        rec = new_record("run", "tpu", 2, 0, status)
        assert {"log", "steps", "samples", "details", "timings", "curve", "reason"} <= set(rec), status
        assert rec["log"] is None and rec["details"] == {} and rec["steps"] is None


def test_a_second_record_of_one_configuration_and_repeat_is_dropped(tmp_path, caplog):
    # user test (helper-33): five copied lines made 10 runs of a configuration swept with repeats = 5, silently
    for i in range(2):
        append_record(tmp_path, new_record("r", "horovod", 2, i, "ok", final_test_accuracy=0.9))
    with open(tmp_path / RESULTS_FILE, "a") as f:
        f.write(json.dumps(new_record("r", "horovod", 2, 0, "ok", final_test_accuracy=0.8)) + "\n")
    assert [r["final_test_accuracy"] for r in read_records(tmp_path)] == [0.9, 0.9]
    assert "(line 3: a second record of horovod_w2 repeat 0 (line 1 has it))" in caplog.text, caplog.text


def test_an_empty_line_is_no_corrupt_line(tmp_path, caplog):
    # user test (helper-34): an editor's trailing newline was "dropped 1 torn or corrupt line(s): not valid JSON"
    append_record(tmp_path, new_record("r", "horovod", 2, 0, "ok", final_test_accuracy=0.9))
    with open(tmp_path / RESULTS_FILE, "a") as f:
        f.write("\n  \n")
    append_record(tmp_path, new_record("r", "horovod", 2, 1, "ok", final_test_accuracy=0.9))
    assert len(read_records(tmp_path)) == 2 and "dropped" not in caplog.text
