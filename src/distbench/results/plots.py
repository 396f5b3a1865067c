"""The report's figures, drawn with matplotlib's object API on the Agg canvas.

No pyplot and no global backend switch: each figure is a :class:`matplotlib.figure.Figure`
rendered to PNG bytes, so importing distbench never changes a user's matplotlib state.
Each ``plot_*`` function returns ``None`` when the records hold nothing to draw.
"""

from __future__ import annotations

import io
import statistics
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from distbench.results.stats import ConfigSummary, median_curve

if TYPE_CHECKING:
    from distbench.results.reportdata import ReportData

PLOT_DIR = "plots"
DPI = 100
STYLE = {
    "font.size": 11, "axes.titlesize": 13, "axes.labelsize": 11, "legend.fontsize": 9,
    "xtick.labelsize": 10, "ytick.labelsize": 10, "axes.grid": True, "grid.alpha": 0.3,
    "axes.spines.top": False, "axes.spines.right": False, "figure.facecolor": "white",
}


@dataclass
class Plot:
    """One figure of the report.

    Attributes:
        name: file stem (``accuracy_vs_time``); the PNG is ``plots/<name>.png``.
        title: short title (alt text and heading).
        caption: one or two sentences saying what is drawn and how to read it.
        png: the PNG bytes.
    """

    name: str
    title: str
    caption: str
    png: bytes

    @property
    def rel_path(self) -> str:
        """Path of the PNG relative to the report directory (``plots/<name>.png``)."""
        return f"{PLOT_DIR}/{self.name}.png"


PLOT_NAMES = ("accuracy_vs_time", "time_and_accuracy", "throughput_vs_workers", "window_sweep", "bandwidth_sweep",
              "straggler_sweep", "staleness")


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    return buf.getvalue()


def _label(s: ConfigSummary, data: "ReportData") -> str:
    return s.label + data.tag(s)


def _two_lines(s: ConfigSummary, data: "ReportData") -> str:
    """The configuration's label, broken after the strategy name when it is long."""
    one = _label(s, data)
    return one if len(one) <= 30 else f"{s.strategy}\n{one[len(s.strategy):].strip()}"


def _colors(summaries: Sequence[ConfigSummary]) -> dict[int, Any]:
    """A stable colour per configuration (tab10, then tab20 for more than ten)."""
    cmap = matplotlib.colormaps["tab10" if len(summaries) <= 10 else "tab20"]
    return {id(s): cmap(i % cmap.N) for i, s in enumerate(summaries)}


def _ok_records(s: ConfigSummary) -> list[dict[str, Any]]:
    return [r for r in s.records if r.get("status") == "ok"]


def _legend(ax: Any, n: int) -> None:
    if n > 6:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, ncol=1 if n <= 18 else 2)
    elif n:
        ax.legend(loc="best", frameon=True)


# ---------------------------------------------------------------------------- the plots

def plot_accuracy_vs_time(data: "ReportData") -> Plot | None:
    """Test accuracy versus wall-clock seconds since training start: one line per
    configuration (median over repeats), with the min-max band over repeats."""
    ok = [s for s in data.summaries if s.ok and any(r.get("curve") for r in _ok_records(s))]
    if not ok:
        return None
    colors = _colors(ok)
    fig = Figure(figsize=(11, 5.5))
    ax = fig.subplots()
    for s in ok:
        ts, med, lo, hi = median_curve([r.get("curve") or [] for r in _ok_records(s)])
        c = colors[id(s)]
        ax.plot(ts, med, marker="o", ms=3.5, lw=1.8, color=c, label=_label(s, data))
        if s.ok > 1:
            ax.fill_between(ts, lo, hi, color=c, alpha=0.18, lw=0)
    if data.target:
        ax.axhline(data.target, color="0.35", ls="--", lw=1)
        ax.annotate(f"target {data.target}", xy=(1, data.target), xycoords=("axes fraction", "data"),
                    xytext=(-4, -12), textcoords="offset points", ha="right", fontsize=9, color="0.3")
    ax.set_xlabel("wall-clock time since training start (s)")
    ax.set_ylabel("test accuracy (fraction)")
    ax.set_title("Test accuracy vs wall-clock time")
    ax.set_xlim(left=0)
    _legend(ax, len(ok))
    return Plot("accuracy_vs_time", "Test accuracy vs wall-clock time",
                "One point per evaluated snapshot (epoch end): median test accuracy over repeats at the "
                "median time of that snapshot; the shaded band is the min-max accuracy over repeats. Time "
                "counts training only (start-up and evaluation excluded).",
                _png(fig))


def plot_time_and_accuracy(data: "ReportData") -> Plot | None:
    """Training time (bars) and final test accuracy (points) per configuration, each
    with the min-max range over repeats as error bars."""
    ok = [s for s in data.summaries if s.ok and s.train_s.median is not None]
    if not ok:
        return None
    n = len(ok)
    fig = Figure(figsize=(11, max(2.6, 0.42 * n + 1.4)))
    ax_t, ax_a = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [1.15, 1]})
    colors = _colors(ok)
    ys = list(range(n))[::-1]
    labels = [_two_lines(s, data) for s in ok]
    for y, s in zip(ys, ok):
        c = colors[id(s)]
        t = s.train_s
        ax_t.barh(y, t.median, color=c, alpha=0.85, height=0.62)
        ax_t.errorbar(t.median, y, xerr=[[t.median - t.min], [t.max - t.median]], fmt="none", ecolor="0.2",
                      capsize=3, lw=1)
        ax_t.annotate(f"{t.median:.2f} s", xy=(t.max, y), xytext=(4, 0), textcoords="offset points",
                      va="center", fontsize=9)
        a = s.accuracy
        if a.median is not None:
            ax_a.errorbar(a.median, y, xerr=[[a.median - a.min], [a.max - a.median]], fmt="o", color=c,
                          ecolor=c, capsize=3, ms=7)
            ax_a.annotate(f"{a.median:.3f}", xy=(a.max, y), xytext=(5, 0), textcoords="offset points",
                          va="center", fontsize=9)
    ax_t.set_yticks(ys, labels)
    ax_t.set_xlabel("training time (s), median; whiskers: min-max")
    ax_t.set_title("Training time")
    ax_t.set_xlim(0, max(s.train_s.max for s in ok) * 1.22)  # type: ignore[type-var]
    accs = [v for s in ok for v in (s.accuracy.min, s.accuracy.max) if v is not None]
    if accs:
        lo, hi = min(accs), max(accs)
        pad = max(0.01, (hi - lo) * 0.25)
        ax_a.set_xlim(max(0.0, lo - pad), min(1.0, hi + pad) + pad * 0.8)
    if data.target:
        ax_a.axvline(data.target, color="0.35", ls="--", lw=1)
    ax_a.set_xlabel("final test accuracy (fraction), median; whiskers: min-max")
    ax_a.set_title("Final test accuracy")
    for ax in (ax_t, ax_a):
        ax.grid(axis="y", visible=False)
    fig.subplots_adjust(wspace=0.08)
    return Plot("time_and_accuracy", "Training time and final accuracy per configuration",
                "Left: median training time per configuration (bar) with the min-max over repeats. Right: "
                "median final test accuracy with the min-max over repeats; the accuracy axis is zoomed "
                "to the measured range.", _png(fig))


def plot_throughput_vs_workers(data: "ReportData") -> Plot | None:
    """Median samples/s versus worker count per strategy, with the ideal linear scaling of
    the single-device baseline (or of each strategy's smallest worker count). In a straggler
    sweep only the unslowed (1x) configurations are drawn."""
    ok = [s for s in data.summaries if s.ok and s.samples_per_s.median is not None and s.straggler in ("", "1x")]
    if len({s.workers for s in ok}) < 2:
        return None
    groups: "OrderedDict[tuple[str, Any, str], list[ConfigSummary]]" = OrderedDict()
    for s in ok:
        groups.setdefault((s.strategy, s.window, data.tag(s) + (f", {s.bandwidth} links" if s.bandwidth else "")),
                          []).append(s)
    fig = Figure(figsize=(11, 5.5))
    ax = fig.subplots()
    cmap = matplotlib.colormaps["tab10" if len(groups) <= 10 else "tab20"]
    workers = sorted({s.workers for s in ok})
    for i, ((strategy, window, tag), ss) in enumerate(groups.items()):
        ss = sorted(ss, key=lambda s: s.workers)
        c = cmap(i % cmap.N)
        xs = [s.workers for s in ss]
        med = [s.samples_per_s.median for s in ss]
        err = [[m - s.samples_per_s.min for m, s in zip(med, ss)], [s.samples_per_s.max - m for m, s in zip(med, ss)]]
        name = strategy + (f" (window {window})" if window else "") + tag
        ax.errorbar(xs, med, yerr=err, marker="o", color=c, capsize=3, lw=1.8, label=name)
        if strategy != "single" and len(xs) > 1 and not any(s.strategy == "single" and data.tag(s) == tag for s in ok):
            ax.plot(xs, [med[0] * w / xs[0] for w in xs], ls=":", color=c, lw=1.2)
    for j, tag in enumerate(dict.fromkeys(data.tag(s) for s in ok)):
        base = [s.samples_per_s.median for s in ok if s.strategy == "single" and data.tag(s) == tag]
        if base:
            b = statistics.median(base)  # type: ignore[type-var]
            ax.plot(workers, [b * w for w in workers], ls=("--", "-.", ":")[j % 3], color="0.3", lw=1.2,
                    label="ideal linear: single x workers" + tag)
    ax.set_xticks(workers)
    ax.set_xlabel("workers (replicas)")
    ax.set_ylabel("throughput (samples/s, all replicas)")
    ax.set_title("Throughput vs workers")
    ax.set_ylim(bottom=0)
    _legend(ax, len(groups) + 1)
    return Plot("throughput_vs_workers", "Throughput vs workers",
                "Median training throughput (samples per second over all replicas) with min-max over repeats. "
                "The dashed line is ideal linear scaling of the single-device throughput; dotted lines "
                "(without a single baseline) scale each strategy's smallest worker count.", _png(fig))


def plot_window_sweep(data: "ReportData") -> Plot | None:
    """Final accuracy and training time versus the communication window, one line per
    parameter-server strategy and worker count; ``single`` as a dashed reference."""
    swept = [s for s in data.summaries if s.ok and s.window]
    groups: "OrderedDict[tuple[str, int, str], list[ConfigSummary]]" = OrderedDict()
    for s in swept:
        groups.setdefault((s.strategy, s.workers, data.tag(s)), []).append(s)
    if not any(len({s.window for s in g}) > 1 for g in groups.values()):
        return None
    fig = Figure(figsize=(11, 4.8))
    ax_a, ax_t = fig.subplots(1, 2)
    cmap = matplotlib.colormaps["tab10"]
    windows = sorted({s.window for s in swept})  # type: ignore[type-var]
    for i, ((strategy, workers, tag), ss) in enumerate(groups.items()):
        ss = sorted(ss, key=lambda s: s.window)  # type: ignore[arg-type, return-value]
        c = cmap(i % 10)
        name = f"{strategy} ({workers} workers)" + tag
        for ax, get in ((ax_a, lambda s: s.accuracy), (ax_t, lambda s: s.train_s)):
            sp = [get(s) for s in ss]
            ax.errorbar([s.window for s in ss], [p.median for p in sp],
                        yerr=[[p.median - p.min for p in sp], [p.max - p.median for p in sp]],
                        marker="o", color=c, capsize=3, lw=1.8, label=name)
    swept_tags = {data.tag(s) for s in swept}
    for s in data.summaries:
        if s.strategy == "single" and s.ok and s.accuracy.median is not None and data.tag(s) in swept_tags:
            lab = "single (reference)" + data.tag(s)
            ax_a.axhline(s.accuracy.median, color="0.3", ls="--", lw=1.1, label=lab)
            ax_t.axhline(s.train_s.median, color="0.3", ls="--", lw=1.1, label=lab)
    for ax in (ax_a, ax_t):
        ax.set_xscale("log")
        ax.set_xticks(windows, [str(w) for w in windows])
        ax.minorticks_off()
        ax.set_xlabel("communication window (local mini-batches per exchange)")
    ax_a.set_ylabel("final test accuracy (fraction)")
    ax_a.set_title("Accuracy vs communication window")
    ax_t.set_ylabel("training time (s)")
    ax_t.set_ylim(bottom=0)
    ax_t.set_title("Training time vs communication window")
    ax_t.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    fig.subplots_adjust(wspace=0.3)
    return Plot("window_sweep", "Window sweep",
                "Median final test accuracy (left) and training time (right) per communication window, "
                "with min-max over repeats; the dashed line is the single-device baseline.", _png(fig))


def _rate_bits(rate: str) -> float | None:
    """A tc rate (``100mbit``, ``1gbit``) in bits/s; None for ``unlimited`` or an unknown form."""
    from distbench.contracts import ConfigError
    from distbench.config.values import parse_rate

    try:
        return parse_rate("bandwidth", rate)
    except ConfigError:  # a hand-edited record: drawn where unlimited links are
        return None


def plot_bandwidth_sweep(data: "ReportData") -> Plot | None:
    """Time to the target accuracy and throughput versus the emulated link rate, one line
    per strategy and worker count (``unlimited`` links drawn right of the fastest rate);
    ``single`` (which runs on one host, no links) as a dashed reference."""
    swept = [s for s in data.summaries if s.ok and s.bandwidth]
    groups: "OrderedDict[tuple[str, int, str], list[ConfigSummary]]" = OrderedDict()
    for s in swept:
        groups.setdefault((s.strategy, s.workers, data.tag(s)), []).append(s)
    if not any(len({s.bandwidth for s in g}) > 1 for g in groups.values()):
        return None
    rates = {b: _rate_bits(b) for b in {s.bandwidth for s in swept}}  # type: ignore[misc]
    finite = sorted(v for v in rates.values() if v)
    top = (finite[-1] * 4) if finite else 1e9
    x_of = {b: (v if v else top) for b, v in rates.items()}
    fig = Figure(figsize=(11, 4.8))
    ax_t, ax_s = fig.subplots(1, 2)
    cmap = matplotlib.colormaps["tab10" if len(groups) <= 10 else "tab20"]
    for i, ((strategy, workers, tag), ss) in enumerate(groups.items()):
        ss = sorted(ss, key=lambda s: x_of[s.bandwidth])  # type: ignore[index]
        c = cmap(i % cmap.N)
        name = f"{strategy} ({workers} workers)" + tag
        for ax, get in ((ax_t, lambda s: s.time_to_target_s), (ax_s, lambda s: s.samples_per_s)):
            pts = [(x_of[s.bandwidth], get(s)) for s in ss if get(s).median is not None]  # type: ignore[index]
            if pts:
                ax.errorbar([x for x, _ in pts], [p.median for _, p in pts],
                            yerr=[[p.median - p.min for _, p in pts], [p.max - p.median for _, p in pts]],
                            marker="o", color=c, capsize=3, lw=1.8, label=name)
    for s in data.summaries:
        if s.strategy == "single" and s.ok and not s.bandwidth:
            if s.time_to_target_s.median is not None:
                ax_t.axhline(s.time_to_target_s.median, color="0.3", ls="--", lw=1.1, label="single (one host)")
            if s.samples_per_s.median is not None:
                ax_s.axhline(s.samples_per_s.median, color="0.3", ls="--", lw=1.1, label="single (one host)")
    ticks = sorted(set(x_of.values()))
    labels = {x: b for b, x in x_of.items()}
    for ax in (ax_t, ax_s):
        ax.set_xscale("log")
        ax.set_xticks(ticks, [labels[x] for x in ticks])
        ax.minorticks_off()
        ax.set_xlabel("link rate per host (tc tbf)")
        ax.set_ylim(bottom=0)
    ax_t.set_ylabel("time to target accuracy (s)")
    ax_t.set_title("Time to accuracy vs link rate")
    ax_s.set_ylabel("throughput (samples/s, all replicas)")
    ax_s.set_title("Throughput vs link rate")
    ax_s.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    fig.subplots_adjust(wspace=0.3)
    return Plot("bandwidth_sweep", "Bandwidth sweep",
                "Median time to the target accuracy (left; configurations that never reached it are left out) "
                "and training throughput (right) per emulated link rate, with min-max over repeats. Only the rate "
                "is emulated, not latency; the dashed line is the single-device baseline on the launching host.",
                _png(fig))


def plot_straggler_sweep(data: "ReportData") -> Plot | None:
    """Time to target, training time and final accuracy versus the slow worker's slowdown:
    one line per strategy and worker count (solid: synchronous, dashed: asynchronous), with
    min-max over repeats; ``single`` as a dotted reference."""
    from distbench.results.stragglers import straggler_lines

    lines = straggler_lines(data.summaries)
    if not lines:
        return None
    fig = Figure(figsize=(14, 4.8))
    ax_ttt, ax_t, ax_a = fig.subplots(1, 3)
    cmap = matplotlib.colormaps["tab10" if len(lines) <= 10 else "tab20"]
    for i, ln in enumerate(lines):
        c, ls = cmap(i % cmap.N), "--" if ln.synchronous is False else "-"
        xs = [p.slowdown for p in ln.points]
        name = ln.label + ("" if ln.synchronous is None else " (sync)" if ln.synchronous else " (async)")
        ttt = [(p.slowdown, p.summary.ttt.value) for p in ln.points if p.summary.ttt.value is not None]
        if ttt:
            ax_ttt.plot([x for x, _ in ttt], [v for _, v in ttt], marker="o", ls=ls, color=c, lw=1.8, label=name)
        for ax, get in ((ax_t, lambda s: s.train_s), (ax_a, lambda s: s.accuracy)):
            sp = [get(p.summary) for p in ln.points]
            err = [[q.median - q.min for q in sp], [q.max - q.median for q in sp]]
            ax.errorbar(xs, [q.median for q in sp], yerr=err,
                        marker="o", ls=ls, color=c, capsize=3, lw=1.8, label=name)
    single = [s for s in data.summaries if s.strategy == "single" and s.ok]
    if single:
        s = single[0]
        for ax, v in ((ax_ttt, s.ttt.value), (ax_t, s.train_s.median), (ax_a, s.accuracy.median)):
            if v is not None:
                ax.axhline(v, color="0.3", ls=":", lw=1.2, label="single (reference)")
    slowdowns = sorted({p.slowdown for ln in lines for p in ln.points})
    for ax, ylabel, title in ((ax_ttt, f"time to {data.target or 'target'} test accuracy (s, MLPerf rule)",
                               "Time to target vs slowdown"),
                              (ax_t, "training time (s)", "Training time vs slowdown"),
                              (ax_a, "final test accuracy (fraction)", "Final accuracy vs slowdown")):
        ax.set_xticks(slowdowns, [f"{x:g}x" for x in slowdowns])
        ax.set_xlabel("slowdown of the slow worker")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
    ax_ttt.set_ylim(bottom=0)
    ax_t.set_ylim(bottom=0)
    ax_a.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    fig.subplots_adjust(wspace=0.32)
    return Plot("straggler_sweep", "Straggler sweep",
                "One worker's every step takes the slowdown times its own measured compute time. Left: time to "
                "the target accuracy (points only where it was reached); middle: training time; right: final test "
                "accuracy; median with min-max over repeats. Solid lines: synchronous strategies (a step waits for "
                "the slowest replica); dashed: asynchronous ones.", _png(fig))


def staleness_histogram(s: ConfigSummary) -> dict[int, int]:
    """Staleness histogram {tau: commits} summed over the configuration's ok repeats."""
    out: dict[int, int] = {}
    for r in _ok_records(s):
        hist = (((r.get("details") or {}).get("staleness") or {}).get("histogram")) or {}
        for tau, count in hist.items():
            out[int(tau)] = out.get(int(tau), 0) + int(count)
    return dict(sorted(out.items()))


def plot_staleness(data: "ReportData") -> Plot | None:
    """Staleness histograms of parameter-server configurations (small multiples, log scale)."""
    ps = [(s, h) for s in data.summaries if s.ok for h in [staleness_histogram(s)] if h and sum(h.values())]
    if not ps:
        return None
    ncols = min(4, len(ps))
    nrows = -(-len(ps) // ncols)
    fig = Figure(figsize=(3.0 * ncols + 1.2, 2.7 * nrows + 0.8))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    floor = min(0.5 / sum(h.values()) for _, h in ps)
    for ax, (s, hist) in zip(axes.flat, ps):
        total = sum(hist.values())
        taus = list(hist)
        ax.bar(taus, [hist[t] / total for t in taus], width=0.8, color="#4C72B0")
        mean = sum(t * c for t, c in hist.items()) / total
        ax.set_title(_two_lines(s, data), fontsize=10)
        ax.text(0.97, 0.95, f"{total} commits\nmean τ {mean:.2f}\nmax τ {max(taus)}", transform=ax.transAxes,
                ha="right", va="top", fontsize=8.5, color="0.2",
                bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": "0.8", "alpha": 0.9})
        ax.set_yscale("log")
        ax.set_ylim(floor, 3.0)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
        ax.set_xlim(-0.7, max(6, max(taus)) + 0.7)
        if max(taus) <= 12:
            ax.set_xticks(range(0, max(6, max(taus)) + 1))
    for ax in list(axes.flat)[len(ps):]:
        ax.set_visible(False)
    fig.supxlabel("staleness τ (server updates since the worker's last pull)", fontsize=11)
    fig.supylabel("fraction of commits (log scale)", fontsize=11)
    fig.tight_layout()
    idle = [s.label for s, h in ps if s.workers > 1 and set(h) == {0}]
    return Plot("staleness", "Staleness histograms",
                "Distribution of the staleness of each commit to the parameter server, summed over repeats: "
                "τ = updates the server applied between the worker's pull and its commit. Log scale, so "
                "rare stale commits stay visible." + (
                    f" Every commit of {', '.join(idle)} has τ = 0: no other worker committed between a worker's "
                    "pull and its commit, so the replicas barely overlapped in time and that row's speed is not "
                    "parallelism." if idle else ""), _png(fig))


PLOTTERS: list[Callable[["ReportData"], Plot | None]] = [
    plot_accuracy_vs_time, plot_time_and_accuracy, plot_throughput_vs_workers, plot_window_sweep,
    plot_bandwidth_sweep, plot_straggler_sweep, plot_staleness,
]


def make_plots(data: "ReportData") -> list[Plot]:
    """Every plot that applies to ``data``, in report order."""
    with matplotlib.rc_context(STYLE):
        return [p for p in (f(data) for f in PLOTTERS) if p is not None]


def write_pngs(plots: Sequence[Plot], plot_dir: Path) -> list[Path]:
    """Write each plot as ``plot_dir/<name>.png``; remove stale PNGs of known plot names that
    no longer apply. Returns the written paths."""
    plot_dir.mkdir(parents=True, exist_ok=True)
    names = {p.name for p in plots}
    for stale in PLOT_NAMES:
        if stale not in names and (plot_dir / f"{stale}.png").exists():
            (plot_dir / f"{stale}.png").unlink()
    paths = []
    for p in plots:
        path = plot_dir / f"{p.name}.png"
        path.write_bytes(p.png)
        paths.append(path)
    return paths
