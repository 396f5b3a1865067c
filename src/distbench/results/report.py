"""Render a run's records as ``report.md`` and ``summary.csv``."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from distbench.results.stats import ConfigSummary, Spread, summarize

COLUMNS = ["strategy", "workers", "status", "test acc (median [min-max])", "train s", "samples/s",
           "time to target s", "speed-up"]


def _fmt(s: Spread, digits: int = 3) -> str:
    if s.median is None:
        return "-"
    if s.n == 1 or s.min == s.max:
        return f"{s.median:.{digits}f}"
    return f"{s.median:.{digits}f} [{s.min:.{digits}f}-{s.max:.{digits}f}]"


def _status(s: ConfigSummary) -> str:
    if s.ok == s.repeats:
        return "ok"
    kinds = sorted(set(s.statuses) - {"ok"})
    return f"{s.ok}/{s.repeats} ok" if s.ok else "/".join(kinds)


def table_rows(summaries: list[ConfigSummary], target: float | None = None) -> list[list[str]]:
    """Rows of the comparison table (strings), one per configuration."""
    rows = []
    for s in summaries:
        ttt = _fmt(s.time_to_target_s, 2)
        if s.ok and s.reached_target < s.ok:
            ttt = f"{ttt} ({s.reached_target}/{s.ok} reached)"
        name = s.strategy + (f" (window {s.window})" if s.window else "")
        rows.append([name, str(s.workers), _status(s), _fmt(s.accuracy), _fmt(s.train_s, 2),
                     _fmt(s.samples_per_s, 0), ttt, f"{s.speedup:.2f}x" if s.speedup else "-"])
    return rows


def render_markdown(records: list[dict[str, Any]], title: str = "distbench report") -> str:
    """The Markdown report: comparison table, then non-ok configurations with reasons."""
    summaries = summarize(records)
    target = next((r.get("target_accuracy") for r in records if r.get("target_accuracy")), None)
    runs = sorted({r.get("run_id", "?") for r in records})
    lines = [f"# {title}", "", f"Runs: {', '.join(runs)}. Records: {len(records)}.", ""]
    if target:
        lines += [f"Target test accuracy for time-to-target: {target}.", ""]
    lines += ["Speed-up = median training time of `single` / median training time of the configuration "
              "(same machine, same epochs and global batch).", ""]
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "---|" * len(COLUMNS))
    for row in table_rows(summaries, target):
        lines.append("| " + " | ".join(row) + " |")
    bad = [s for s in summaries if s.ok < s.repeats]
    if bad:
        lines += ["", "## Not run or failed", ""]
        for s in bad:
            for reason in s.reasons:
                lines.append(f"- `{s.config_id}` ({', '.join(sorted(set(s.statuses)))}): {reason}")
    prov = next((r.get("provenance") for r in records if r.get("provenance")), None)
    if prov:
        v = prov.get("versions", {})
        lines += ["", "## Provenance", "",
                  f"- host {prov.get('hostname')}, {prov.get('cpu_count')} x {prov.get('cpu_model')}, "
                  f"GPUs: {', '.join(prov.get('gpus') or []) or 'none'}",
                  f"- Python {prov.get('python')}, {prov.get('os')}",
                  "- " + ", ".join(f"{k} {val}" for k, val in v.items() if val),
                  f"- git {prov.get('git_commit')}, seed {prov.get('seed')}"]
    return "\n".join(lines) + "\n"


CSV_FIELDS = ["config_id", "strategy", "workers", "window", "repeats", "ok", "status",
              "acc_median", "acc_min", "acc_max", "train_s_median", "train_s_min", "train_s_max",
              "samples_per_s_median", "samples_per_s_min", "samples_per_s_max",
              "time_to_target_s_median", "time_to_target_s_min", "time_to_target_s_max",
              "reached_target", "speedup", "scaling_efficiency", "reasons"]


def write_csv(records: list[dict[str, Any]], path: Path) -> None:
    """Write ``summary.csv``: one row per configuration (see :data:`CSV_FIELDS`)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for s in summarize(records):
            row: list[Any] = [s.config_id, s.strategy, s.workers, s.window, s.repeats, s.ok, _status(s)]
            for sp in (s.accuracy, s.train_s, s.samples_per_s, s.time_to_target_s):
                row += [sp.median, sp.min, sp.max]
            row += [s.reached_target, s.speedup, s.scaling_efficiency, " | ".join(s.reasons)]
            w.writerow(["" if v is None else v for v in row])


def write_report(records: list[dict[str, Any]], out_dir: Path) -> list[Path]:
    """Write ``report.md`` and ``summary.csv`` into ``out_dir``; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    md_path, csv_path = out_dir / "report.md", out_dir / "summary.csv"
    md_path.write_text(render_markdown(records))
    write_csv(records, csv_path)
    return [md_path, csv_path]
