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

from distbench.results.records import CURVE_NUMBERS, FIELDS, KINDS, STATUSES

RESULTS_FILE = "results.jsonl"
RECORD_KEYS = {f.name for f in FIELDS if f.minimal}
"""The minimum a line must have to be a record (:data:`~distbench.results.records.FIELDS`' ``minimal``)."""
log = logging.getLogger(__name__)


def untaken(out: str) -> str:
    """``out``, or where it holds a run the first of ``out-2``, ``out-3``, ... that does not
    (``RD-2`` taken: ``RD-3``); a run directory holds a run once it has ``workload/``, which
    ``distbench run`` refuses without ``--resume`` (a Run next followed once was offered again,
    and refused; user test, helper-29)."""
    def taken(d: str) -> bool:
        return (Path(d) / "workload").exists()

    if not taken(out):
        return out
    stem, _, n = out.rpartition("-")
    stem, k = (stem + "-", int(n) + 1) if stem and n.isdigit() else (out + "-", 2)
    while taken(f"{stem}{k}"):
        k += 1
    return f"{stem}{k}"


def _short(v: Any) -> str:
    """``repr(v)``, cut to 60 characters (a hostile line's value may be megabytes)."""
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v: Any, lo: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= lo


_KIND_CHECKS = {
    "name": lambda v: isinstance(v, str) and bool(v),
    "text": lambda v: isinstance(v, str),
    "status": lambda v: v in STATUSES,
    "count": lambda v: _is_int(v, 0),
    "positive": lambda v: _is_int(v, 1),
    "number": _is_number,
    "nonnegative": lambda v: _is_number(v) and v >= 0,
    "fraction": lambda v: _is_number(v) and 0.0 <= v <= 1.0,
    "object": lambda v: isinstance(v, dict),
    "list": lambda v: isinstance(v, list),
}


def _expected(kind: str) -> str:
    """``KINDS[kind]`` with its article: ``an integer >= 0``, ``one of ok, failed, ...``."""
    if kind == "status":
        return f"one of {', '.join(STATUSES)}"
    return ("an " if KINDS[kind][0] in "aeiou" else "a ") + KINDS[kind]


def _nested_problem(rec: dict[str, Any]) -> str | None:
    """What is wrong inside ``timings`` (numbers, or ``phases``' numbers) and ``curve``
    (objects whose :data:`~distbench.results.records.CURVE_NUMBERS` are numbers)."""
    for k, v in (rec.get("timings") or {}).items():
        inner = v.items() if isinstance(v, dict) else [(None, v)]
        for k2, v2 in inner:
            if v2 is not None and not (_is_number(v2) and v2 >= 0):  # helper-33: -5 s passed, and sped things up
                return f"timings.{k}{'' if k2 is None else '.' + str(k2)} = {_short(v2)} is not a number >= 0"
    for i, point in enumerate(rec.get("curve") or []):
        if not isinstance(point, dict):
            return f"curve[{i}] = {_short(point)} is not an object"
        for k in CURVE_NUMBERS:
            if point.get(k) is not None and not _is_number(point[k]):
                return f"curve[{i}].{k} = {_short(point[k])} is not a number"
        if _is_number(point.get("elapsed_s")) and point["elapsed_s"] < 0:
            return f"curve[{i}].elapsed_s = {_short(point['elapsed_s'])} is not a number >= 0"
    return None


def record_problem(rec: dict[str, Any]) -> str | None:
    """What makes ``rec`` unusable as a record, or ``None`` when the report can read it:
    every key :data:`~distbench.results.records.FIELDS` defines must have its type (or be
    ``null``, except the minimal keys), so that a hand-edited or foreign line such as
    ``"final_test_accuracy": "high"`` cannot stop ``report`` with a traceback. Keys the
    schema does not define are kept unchecked (a newer distbench's records stay readable).

    Args:
        rec: one parsed ``results.jsonl`` line.

    Returns:
        e.g. ``"final_test_accuracy = 'high' is not a number in [0, 1]"``, or ``None``.
    """
    missing = sorted(k for k in RECORD_KEYS if rec.get(k) is None)
    if missing:
        return f"no {', '.join(missing)}"
    for f in FIELDS:
        v = rec.get(f.name)
        if v is not None and not _KIND_CHECKS[f.kind](v):
            return f"{f.name} = {_short(v)} is not {_expected(f.kind)}"
    return _nested_problem(rec)


def _valid_prefix(path: Path) -> tuple[list[dict[str, Any]], int, list[tuple[int, str]]]:
    """Parse complete lines; return (records, byte length of the valid prefix, the bad
    lines' numbers, counting from 1, each with what is wrong with it)."""
    records: list[dict[str, Any]] = []
    good = 0
    bad: list[tuple[int, str]] = []
    first: dict[tuple[Any, Any, Any], int] = {}  # (run_id, config_id, repeat) -> its line
    with open(path, "rb") as f:
        data = f.read()
    pos = n = 0
    while pos < len(data):
        n += 1  # this line's number, counting from 1
        nl = data.find(b"\n", pos)
        end = len(data) if nl < 0 else nl + 1
        line = data[pos:end]
        if not line.strip():  # an empty line (an editor's trailing newline; helper-34) holds nothing to drop
            pos, good = end, end
            continue
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
            key = (obj.get("run_id"), obj.get("config_id"), obj.get("repeat"))
            if key in first:  # a sweep writes each once (helper-33: a copied line counted as 10 runs of 5)
                raise ValueError(f"a second record of {key[1]} repeat {key[2]} (line {first[key]} has it)")
            first[key] = n
            records.append(obj)
            good = end
        except ValueError as e:
            bad.append((n, str(e)))
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


def no_answer(ran: list[dict[str, Any]], what: str = "this sweep") -> str | None:
    """Why ``ran`` (a sweep's new records, or a run's) gave no answer: none ended ``ok`` (the
    exit status of ``run`` is then 1, for CI and schedulers), counted by status, e.g. "no
    configuration of this sweep ended ok (2 failed, 1 timeout)"; ``None`` when one did, or
    when there are none."""
    from collections import Counter

    if not ran or any(r.get("status") == "ok" for r in ran):
        return None
    counts = ", ".join(f"{n} {s}" for s, n in sorted(Counter(str(r.get("status")) for r in ran).items()))
    return f"no configuration of {what} ended ok ({counts})"
