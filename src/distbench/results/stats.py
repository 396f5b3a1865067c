"""Statistics over repeats, per configuration."""

from __future__ import annotations

import statistics
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Spread:
    """Median and range of one metric over repeats (``n`` values, ``None`` when empty)."""

    median: float | None
    min: float | None
    max: float | None
    n: int

    @classmethod
    def of(cls, values: list[float | None]) -> "Spread":
        """Spread of the non-``None`` values."""
        vals = [float(v) for v in values if v is not None]
        if not vals:
            return cls(None, None, None, 0)
        return cls(statistics.median(vals), min(vals), max(vals), len(vals))


@dataclass
class ConfigSummary:
    """One configuration's summary over its repeats.

    Attributes:
        config_id, strategy, workers: the configuration.
        repeats: number of records; ``ok``: how many are ``ok``.
        statuses: status of each record; ``reasons``: distinct reasons of non-ok ones.
        accuracy, loss, train_s, samples_per_s, time_to_target_s: spreads over ok repeats.
        reached_target: ok repeats that reached the target accuracy.
        speedup: median single-device training time / this median training time
            (``None`` without an ok ``single`` record).
        scaling_efficiency: speedup / workers.
    """

    config_id: str
    strategy: str
    workers: int
    repeats: int
    ok: int
    statuses: list[str]
    reasons: list[str]
    accuracy: Spread
    loss: Spread
    train_s: Spread
    samples_per_s: Spread
    time_to_target_s: Spread
    reached_target: int
    window: int | None = None
    speedup: float | None = None
    scaling_efficiency: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def summarize(records: list[dict[str, Any]]) -> list[ConfigSummary]:
    """Group records by ``config_id`` (first-seen order) and summarise each group.

    Speed-up is computed against the ``single`` strategy's median training time among
    the same records.
    """
    groups: "OrderedDict[str, list[dict[str, Any]]]" = OrderedDict()
    for r in records:
        groups.setdefault(r["config_id"], []).append(r)
    out = []
    for cid, rs in groups.items():
        ok = [r for r in rs if r.get("status") == "ok"]
        reasons = list(dict.fromkeys(r.get("reason", "") for r in rs if r.get("status") != "ok"))
        out.append(ConfigSummary(
            config_id=cid, strategy=rs[0]["strategy"], workers=rs[0]["workers"],
            repeats=len(rs), ok=len(ok), statuses=[r.get("status", "?") for r in rs], reasons=reasons,
            accuracy=Spread.of([r.get("final_test_accuracy") for r in ok]),
            loss=Spread.of([r.get("final_test_loss") for r in ok]),
            train_s=Spread.of([(r.get("timings") or {}).get("train_s") for r in ok]),
            samples_per_s=Spread.of([r.get("samples_per_s") for r in ok]),
            time_to_target_s=Spread.of([r.get("time_to_target_s") for r in ok]),
            reached_target=sum(1 for r in ok if r.get("time_to_target_s") is not None),
            window=rs[0].get("communication_window"),
        ))
    base = [s.train_s.median for s in out if s.strategy == "single" and s.train_s.median]
    if base:
        t1 = statistics.median(base)
        for s in out:
            if s.train_s.median:
                s.speedup = t1 / s.train_s.median
                s.scaling_efficiency = s.speedup / s.workers if s.strategy != "single" else 1.0
    return out
