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


def engine_builds() -> list[str]:
    """One line per compiled engine saying what it was built against and what is
    installed, e.g. ``Horovod 0.28.1 built against TensorFlow 2.21.0; installed 2.21.0``
    (each strategy's :meth:`~distbench.strategies.base.Strategy.builds`; read from package
    metadata, nothing is imported). Empty when none is installed."""
    classes = dict.fromkeys(registry.strategy_class(n) for n in registry.names())
    return list(dict.fromkeys(line for cls in classes for line in cls.builds()))


def report(cfg: ExperimentConfig, workers: int = 2) -> dict[str, Any]:
    """Provenance, compiled-engine builds (:func:`engine_builds`) and strategy
    availability, as a JSON-able dict."""
    return {
        "provenance": provenance.collect(cfg.training.seed),
        "builds": engine_builds(),
        "strategies": [{"name": n, "available": ok, "reason": r, "description": d}
                       for n, ok, r, d in strategy_availability(cfg, workers)],
    }
