"""``distbench report --compare BASE NEW``: what changed between two runs, per configuration.

Modelled on PyTorch's DDP benchmark diff (``benchmarks/distributed/ddp/diff.py``), which
prints each measurement of the base and the new run side by side with the relative
change: here, per configuration, the median and min-max over repeats of the final test
accuracy and of the training time in both runs, the change of the medians (accuracy in
percentage points, time in percent) and whether the change exceeds the run-to-run
spread (the min-max ranges of BASE and NEW do not overlap).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

from distbench.results.report import fmt_spread
from distbench.results.stats import ConfigSummary, Spread, summarize, workload_fields

COMPARE_COLUMNS = ["configuration", "test acc BASE", "test acc NEW", "Δ acc (points)", "train s BASE",
                   "train s NEW", "Δ time", "verdict"]


@dataclass
class CompareRow:
    """One configuration in both runs (``base`` or ``new`` is ``None`` when it ran in one only)."""

    config_id: str
    label: str
    base: ConfigSummary | None
    new: ConfigSummary | None

    @property
    def acc_delta_points(self) -> float | None:
        """Change of the median final test accuracy, percentage points (NEW - BASE)."""
        a, b = self._medians("accuracy")
        return None if a is None or b is None else 100.0 * (b - a)

    @property
    def time_change(self) -> float | None:
        """Relative change of the median training time, NEW / BASE - 1 (negative: faster)."""
        a, b = self._medians("train_s")
        return None if not a or b is None else b / a - 1.0

    def _medians(self, attr: str) -> tuple[float | None, float | None]:
        if self.base is None or self.new is None:
            return None, None
        return getattr(self.base, attr).median, getattr(self.new, attr).median

    @property
    def verdict(self) -> str:
        """``faster``/``slower`` and ``more``/``less accurate`` when the min-max ranges of the
        two runs do not overlap; ``within spread`` otherwise; ``1 run: spread unknown`` when a
        side has a single ok repeat; ``only in BASE/NEW`` when unmatched."""
        if self.base is None:
            return "only in NEW"
        if self.new is None:
            return "only in BASE"
        if not self.base.ok or not self.new.ok:
            return f"BASE {self.base.status}, NEW {self.new.status}"
        if min(self.base.ok, self.new.ok) < 2:
            return "1 run: spread unknown"
        out = []
        if _apart(self.base.train_s, self.new.train_s):
            out.append("faster" if self.new.train_s.median < self.base.train_s.median else "slower")  # type: ignore
        if _apart(self.base.accuracy, self.new.accuracy):
            more = self.new.accuracy.median > self.base.accuracy.median  # type: ignore[operator]
            out.append("more accurate" if more else "less accurate")
        return ", ".join(out) if out else "within spread"


def _apart(a: Spread, b: Spread) -> bool:
    """True when both ranges exist and do not overlap."""
    if None in (a.min, a.max, b.min, b.max):
        return False
    return a.max < b.min or b.max < a.min  # type: ignore[operator]


def compare(base: list[dict[str, Any]], new: list[dict[str, Any]]) -> tuple[list[CompareRow], list[str]]:
    """Match the configurations of two runs by ``config_id`` (in order of appearance).

    Args:
        base, new: the records of the BASE and the NEW run.

    Returns:
        ``(rows, notes)``: one :class:`CompareRow` per configuration, and notes when the
        runs differ in hardware or workload (then time changes mix code and machine).
    """
    sb, sn = summarize(base), summarize(new)
    by_b: "OrderedDict[str, list[ConfigSummary]]" = OrderedDict()
    by_n: "OrderedDict[str, list[ConfigSummary]]" = OrderedDict()
    for s in sb:
        by_b.setdefault(s.config_id, []).append(s)
    for s in sn:
        by_n.setdefault(s.config_id, []).append(s)
    links = _match_links(by_b, by_n)
    rows = []
    for cid in list(dict.fromkeys([*by_b, *by_n])):
        lb, ln = by_b.get(cid, []), by_n.get(cid, [])
        for i in range(max(len(lb), len(ln))):
            b = lb[i] if i < len(lb) else None
            n = ln[i] if i < len(ln) else None
            rows.append(CompareRow(cid, (b or n).label, b, n))  # type: ignore[union-attr]
    notes = []
    hb, hn = {s.hardware_key for s in sb}, {s.hardware_key for s in sn}
    if hb and hn and hb != hn:
        notes.append("BASE and NEW ran on different hardware: time changes mix the code change and the machine "
                     f"(BASE {', '.join(sorted(hb))}; NEW {', '.join(sorted(hn))}).")
    if links:  # user test (helper-16): a one-host and an emulated run compared single only, without a word
        def rates(side: int) -> str:
            return "/".join(sorted({x[side] or "unshaped" for x in links}))

        notes.append(f"{len(links)} configuration(s) differ only in their links (BASE {rates(0)}, NEW {rates(1)}): "
                     "they are compared by strategy and workers, so their time change is the network's as well as "
                     "the code's.")
    changed = workload_changes(base, new)
    if changed:
        notes.append(f"BASE and NEW trained different workloads ({'; '.join(changed)}): their times and accuracies "
                     "differ by that as well as by any code change.")
    notes += _scoring_changes(base, new, rows)
    return rows, notes


def _scoring_changes(base: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]],
                     rows: Sequence[CompareRow]) -> list[str]:
    """Notes where the two runs are scored differently: another target accuracy (the time to
    target measures another thing) or other repeat counts (medians over more runs move less)."""
    def targets(records: Sequence[dict[str, Any]]) -> str:
        return "/".join(f"{t:g}" for t in sorted({r["target_accuracy"] for r in records
                                                   if isinstance(r.get("target_accuracy"), (int, float))}))

    notes = []
    tb, tn = targets(base), targets(new)
    if tb and tn and tb != tn:  # noticed at stop 48: compared silently
        notes.append(f"BASE and NEW were scored against different target accuracies (BASE {tb}, NEW {tn}): their "
                     "times to target measure different things; distbench report RUN_DIR --target-accuracy T "
                     "scores a run against another.")
    runs = [(r.label, r.base.repeats, r.new.repeats) for r in rows
            if r.base is not None and r.new is not None and r.base.repeats != r.new.repeats]
    if runs:
        shown = "; ".join(f"{label} {b} -> {n}" for label, b, n in runs[:4]) + ("; ..." if len(runs) > 4 else "")
        notes.append(f"{len(runs)} configuration(s) ran a different number of times (runs, BASE -> NEW: {shown}): "
                     "a median over fewer runs moves more with the machine's noise.")
    return notes


def _match_links(by_b: "OrderedDict[str, list[ConfigSummary]]", by_n: "OrderedDict[str, list[ConfigSummary]]"
                 ) -> list[tuple[str | None, str | None]]:
    """Match, in place, each configuration that differs between the runs only in its link
    (``config_id``'s ``_bw...`` part, :func:`distbench.results.records.config_id`): NEW's is
    filed under BASE's id. Returns each match's (BASE link, NEW link); ``None``: unshaped."""
    def bare(cid: str) -> str:
        return re.sub(r"_bw[^_]+", "", cid)

    def link(cid: str) -> str | None:
        m = re.search(r"_bw([^_]+)", cid)
        return m[1] if m else None

    out = []
    only_b = {bare(c): c for c in by_b if c not in by_n}
    for cid in [c for c in by_n if c not in by_b]:
        b = only_b.get(bare(cid))
        if b is not None and sum(bare(c) == bare(cid) for c in by_n) == 1:
            by_n[b] = by_n.pop(cid)
            out.append((link(b), link(cid)))
    return out


def _values(records: Sequence[dict[str, Any]], name: str) -> str:
    vals = [v for v in dict.fromkeys(workload_fields(r)[name] for r in records) if v is not None]
    text = [str(v)[:12] if name == "data fingerprint" else str(v) for v in vals]
    return "/".join(text) if text else "-"


def workload_changes(base: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]) -> list[str]:
    """Each workload setting (:func:`~distbench.results.stats.workload_fields`) whose values
    differ between the two runs, as ``name: BASE value -> NEW value`` (several values of a
    run joined by ``/``; a data fingerprint cut to 12 characters)."""
    out = []
    for name in workload_fields({}):
        b, n = _values(base, name), _values(new, name)
        if b != n and base and new:
            out.append(f"{name}: {b} -> {n}")
    return out


def compare_table(rows: Sequence[CompareRow]) -> list[list[str]]:
    """Rows of strings matching :data:`COMPARE_COLUMNS`."""
    out = []
    for r in rows:
        d_acc, d_t = r.acc_delta_points, r.time_change
        out.append([
            r.label,
            fmt_spread(r.base.accuracy) if r.base else "-", fmt_spread(r.new.accuracy) if r.new else "-",
            f"{d_acc:+.1f}" if d_acc is not None else "-",
            fmt_spread(r.base.train_s, 2) if r.base else "-", fmt_spread(r.new.train_s, 2) if r.new else "-",
            f"{100 * d_t:+.1f}%" if d_t is not None else "-",
            r.verdict,
        ])
    return out


def print_comparison(base: list[dict[str, Any]], new: list[dict[str, Any]], base_name: str, new_name: str,
                     console: Any) -> None:
    """Print the comparison of two runs on a :class:`rich.console.Console` within its width:
    first the notes (different hardware; which workload settings differ, ``name: old ->
    new``), then the configurations of both runs (:func:`~distbench.results.terminal.print_fitted`:
    a table, or one block per configuration in a narrow terminal; names are never cut), one
    line per run listing the configurations only it has, and a legend."""
    from rich.markup import escape

    from distbench.results.terminal import console_for, print_fitted

    rows, notes = compare(base, new)
    for n in notes:  # first: they change how every row reads
        console_for(None, console).print(f"note: {escape(n)}")
    both = [r for r in rows if r.base is not None and r.new is not None]
    if both:
        console, _ = print_fitted(list(COMPARE_COLUMNS), compare_table(both), console,
                                  title=f"distbench: BASE {base_name} -> NEW {new_name}",
                                  left=("configuration", "verdict"), block_head=1)
    else:
        console = console_for(None, console)
        console.print(escape(f"no configuration ran in both BASE {base_name} and NEW {new_name}"))
    for side, name in (("BASE", base_name), ("NEW", new_name)):
        only = [r.label for r in rows if (r.new if side == "BASE" else r.base) is None]
        if only:
            console.print(escape(f"only in {side} ({name}): {', '.join(only)}"))
    console.print(escape("test acc and train s: median [min-max] over repeats; Δ acc = NEW - BASE median, "
                         "percentage points; Δ time = NEW / BASE median - 1 (negative: faster); verdict compares "
                         "the min-max ranges (changes whose ranges overlap are within run-to-run spread)."))
