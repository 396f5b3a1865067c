"""Render records as ``report.md``, ``report.html``, ``summary.csv`` and ``summary.json``.

:func:`write_report` is the entry point; :func:`build` turns records into the
:class:`ReportData` every output format is rendered from, so the numbers agree across
formats. Plots come from :mod:`distbench.results.plots`, the HTML page from
:mod:`distbench.results.htmlpage`, TensorBoard scalars from
:mod:`distbench.results.tensorboard`.
"""

from __future__ import annotations

import csv
import json
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from distbench.results.headline import Headline, HardwareInfo, WorkloadInfo, make_headline
from distbench.results.notes import (batchnorm_note, engine_start_notes, engine_starters, ps_notes,
                                     superlinear_note, test_split_note, warmup_note)
from distbench.results.stats import (ConfigSummary, Leader, Spread, describe_workload, hardware_labels, record_groups,
                                     summarize, workload_labels)

FORMATS = ("md", "html", "csv", "json")

COLUMNS = ["strategy", "workers", "status", "test acc (median [min-max])", "train s (median [min-max])",
           "start-up s", "total s", "samples/s (median [min-max])", "time to target s (MLPerf)", "speed-up",
           "scaling eff.", "temporal eff."]

HARDWARE_COLUMN = "hardware"
STRAGGLER_COLUMN = "straggler"
WORKLOAD_COLUMN = "workload"
STALENESS_COLUMN = "staleness (median/max)"

SHORT_COLUMNS = {  # compact headers for the terminal table
    "test acc (median [min-max])": "test acc", "train s (median [min-max])": "train s",
    "samples/s (median [min-max])": "samples/s", "time to target s (MLPerf)": "to target s",
    "scaling eff.": "eff.", "temporal eff.": "temporal", STALENESS_COLUMN: "stale",
}

#: Terminal-table columns (short headers) left out first when the table is too wide.
NARROW_DROP = ("temporal", "eff.", "samples/s", "stale", "total s", "start-up s", HARDWARE_COLUMN, WORKLOAD_COLUMN)

STARTUP_NOTE = ("Start-up (spawn to the first training step: launching processes, importing the framework, "
                "starting a cluster) and total seconds are shown but kept out of speed-up and time to target: "
                "they are a fixed cost per run that does not grow with the epochs, so on a short run they would "
                "measure mostly the launcher.")


def parse_formats(text: str | Iterable[str]) -> tuple[str, ...]:
    """Parse ``--format`` (``"md,html"`` or a list) into a tuple of :data:`FORMATS`.

    Raises:
        ValueError: an unknown or empty format, naming the allowed ones.
    """
    items = [t.strip().lower() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    bad = [t for t in items if t not in FORMATS]
    if bad or not items:
        raise ValueError(f"--format {','.join(items) or text!r}: expected a comma-separated subset of "
                         f"{','.join(FORMATS)}")
    return tuple(dict.fromkeys(items))


# ---------------------------------------------------------------------------- formatting

def fmt_spread(s: Spread, digits: int = 3) -> str:
    """``median [min-max]`` with ``digits`` decimals; just the median for one value; ``-`` for none."""
    if s.median is None:
        return "-"
    if s.n == 1 or s.min == s.max:
        return f"{s.median:.{digits}f}"
    return f"{s.median:.{digits}f} [{s.min:.{digits}f}-{s.max:.{digits}f}]"


def fmt_mean_ci(s: Spread, digits: int = 3) -> str:
    """``mean ± 1.96·sd`` (Horovod's convention); ``-`` with fewer than two values."""
    if s.ci95 is None or s.mean is None:
        return "-"
    return f"{s.mean:.{digits}f} ± {s.ci95:.{digits}f}"


def fmt_ttt(s: ConfigSummary) -> str:
    """Time-to-target cell: the MLPerf score with the range of the runs that reached the
    target, ``not reached`` when the score is infinite, and ``(k/n reached)`` when some
    but not all runs reached it."""
    if not s.ttt.runs:
        return "-"
    suffix = f" ({s.ttt.reached}/{s.ttt.runs} reached)" if 0 < s.ttt.reached < s.ttt.runs else ""
    if s.ttt.value is None:
        return "not reached" + suffix
    rng = (f" [{s.time_to_target_s.min:.2f}-{s.time_to_target_s.max:.2f}]"
           if s.time_to_target_s.n > 1 and s.time_to_target_s.min != s.time_to_target_s.max else "")
    return f"{s.ttt.value:.2f}{rng}{suffix}"


def fmt_status(s: ConfigSummary) -> str:
    """Status cell: :attr:`ConfigSummary.status`, then its flags (``ok, below target``,
    ``ok, collapsed``, ``ok, diverged``); ``collapsed`` implies below target and is shown alone."""
    flags = [f for f in s.flags if not (f == "below target" and "collapsed" in s.flags)]
    return ", ".join([s.status] + flags)


def fmt_staleness(s: ConfigSummary) -> str:
    """Staleness cell of a parameter-server row: ``median/max`` (e.g. ``3/5``); ``-`` otherwise."""
    if s.staleness_median is None:
        return "-"
    return f"{s.staleness_median:g}/{s.staleness_max if s.staleness_max is not None else '-'}"


def has_staleness(summaries: Sequence[ConfigSummary]) -> bool:
    """True when some configuration recorded commit staleness (a parameter-server strategy)."""
    return any(s.staleness_median is not None for s in summaries)


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v is not None else "-"


def _f(v: float | None, digits: int = 2) -> str:
    return f"{v:.{digits}f}" if v is not None else "-"


def multi_hardware(summaries: Sequence[ConfigSummary]) -> bool:
    """True when the summaries come from more than one hardware key."""
    return len({s.hardware_key for s in summaries}) > 1


def has_scenarios(summaries: Sequence[ConfigSummary]) -> bool:
    """True when some configuration ran under a straggler scenario (a scenario sweep)."""
    return any(s.scenario is not None for s in summaries)


def multi_workload(summaries: Sequence[ConfigSummary]) -> bool:
    """True when the summaries come from more than one workload (data, model, epochs, ...)."""
    return len({s.workload_key for s in summaries}) > 1


def table_columns(summaries: Sequence[ConfigSummary]) -> list[str]:
    """:data:`COLUMNS`, with a ``straggler`` column after ``workers`` in a scenario sweep,
    ``hardware`` (and ``workload``) columns when records of several machines (or workloads)
    are merged, and a staleness column at the end when parameter-server rows are present."""
    cols = list(COLUMNS)
    extra = ([STRAGGLER_COLUMN] if has_scenarios(summaries) else []) + \
        ([HARDWARE_COLUMN] if multi_hardware(summaries) else []) + \
        ([WORKLOAD_COLUMN] if multi_workload(summaries) else [])
    return cols[:2] + extra + cols[2:] + ([STALENESS_COLUMN] if has_staleness(summaries) else [])


def table_rows(summaries: list[ConfigSummary], target: float | None = None) -> list[list[str]]:
    """Rows of the comparison table (strings), one per configuration, matching
    :func:`table_columns` (``target`` is accepted for compatibility and unused); a start-up
    that includes a shared engine's start (Spark, MPI) ends with ``*``
    (:func:`~distbench.results.notes.engine_start_notes`)."""
    multi, multi_wl, stale = multi_hardware(summaries), multi_workload(summaries), has_staleness(summaries)
    swept = has_scenarios(summaries)
    engine = engine_starters(summaries)  # start-up cells that include a shared engine's start
    rows = []
    for s in summaries:
        name = s.strategy + (f" (window {s.window})" if s.window else "") + (f" ({s.bandwidth})" if s.bandwidth else "")
        row = [name, str(s.workers), fmt_status(s), fmt_spread(s.accuracy), fmt_spread(s.train_s, 2),
               fmt_spread(s.startup_s, 1) + ("*" if s.config_id in engine else ""),
               fmt_spread(s.total_s, 1), fmt_spread(s.samples_per_s, 0), fmt_ttt(s),
               _x(s.speedup), _f(s.scaling_efficiency),
               _f(s.temporal_efficiency)] + ([fmt_staleness(s)] if stale else [])
        extra = ([s.straggler or "-"] if swept else []) + ([s.hardware] if multi else []) + \
            ([s.workload] if multi_wl else [])
        rows.append(row[:2] + extra + row[2:])
    return rows


# ---------------------------------------------------------------------------- the data

@dataclass
class ReportData:
    """Everything the outputs render (built once by :func:`build`)."""

    records: list[dict[str, Any]]
    summaries: list[ConfigSummary]
    hardware: list[HardwareInfo]
    workloads: list[WorkloadInfo]
    headlines: list[Headline]
    target: float | None
    runs: list[str]
    workload: str
    notes: list[str]
    provenance: list[dict[str, Any]]
    generated: str
    advice: Any = None
    stragglers: list[Any] = field(default_factory=list)

    @property
    def multi_hardware(self) -> bool:
        """True when records from more than one machine are merged."""
        return len(self.hardware) > 1

    @property
    def multi_workload(self) -> bool:
        """True when records of more than one workload are merged."""
        return len(self.workloads) > 1

    def tag(self, s: ConfigSummary) -> str:
        """`` [hw B, workload 2]``-style suffix telling merged rows apart ('' when not merged)."""
        parts = ([f"hw {s.hardware}"] if self.multi_hardware else []) + \
            ([f"workload {s.workload}"] if self.multi_workload else [])
        return f" [{', '.join(parts)}]" if parts else ""

    @property
    def failures(self) -> list[ConfigSummary]:
        """Configurations with at least one non-ok repeat."""
        return [s for s in self.summaries if s.ok < s.repeats]


def describe_hardware(prov: dict[str, Any]) -> str:
    """One line: ``host vm: 2 x AMD EPYC, 23.5 GiB, no GPU``."""
    mem = prov.get("memory_bytes")
    gpus = prov.get("gpus") or []
    parts = [f"{prov.get('cpu_count')} x {prov.get('cpu_model')}"]
    if mem:
        parts.append(f"{mem / 2**30:.1f} GiB")
    parts.append(f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}: {', '.join(gpus)}" if gpus else "no GPU")
    return f"host {prov.get('hostname')}: " + ", ".join(parts)


def _target_of(subset: Sequence[ConfigSummary]) -> float | None:
    """The target test accuracy the records of ``subset`` (one hardware and workload group)
    were scored against: merged runs may have used different targets."""
    return next((r.get("target_accuracy") for s in subset for r in s.records if r.get("target_accuracy")), None)


def build(records: list[dict[str, Any]], run_dir: Path | None = None) -> ReportData:
    """Summarise ``records`` into a :class:`ReportData` (statistics, headlines, hardware and
    workload legends, provenance per run, the recommendation of
    :func:`distbench.results.advice.advise` and the straggler sweep's lines), the single source
    of every output format. ``run_dir`` (the run directory, if known) goes into the commands
    the recommendation prints."""
    from distbench.results.advice import advise
    from distbench.results.stragglers import straggler_lines

    summaries = summarize(records)
    hw_labels, wl_labels = hardware_labels(records), workload_labels(records)
    groups = record_groups(records)
    first_prov: dict[str, dict[str, Any]] = {}
    first_rec: dict[str, dict[str, Any]] = {}
    for r, (hw, wk) in zip(records, groups):
        first_prov.setdefault(hw, r.get("provenance") or {})
        first_rec.setdefault(wk, r)
    hardware = [HardwareInfo(letter, key, describe_hardware(first_prov[key])) for key, letter in hw_labels.items()]
    workloads = [WorkloadInfo(label, key, describe_workload(first_rec[key])) for key, label in wl_labels.items()]
    target = next((r.get("target_accuracy") for r in records if r.get("target_accuracy")), None)
    multi = (len(hardware) > 1, len(workloads) > 1)
    headlines = [make_headline(hw, wl, subset, _target_of(subset) or target, multi) for hw in hardware
                 for wl in workloads
                 for subset in [[s for s in summaries if (s.hardware_key, s.workload_key) == (hw.key, wl.key)]]
                 if subset]
    notes = []
    if multi[0]:
        notes.append("Records from different hardware are kept apart (column 'hardware'); speed-up and temporal "
                     "efficiency compare a configuration only with `single` on the same hardware.")
    if multi[1]:
        notes.append("The merged runs used different workloads (column 'workload'); their rows are kept apart "
                     "and compared only with `single` of the same workload.")
    targets = sorted({r["target_accuracy"] for r in records if r.get("target_accuracy")})
    if len(targets) > 1:
        listed = ", ".join(map(str, targets))
        notes.append(f"The merged runs were scored against different target accuracies ({listed}): "
                     "each record's time to target is against its own run's target; pass --target-accuracy to "
                     "score them all against one.")
    warm = warmup_note(records, run_dir=run_dir)
    extra = [n for n in (batchnorm_note(summaries), test_split_note(summaries)) if n]
    first = [n for n in (superlinear_note(summaries), warm) if n]  # a speed-up the hardware cannot give leads
    notes += first + engine_start_notes(summaries) + ps_notes(summaries) + extra
    prov_groups: "OrderedDict[tuple[str, str], dict[str, Any]]" = OrderedDict()
    for r, (hw, _) in zip(records, groups):
        g = prov_groups.setdefault((str(r.get("run_id", "?")), hw), {
            "run_id": r.get("run_id", "?"), "hardware": hw_labels[hw], "provenance": r.get("provenance") or {},
            "records": 0})
        g["records"] += 1
    return ReportData(
        records=records, summaries=summaries, hardware=hardware, workloads=workloads, headlines=headlines,
        target=target, runs=list(dict.fromkeys(str(r.get("run_id", "?")) for r in records)),
        workload=workloads[0].description if len(workloads) == 1 and records else "", notes=notes,
        provenance=list(prov_groups.values()), generated=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        advice=advise(records, run_dir) if records else None, stragglers=straggler_lines(summaries),
    )


def provenance_lines(prov: dict[str, Any]) -> list[tuple[str, str]]:
    """``(label, value)`` pairs describing one record's provenance, for the reports."""
    v = prov.get("versions") or {}
    out = [("machine", describe_hardware(prov)), ("Python / OS", f"{prov.get('python')}, {prov.get('os')}"),
           ("versions", ", ".join(f"{k} {val}" for k, val in v.items() if val) or "-"),
           ("git commit", str(prov.get("git_commit"))), ("seed", str(prov.get("seed")))]
    env = {k: v for k, v in (prov.get("kernel_env") or {}).items() if v is not None}
    if "kernel_env" in prov:
        out.append(("kernel settings", ", ".join(f"{k}={v}" for k, v in env.items()) or
                    "TensorFlow's defaults (oneDNN on; threads set per process, see details)"))
    if prov.get("launcher"):
        out.append(("launcher", str(prov["launcher"])))
    return out


# ---------------------------------------------------------------------------- Markdown

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
              "temporal eff. = Hermans' ratio of areas under accuracy-vs-time versus `single` (> 1: "
              "more accuracy sooner). Time to target: MLPerf rule (mean of the runs, dropping the fastest "
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
