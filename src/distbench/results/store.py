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

RESULTS_FILE = "results.jsonl"
RECORD_KEYS = {"config_id", "strategy", "workers", "repeat", "status"}  # the minimum a line must have
log = logging.getLogger(__name__)


def _valid_prefix(path: Path) -> tuple[list[dict[str, Any]], int, list[int]]:
    """Parse complete lines; return (records, byte length of the valid prefix, the bad
    lines' numbers, counting from 1)."""
    records: list[dict[str, Any]] = []
    good = 0
    bad: list[int] = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        end = len(data) if nl < 0 else nl + 1
        line = data[pos:end]
        try:
            if nl < 0:
                raise ValueError("no newline")
            obj = json.loads(line)
            if not isinstance(obj, dict) or not RECORD_KEYS <= obj.keys():
                raise ValueError("not a distbench record")
            records.append(obj)
            good = end
        except ValueError:
            bad.append(data.count(b"\n", 0, pos) + 1)
            if nl < 0:
                break
            good = end  # a corrupt complete line is skipped, not truncated
        pos = end
    return records, good, bad


def read_records(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every complete record in ``run_dir/results.jsonl`` (empty list if none).

    A torn or corrupt line, or a JSON object that is not a record (lacking any of
    :data:`RECORD_KEYS`), is skipped with a warning naming the file.
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
            where = ", ".join(str(n) for n in bad[:10]) + (", ..." if len(bad) > 10 else "")
            log.warning("%s: dropped %d torn or corrupt line(s) (line %s): not valid JSON or not a distbench "
                        "record; the other records are used", path, len(bad), where)
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
