"""``results.jsonl``: append-only, one record per line, flushed and fsynced per record.

A torn last line (the writer was killed mid-write) is detected on reading, dropped with
a warning, and truncated away before the next append, so no partial record survives.
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from distbench.results.records import Status

RESULTS_FILE = "results.jsonl"
RECORD_KEYS = {"config_id", "strategy", "workers", "repeat", "status"}  # the minimum a line must have
log = logging.getLogger(__name__)


STATUSES = tuple(s.value for s in Status)
NUMBER_FIELDS = ("final_test_accuracy", "final_test_loss", "time_to_target_s", "samples_per_s", "target_accuracy",
                 "learning_rate", "finished_unix")
"""Top-level fields that are a number or ``null`` in every record."""
COUNT_FIELDS = ("epochs", "steps", "samples", "replicas", "global_batch_size", "per_replica_batch_size",
                "communication_window")
"""Top-level fields that are a non-negative integer or ``null``."""
CURVE_NUMBERS = ("elapsed_s", "epoch", "step", "test_accuracy", "test_loss", "train_loss")


def _short(v: Any) -> str:
    """``repr(v)``, cut to 60 characters (a hostile line's value may be megabytes)."""
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def record_problem(rec: dict[str, Any]) -> str | None:
    """What makes ``rec`` unusable as a record, or ``None`` when the report can read it:
    the fields the report computes with must have their types (a hand-edited or foreign
    line such as ``"final_test_accuracy": "high"`` would otherwise stop ``report`` with a
    traceback).

    Args:
        rec: one parsed ``results.jsonl`` line.

    Returns:
        e.g. ``"final_test_accuracy = 'high' is not a number"``, or ``None``.
    """
    missing = sorted(RECORD_KEYS - rec.keys())
    if missing:
        return f"no {', '.join(missing)}"
    for key in ("config_id", "strategy"):
        if not isinstance(rec[key], str) or not rec[key]:
            return f"{key} = {_short(rec[key])} is not a non-empty string"
    if rec["status"] not in STATUSES:
        return f"status = {_short(rec['status'])} is not one of {', '.join(STATUSES)}"
    for key, lo in (("workers", 1), ("repeat", 0)):
        if not (isinstance(rec[key], int) and not isinstance(rec[key], bool) and rec[key] >= lo):
            return f"{key} = {_short(rec[key])} is not an integer >= {lo}"
    for key in NUMBER_FIELDS:
        if rec.get(key) is not None and not _is_number(rec[key]):
            return f"{key} = {_short(rec[key])} is not a number"
    for key in COUNT_FIELDS:
        v = rec.get(key)
        if v is not None and not (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
            return f"{key} = {_short(v)} is not a non-negative integer"
    acc = rec.get("final_test_accuracy")
    if acc is not None and not 0.0 <= acc <= 1.0:
        return f"final_test_accuracy = {_short(acc)} is outside [0, 1]"
    for key in ("details", "timings", "workload", "provenance"):
        if rec.get(key) is not None and not isinstance(rec[key], dict):
            return f"{key} = {_short(rec[key])} is not an object"
    for k, v in (rec.get("timings") or {}).items():
        inner = v.items() if isinstance(v, dict) else [(None, v)]
        for k2, v2 in inner:
            if v2 is not None and not _is_number(v2):
                return f"timings.{k}{'' if k2 is None else '.' + str(k2)} = {_short(v2)} is not a number"
    curve = rec.get("curve")
    if curve is not None:
        if not isinstance(curve, list):
            return f"curve = {_short(curve)} is not a list"
        for i, point in enumerate(curve):
            if not isinstance(point, dict):
                return f"curve[{i}] = {_short(point)} is not an object"
            for k in CURVE_NUMBERS:
                if point.get(k) is not None and not _is_number(point[k]):
                    return f"curve[{i}].{k} = {_short(point[k])} is not a number"
    return None


def _valid_prefix(path: Path) -> tuple[list[dict[str, Any]], int, list[tuple[int, str]]]:
    """Parse complete lines; return (records, byte length of the valid prefix, the bad
    lines' numbers, counting from 1, each with what is wrong with it)."""
    records: list[dict[str, Any]] = []
    good = 0
    bad: list[tuple[int, str]] = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        end = len(data) if nl < 0 else nl + 1
        line = data[pos:end]
        try:
            if nl < 0:
                raise ValueError("torn (no newline)")
            try:
                obj = json.loads(line)
            except ValueError:
                raise ValueError("not valid JSON") from None
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
            problem = record_problem(obj)
            if problem:
                raise ValueError(problem)
            records.append(obj)
            good = end
        except ValueError as e:
            bad.append((data.count(b"\n", 0, pos) + 1, str(e)))
            if nl < 0:
                break
            good = end  # a corrupt complete line is skipped, not truncated
        pos = end
    return records, good, bad


def recorded(records: list[dict[str, Any]]) -> set[tuple[Any, Any]]:
    """The ``(config_id, repeat)`` pairs of ``records``: the configurations a resumed sweep skips."""
    return {(r.get("config_id"), r.get("repeat")) for r in records}


def read_records(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every complete record in ``run_dir/results.jsonl`` (empty list if none).

    A torn or corrupt line, or a JSON object that is not a record (lacking any of
    :data:`RECORD_KEYS`, or a field of the wrong type: :func:`record_problem`), is skipped
    with a warning naming the file, the line and what is wrong with it.
    """
    path = Path(run_dir) / RESULTS_FILE
    if not path.exists():
        return []
    records, _, bad = _valid_prefix(path)
    if bad:
        st = path.stat()
        seen = (str(path.resolve()), st.st_size, st.st_mtime_ns)
        if seen not in _WARNED:  # once per state of the file: a resume reads it several times
            _WARNED.add(seen)
            where = "; ".join(f"line {n}: {why}" for n, why in bad[:5]) + ("; ..." if len(bad) > 5 else "")
            log.warning("%s: dropped %d torn or corrupt line(s) (%s); the other records are used",
                        path, len(bad), where)
    return records


_WARNED: set[tuple[str, int, int]] = set()  # (file, size, mtime) already warned about


def _clean(o: Any) -> Any:
    """Replace NaN/Inf floats (not valid JSON) with ``None``, recursively."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def append_record(run_dir: str | Path, record: dict[str, Any]) -> None:
    """Append ``record`` as one line, then flush and fsync.

    A torn last line left by an earlier crash is truncated first.
    """
    path = Path(run_dir) / RESULTS_FILE
    if path.exists() and path.stat().st_size:
        _, good, _ = _valid_prefix(path)
        if good < path.stat().st_size:
            log.warning("%s: truncating a torn last line (%d bytes)", path, path.stat().st_size - good)
            with open(path, "r+b") as f:
                f.truncate(good)
    line = json.dumps(_clean(record), sort_keys=True, allow_nan=False, default=str) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())
