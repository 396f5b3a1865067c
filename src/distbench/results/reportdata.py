"""The report's data and its cell formats: :func:`build` turns records into the
:class:`ReportData` every output format (terminal table, ``report.md``, ``report.html``,
``summary.csv``, ``summary.json``, the plots) is rendered from, so the numbers agree
across formats. The renderers (:mod:`distbench.results.report`,
:mod:`distbench.results.htmlpage`, :mod:`distbench.results.plots`) import it; it imports
none of them.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from distbench.gpu import visible_ids
from distbench.results.headline import Headline, HardwareInfo, WorkloadInfo, make_headline
from distbench.results.notes import (batchnorm_note, engine_start_notes, engine_starters, ps_notes,
                                     superlinear_note, test_split_note, warmup_note)
from distbench.results.stats import (ConfigSummary, Spread, describe_workload, hardware_labels, record_groups,
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
    hidden = (prov.get("kernel_env") or {}).get("CUDA_VISIBLE_DEVICES")
    if gpus and hidden is not None and not visible_ids({"CUDA_VISIBLE_DEVICES": hidden}):
        parts.append(f"hidden (CUDA_VISIBLE_DEVICES={hidden!r}): trained on the CPU")
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
