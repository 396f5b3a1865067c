"""``distbench env``: provenance of this machine and the availability of every strategy."""

from __future__ import annotations

from typing import Any

from distbench.config import ExperimentConfig
from distbench.results import provenance
from distbench.strategies import registry


def strategy_availability(cfg: ExperimentConfig, workers: int = 2) -> list[tuple[str, bool, str, str]]:
    """``(name, ok, reason, description)`` for every registered strategy, using each
    strategy's real probe with ``workers`` workers."""
    out = []
    for name in registry.names():
        s = registry.get(name)
        a = s.is_available(cfg, workers)
        out.append((name, a.ok, a.reason, s.description))
    return out


def report(cfg: ExperimentConfig, workers: int = 2) -> dict[str, Any]:
    """Provenance plus strategy availability, as a JSON-able dict."""
    return {
        "provenance": provenance.collect(cfg.training.seed),
        "strategies": [{"name": n, "available": ok, "reason": r, "description": d}
                       for n, ok, r, d in strategy_availability(cfg, workers)],
    }
