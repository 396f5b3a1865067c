"""Straggler sweeps: each configuration's time and accuracy against its slow worker's slowdown.

A scenario sweep (``[scenario]``) runs every multi-worker configuration once per straggler
scenario; the ``slowdown = 1`` point is the baseline (every replica timed by the same
mechanism, no delay). For each (strategy, workers, window, link rate, jitter, hardware,
workload) this module lines the sweep's points up against that baseline and states what the
theory says they should show:

- a synchronous step (all-reduce, barrier round) waits for the slowest replica, so the
  training time of a synchronous strategy grows by the delay injected into the slow worker
  (its summed ``(slowdown - 1) x compute`` seconds, recorded in ``details.step_delays``):
  ``growth / injected ~ 1`` (Dean et al., "Large Scale Distributed Deep Networks", NIPS
  2012, and Chen et al., "Revisiting Distributed Synchronous SGD", 2016, on why
  synchronous steps are as slow as the slowest worker);
- an asynchronous replica does not wait: the centre keeps receiving the fast replicas'
  commits, so the time to the target accuracy should grow by much less than the injected
  delay. (Each replica still trains its fixed shard, so the run itself ends when the slow
  replica finishes: its ``train_s`` grows like a synchronous one's.)
"""

from __future__ import annotations

import statistics
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

from distbench.contracts import SyncKind
from distbench.results.stats import ConfigSummary


@dataclass
class StragglerPoint:
    """One configuration of a straggler sweep next to its ``slowdown = 1`` baseline.

    Attributes:
        summary: the configuration.
        slowdown: its slow worker's factor (1 for the baseline itself).
        injected_s: median over ok repeats of the seconds of delay added to the slow
            worker's steps (``None`` when the records do not say).
        train_growth_s: median training time minus the baseline's (seconds).
        ttt_growth_s: MLPerf time to target minus the baseline's (``None`` unless both
            reached the target).
    """

    summary: ConfigSummary
    slowdown: float
    injected_s: float | None
    train_growth_s: float | None
    ttt_growth_s: float | None

    @property
    def train_ratio(self) -> float | None:
        """Training-time growth / injected delay (~1 for a synchronous strategy)."""
        return _ratio(self.train_growth_s, self.injected_s)

    @property
    def ttt_ratio(self) -> float | None:
        """Time-to-target growth / injected delay (well under 1 when the replicas do not wait)."""
        return _ratio(self.ttt_growth_s, self.injected_s)


@dataclass
class StragglerLine:
    """The points of one (strategy, workers, window, jitter, hardware, workload), by slowdown.

    Attributes:
        strategy, workers: the configuration the line follows.
        synchronous: the strategy's steps wait for every replica
            (:attr:`~distbench.strategies.base.Strategy.synchronous`; ``None`` if unknown).
        points: by increasing slowdown, the first being the baseline when it was measured.
        tag: what tells lines of the same strategy and workers apart (window, link rate,
            jitter), ``""``.
    """

    strategy: str
    workers: int
    synchronous: bool | None
    points: list[StragglerPoint]
    tag: str = ""

    @property
    def label(self) -> str:
        """``horovod (2 workers)``, with the tag."""
        return f"{self.strategy} ({self.workers} worker{'s' if self.workers != 1 else ''}{self.tag})"

    @property
    def baseline(self) -> ConfigSummary | None:
        """The ``slowdown = 1`` configuration, if measured."""
        return self.points[0].summary if self.points and self.points[0].slowdown == 1 else None


def injected_delay_s(record: dict[str, Any]) -> float | None:
    """Seconds of delay the record's scenario added to its slow worker's steps, from
    ``details.step_delays`` (keyed by replica index; ``None`` when absent)."""
    sc = record.get("scenario") or {}
    delays = (record.get("details") or {}).get("step_delays") or {}
    if sc.get("worker") is None:
        return None
    d = delays.get(str(sc["worker"]), delays.get(sc["worker"]))  # type: ignore[call-overload]
    return float(d["delay_s"]) if isinstance(d, dict) and d.get("delay_s") is not None else None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def _synchronous(strategy: str) -> bool | None:
    from distbench.strategies import registry

    try:
        return registry.strategy_class(strategy).synchronous
    except Exception:  # a record of a strategy not registered here (a plugin, another version)
        return None


def straggler_lines(summaries: Sequence[ConfigSummary]) -> list[StragglerLine]:
    """Group the scenario-sweep configurations of ``summaries`` into lines against the
    slowdown (see the module docstring); lines with a single point are left out.

    Returns:
        one :class:`StragglerLine` per (strategy, workers, window, link rate, jitter,
        hardware, workload) with at least two slowdowns, in first-seen order.
    """
    groups: "OrderedDict[tuple[Any, ...], list[ConfigSummary]]" = OrderedDict()
    for s in summaries:
        if s.scenario is None or not s.ok:
            continue
        jit = s.scenario.get("jitter_cv") or 0
        key = (s.strategy, s.workers, s.window, s.bandwidth, jit, s.hardware_key, s.workload_key)
        groups.setdefault(key, []).append(s)
    lines = []
    for (strategy, workers, window, bandwidth, jit, _, _), ss in groups.items():
        ss = sorted(ss, key=lambda s: s.slowdown or 1.0)
        if len({s.slowdown for s in ss}) < 2:
            continue
        base = ss[0] if ss[0].slowdown == 1 else None
        points = []
        for s in ss:
            inj = [v for v in (injected_delay_s(r) for r in s.records if r.get("status") == "ok") if v is not None]
            tg = (s.train_s.median - base.train_s.median
                  if base is not None and None not in (s.train_s.median, base.train_s.median) else None)
            ttg = (s.ttt.value - base.ttt.value
                   if base is not None and None not in (s.ttt.value, base.ttt.value) else None)
            points.append(StragglerPoint(s, s.slowdown or 1.0, statistics.median(inj) if inj else None, tg, ttg))
        tag = ((f", window {window}" if window else "") + (f", {bandwidth} links" if bandwidth else "")
               + (f", jitter {jit:g}" if jit else ""))
        lines.append(StragglerLine(strategy, workers, _synchronous(strategy), points, tag))
    return lines


def _pct(new: float | None, old: float | None) -> str:
    return f"{100 * (new / old - 1):+.0f}%" if new is not None and old else "-"


def _s(v: float | None, digits: int = 2) -> str:
    return f"{v:.{digits}f}" if v is not None else "-"


STRAGGLER_TABLE_COLUMNS = ["configuration", "kind", "slowdown", "time to target s", "vs 1x", "train s", "vs 1x",
                           "test acc", "injected delay s", "train growth / delay", "target growth / delay"]


def straggler_table(lines: Sequence[StragglerLine]) -> list[list[str]]:
    """Rows of the report's straggler table (:data:`STRAGGLER_TABLE_COLUMNS`), one per point."""
    rows = []
    for ln in lines:
        base = ln.baseline
        kind = {True: SyncKind.SYNC, False: SyncKind.ASYNC, None: "?"}[ln.synchronous]
        for p in ln.points:
            s = p.summary
            rows.append([ln.label, kind, f"{p.slowdown:g}x",
                         "not reached" if s.ttt.runs and s.ttt.value is None else _s(s.ttt.value),
                         _pct(s.ttt.value, base.ttt.value) if base is not None and p.slowdown != 1 else "",
                         _s(s.train_s.median),
                         _pct(s.train_s.median, base.train_s.median) if base is not None and p.slowdown != 1 else "",
                         _s(s.accuracy.median, 3), _s(p.injected_s),
                         _s(p.train_ratio) if p.slowdown != 1 else "", _s(p.ttt_ratio) if p.slowdown != 1 else ""])
    return rows


def bound_sentences(lines: Sequence[StragglerLine]) -> list[str]:
    """What the sweep says about the bound, one sentence per line at its largest slowdown:
    for a synchronous strategy whether its training time grew by the injected delay, for an
    asynchronous one how much of the delay reached its time to target."""
    out = []
    for ln in lines:
        top = ln.points[-1]
        base = ln.baseline
        if base is None or top.slowdown == 1 or top.injected_s is None:
            continue
        s = top.summary
        head = (f"{ln.label}, worker {s.scenario.get('worker')} {top.slowdown:g}x slower: "  # type: ignore[union-attr]
                f"{top.injected_s:.2f} s of delay injected")
        train = (f"training time {base.train_s.median:.2f} -> {s.train_s.median:.2f} s "
                 f"({top.train_growth_s:+.2f} s, {top.train_ratio:.2f}x the delay)"
                 if top.train_ratio is not None else "training time not compared")
        if s.ttt.value is not None and base.ttt.value is not None:
            ttt = (f"time to target {base.ttt.value:.2f} -> {s.ttt.value:.2f} s "
                   f"({top.ttt_growth_s:+.2f} s, {top.ttt_ratio:.2f}x the delay)")
        else:
            ttt = "time to target: " + ("not reached at 1x" if base.ttt.value is None else "not reached")
        spread = (base.train_s.max - base.train_s.min) if base.train_s.n > 1 else None  # type: ignore[operator]
        if min(base.ok, s.ok) < 2:
            verdict = ("one run each, so run-to-run noise is unknown and this cannot confirm or refute the bound "
                       "(use --repeats 3 or more)")
        elif spread is not None and top.injected_s < spread:
            verdict = (f"the injected delay is within the baseline's run-to-run spread ({spread:.2f} s), so this "
                       "sweep cannot tell")
        elif ln.synchronous:
            r = top.train_ratio
            verdict = ("" if r is None else
                       "as the bound says (a synchronous step waits for the slowest replica)" if 0.5 <= r <= 1.5 else
                       "less than the bound says" if r < 0.5 else
                       "more than the injected delay: contention or run-to-run noise on top of the bound")
        elif ln.synchronous is False and top.ttt_ratio is not None:
            verdict = ("the replicas did not wait for the straggler" if top.ttt_ratio < 0.5 else
                       "the time to target still paid most of the delay")
        else:
            verdict = ""
        out.append(f"{head}; {train}; {ttt}" + (f": {verdict}." if verdict else "."))
    return out


def straggler_verdict(lines: Sequence[StragglerLine], target: float | None) -> str | None:
    """The straggler sweep in one sentence, for the terminal: at the sweep's largest
    slowdown, the configuration fastest to the target, and whose time (to target when both
    it and its 1x run reached it, else training time) grew least and most over its 1x run.

    Args:
        lines: :func:`straggler_lines` of the report.
        target: the target test accuracy (fraction), or None.

    Returns:
        the sentence, or None without a line measured against its 1x baseline.
    """
    lines = [ln for ln in lines if ln.baseline is not None]
    if not lines:
        return None
    top = max(p.slowdown for ln in lines for p in ln.points)
    points = [ln.points[-1] for ln in lines if ln.points[-1].slowdown == top]
    reached = [p.summary for p in points if p.summary.ttt.value is not None]
    if reached:
        fast = min(reached, key=lambda s: s.ttt.value)  # type: ignore[arg-type, return-value]
        lead = f"fastest to {target}: {fast.label}, {fast.ttt.value:.2f} s"
    else:
        lead = f"none reached {target}"
    growth = []
    for ln, p in ((ln, ln.points[-1]) for ln in lines if ln.points[-1].slowdown == top):
        b = ln.baseline
        if p.ttt_growth_s is not None and b is not None and b.ttt.value:
            growth.append((p.summary.ttt.value / b.ttt.value - 1, ln.label, "time to target"))  # type: ignore[operator]
        elif p.train_growth_s is not None and b is not None and b.train_s.median:
            growth.append((p.summary.train_s.median / b.train_s.median - 1, ln.label, "training time"))  # type: ignore
    text = f"Stragglers: with one worker {top:g}x slower, {lead}"
    if len(growth) > 1:
        lo, hi = min(growth), max(growth)
        text += (f"; least slowed: {lo[1]}, {lo[2]} {100 * lo[0]:+.0f}% over its 1x run; most: {hi[1]}, "
                 f"{hi[2]} {100 * hi[0]:+.0f}%")
    elif growth:
        text += f"; {growth[0][1]}: {growth[0][2]} {100 * growth[0][0]:+.0f}% over its 1x run"
    return text + " (per configuration: report.md, Stragglers)."
