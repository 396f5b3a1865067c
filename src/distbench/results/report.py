"""Render records as ``report.md``, ``report.html``, ``summary.csv`` and ``summary.json``.

:func:`write_report` is the entry point; :func:`build`
(:mod:`distbench.results.reportdata`) turns records into the :class:`ReportData` every
output format is rendered from, so the numbers agree across formats. Plots come from
:mod:`distbench.results.plots`, the HTML page from :mod:`distbench.results.htmlpage`,
TensorBoard scalars from :mod:`distbench.results.tensorboard`.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Iterable, Sequence

from distbench.results.stats import ConfigSummary, Leader, Spread
from distbench.results.reportdata import (  # noqa: F401 (the report's data, re-exported for its callers)
    FORMATS, COLUMNS, HARDWARE_COLUMN, STRAGGLER_COLUMN, WORKLOAD_COLUMN, STALENESS_COLUMN, SHORT_COLUMNS,
    NARROW_DROP, STARTUP_NOTE, parse_formats, fmt_spread, fmt_mean_ci, fmt_ttt, fmt_status, fmt_staleness,
    has_staleness, _x, _f, multi_hardware, has_scenarios, multi_workload, table_columns, table_rows, ReportData,
    describe_hardware, _target_of, build, provenance_lines)


def render_markdown(records: list[dict[str, Any]], title: str = "distbench report",
                    plots: Sequence[tuple[str, str]] = (), data: ReportData | None = None) -> str:
    """The Markdown report: headline, comparison table, spread over repeats, plots (as
    links to the PNG files ``plots`` = ``[(title, relative path)]``), non-ok configurations
    with reasons, and the provenance of each run."""
    d = data or build(records)
    lines = [f"# {title}", "", f"Runs: {', '.join(d.runs)}. Records: {len(d.records)}.", ""]
    if d.workload:
        lines += [f"Workload: {d.workload}.", ""]
    if d.target:
        lines += [f"Target test accuracy for time-to-target: {d.target}.", ""]
    for h in d.headlines:
        lines += [f"- {s}" for s in h.sentences]
    if any(h.sentences for h in d.headlines):
        lines.append("")
    if d.advice is not None:
        lines += ["## Recommendation", ""] + d.advice.to_markdown()
    if d.multi_hardware:
        lines += ["Hardware:", ""] + [f"- **{hw.letter}**: {hw.description}" for hw in d.hardware] + [""]
    if d.multi_workload:
        lines += ["Workloads:", ""] + [f"- **{w.label}**: {w.description}" for w in d.workloads] + [""]
    said = set(d.advice.reasons) if d.advice is not None else set()  # (the warm-up caveat goes with the verdict)
    notes = [n for n in d.notes if n not in said]
    lines += [f"- {n}" for n in notes] + ([""] if notes else [])  # a list: bare lines would run into one paragraph
    lines += ["Speed-up = median training time of `single` / median training time of the configuration "
              "(same hardware, same epochs and global batch); scaling eff. = speed-up / workers; "
              "temporal eff. = Hermans' ratio of areas under accuracy-vs-time versus `single` over the time "
              "both ran (> 1: more accuracy sooner; early accuracy counts, so a row slower to the target can "
              "exceed 1). Time to target: MLPerf rule (mean of the runs, dropping the fastest "
              "and slowest with 5 or more; a run that never reaches the target counts as slowest). "
              + STARTUP_NOTE, ""]
    cols = table_columns(d.summaries)
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "---|" * len(cols))
    for row in table_rows(d.summaries, d.target):
        lines.append("| " + " | ".join(row) + " |")
    spread = [s for s in d.summaries if s.ok >= 2]
    if spread:
        lines += ["", "## Spread over repeats", "",
                  "Mean ± 1.96 standard deviations over the ok repeats (Horovod's benchmark convention).", "",
                  "| configuration | ok runs | test acc | train s | samples/s |", "|---|---|---|---|---|"]
        for s in spread:
            lines.append(f"| {s.label}{d.tag(s)} | {s.ok} | "
                         f"{fmt_mean_ci(s.accuracy)} | {fmt_mean_ci(s.train_s, 2)} | "
                         f"{fmt_mean_ci(s.samples_per_s, 0)} |")
    if d.stragglers:
        from distbench.results.stragglers import STRAGGLER_TABLE_COLUMNS, bound_sentences, straggler_table

        lines += ["", "## Stragglers", "", "One worker's every step takes the slowdown times its own measured compute "
                  "time (a delay after its local gradients). A synchronous step waits for the slowest replica, so "
                  "its training time should grow by the injected delay (growth / delay ~ 1); an asynchronous "
                  "replica does not wait, so its time to target should grow by much less.", "",
                  "| " + " | ".join(STRAGGLER_TABLE_COLUMNS) + " |", "|" + "---|" * len(STRAGGLER_TABLE_COLUMNS)]
        lines += ["| " + " | ".join(row) + " |" for row in straggler_table(d.stragglers)]
        lines += [""] + [f"- {s}" for s in bound_sentences(d.stragglers)]
    if plots:
        lines += ["", "## Plots", ""]
        for ptitle, rel in plots:
            lines += [f"![{ptitle}]({rel})", ""]
    if d.failures:
        lines += ["", "## Not run or failed", ""]
        for s in d.failures:
            for reason in s.reasons:
                lines.append(f"- {s.label}{d.tag(s)} ({', '.join(sorted(set(s.statuses)))}): {reason}")
    if d.provenance:
        lines += ["", "## Provenance", ""]
        for g in d.provenance:
            hw = f", hardware {g['hardware']}" if d.multi_hardware else ""
            lines.append(f"- run `{g['run_id']}` ({g['records']} records{hw})")
            lines += [f"  - {k}: {v}" for k, v in provenance_lines(g["provenance"])]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- CSV / JSON

CSV_FIELDS = ["config_id", "strategy", "workers", "window", "slow_worker", "slowdown", "jitter_cv", "hardware",
              "workload", "repeats", "ok", "status",
              "acc_median", "acc_min", "acc_max", "acc_mean", "acc_ci95",
              "loss_median", "loss_min", "loss_max",
              "train_s_median", "train_s_min", "train_s_max", "train_s_mean", "train_s_ci95",
              "samples_per_s_median", "samples_per_s_min", "samples_per_s_max", "samples_per_s_mean",
              "samples_per_s_ci95", "startup_s_median", "startup_s_min", "startup_s_max", "total_s_median",
              "total_s_min", "total_s_max",
              "time_to_target_s_mlperf", "time_to_target_s_median", "time_to_target_s_min",
              "time_to_target_s_max", "reached_target",
              "speedup", "scaling_efficiency", "temporal_efficiency", "staleness_median", "staleness_max",
              "flags", "hardware_key", "reasons"]


def _spread_dict(s: Spread) -> dict[str, Any]:
    return {"median": s.median, "min": s.min, "max": s.max, "mean": s.mean, "ci95": s.ci95, "sd": s.sd, "n": s.n}


def summary_dict(s: ConfigSummary) -> dict[str, Any]:
    """One configuration as a JSON-ready dict (units: seconds, samples/s, fractions)."""
    return {
        "config_id": s.config_id, "strategy": s.strategy, "workers": s.workers, "window": s.window,
        "scenario": s.scenario,
        "hardware": s.hardware, "hardware_key": s.hardware_key, "workload": s.workload, "repeats": s.repeats,
        "ok": s.ok,
        "status": s.status, "statuses": s.statuses, "reasons": s.reasons,
        "test_accuracy": _spread_dict(s.accuracy), "test_loss": _spread_dict(s.loss),
        "train_s": _spread_dict(s.train_s), "samples_per_s": _spread_dict(s.samples_per_s),
        "startup_s": _spread_dict(s.startup_s), "total_s": _spread_dict(s.total_s),
        "time_to_target_s": {"mlperf": s.ttt.value, "runs": s.ttt.runs, "reached": s.ttt.reached,
                             "averaged": s.ttt.kept, "not_reached": s.ttt.not_reached,
                             **{k: v for k, v in _spread_dict(s.time_to_target_s).items() if k != "n"}},
        "speedup": s.speedup, "scaling_efficiency": s.scaling_efficiency,
        "temporal_efficiency": s.temporal_efficiency,
        "staleness_median": s.staleness_median, "staleness_max": s.staleness_max, "flags": s.flags,
    }


def write_csv(records: list[dict[str, Any]], path: Path, data: ReportData | None = None) -> None:
    """Write ``summary.csv``: one row per configuration and hardware (see :data:`CSV_FIELDS`);
    empty cells for missing values."""
    d = data or build(records)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for s in d.summaries:
            sc = s.scenario or {}
            row: list[Any] = [s.config_id, s.strategy, s.workers, s.window, sc.get("worker"), sc.get("slowdown"),
                              sc.get("jitter_cv"), s.hardware, s.workload, s.repeats, s.ok, s.status]
            row += [s.accuracy.median, s.accuracy.min, s.accuracy.max, s.accuracy.mean, s.accuracy.ci95]
            row += [s.loss.median, s.loss.min, s.loss.max]
            for sp in (s.train_s, s.samples_per_s):
                row += [sp.median, sp.min, sp.max, sp.mean, sp.ci95]
            row += [s.startup_s.median, s.startup_s.min, s.startup_s.max, s.total_s.median, s.total_s.min,
                    s.total_s.max]
            row += [s.ttt.value, s.time_to_target_s.median, s.time_to_target_s.min, s.time_to_target_s.max,
                    s.reached_target, s.speedup, s.scaling_efficiency, s.temporal_efficiency,
                    s.staleness_median, s.staleness_max, " ".join(f.replace(" ", "_") for f in s.flags),
                    s.hardware_key, " | ".join(s.reasons)]
            w.writerow(["" if v is None else v for v in row])


def summary_json(data: ReportData) -> dict[str, Any]:
    """``summary.json``'s content: target, hardware legend, headline and one entry per configuration."""
    def leader(lead: Leader | None) -> dict[str, Any] | None:
        """A leader as JSON (None when there is none)."""
        if lead is None:
            return None
        return {"config_id": lead.summary.config_id, "label": lead.summary.label, "value": lead.value,
                "runner_up": lead.runner_up.config_id if lead.runner_up else None,
                "runner_up_value": lead.runner_up_value, "within_spread": lead.overlaps,
                "ties": [t.config_id for t in lead.ties]}

    from distbench import __version__
    return {
        "generated_by": f"distbench {__version__}", "generated": data.generated, "runs": data.runs,
        "records": len(data.records), "target_accuracy": data.target, "workload": data.workload,
        "hardware": {hw.letter: {"key": hw.key, "description": hw.description} for hw in data.hardware},
        "workloads": {w.label: w.description for w in data.workloads},
        "headline": [{"hardware": h.hardware.letter, "workload": h.workload.label,
                      "fastest_to_target": leader(h.fastest), "most_accurate": leader(h.accurate),
                      "shortest_training": leader(h.quickest),
                      "text": h.sentences} for h in data.headlines],
        "configurations": [summary_dict(s) for s in data.summaries],
        "recommendation": data.advice.to_dict() if data.advice is not None else None,
    }


# ---------------------------------------------------------------------------- all outputs

def write_report(records: list[dict[str, Any]], out_dir: Path, formats: Iterable[str] = FORMATS,
                 tensorboard: bool = False, data: ReportData | None = None) -> list[Path]:
    """Write the selected outputs into ``out_dir`` and return their paths.

    Args:
        records: records of one or more runs (merged; each keeps its provenance).
        out_dir: output directory (created if missing).
        formats: subset of :data:`FORMATS`: ``md`` -> ``report.md``, ``html`` ->
            ``report.html`` (self-contained), ``csv`` -> ``summary.csv``, ``json`` ->
            ``summary.json``. ``md`` and ``html`` also write the plots as PNG files in
            ``out_dir/plots/``.
        tensorboard: also write TensorBoard scalars under ``out_dir/tensorboard/``.
        data: the report already built from ``records`` (:func:`build`, e.g. with the run
            directory its commands name when ``out_dir`` is another folder); default: built
            here, naming ``out_dir`` when it is a run directory.

    Returns:
        paths written, in the order md, csv, json, html, tensorboard directory, PNG files.

    Raises:
        ValueError: an unknown format.
    """
    fmts = parse_formats(list(formats))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = data or build(records, out_dir if (out_dir / "config.json").exists() else None)
    plots: list[Any] = []
    pngs: list[Path] = []
    if "md" in fmts or "html" in fmts:
        from distbench.results import plots as plots_mod

        plots = plots_mod.make_plots(data)
        pngs = plots_mod.write_pngs(plots, out_dir / plots_mod.PLOT_DIR)
    written: list[Path] = []
    if "md" in fmts:
        p = out_dir / "report.md"
        p.write_text(render_markdown(records, plots=[(pl.title, pl.rel_path) for pl in plots],
                                     data=data))
        written.append(p)
    if "csv" in fmts:
        p = out_dir / "summary.csv"
        write_csv(records, p, data)
        written.append(p)
    if "json" in fmts:
        p = out_dir / "summary.json"
        p.write_text(json.dumps(summary_json(data), indent=2, allow_nan=False) + "\n")
        written.append(p)
    if "html" in fmts:
        from distbench.results.htmlpage import render_html

        p = out_dir / "report.html"
        p.write_text(render_html(data, plots), encoding="utf-8")
        written.append(p)
    if tensorboard:
        from distbench.results.tensorboard import write_scalars

        written.append(write_scalars(records, out_dir / "tensorboard"))
    return written + pngs
