"""``distbench env``: provenance of this machine and the availability of every strategy."""

from __future__ import annotations

from typing import Any

from distbench import gpu
from distbench.config import ExperimentConfig
from distbench.results import provenance
from distbench.strategies import registry


def strategy_availability(cfg: ExperimentConfig, workers: int = 2) -> list[tuple[str, bool, str, str]]:
    """``(name, ok, reason, description)`` for every registered strategy, using each
    strategy's real probe with ``workers`` workers; the probes run in parallel threads
    (most wait on a subprocess or a package lookup), the result is in registry order."""
    from concurrent.futures import ThreadPoolExecutor

    names = registry.names()
    strategies = [registry.get(n) for n in names]
    with ThreadPoolExecutor(max_workers=min(8, len(names) or 1)) as pool:
        found = list(pool.map(lambda s: s.is_available(cfg, workers), strategies))
    out = []
    for n, s, a in zip(names, strategies, found):
        why = gpu.for_strategy(n, cfg.run.device)  # GPUs it cannot use: no silent CPU fallback (as the harness)
        out.append((n, False, why, s.description) if why else (n, a.ok, a.reason, s.description))
    return out


def engine_builds() -> list[str]:
    """One line per compiled engine saying what it was built against and what is
    installed, e.g. ``Horovod 0.28.1 built against TensorFlow 2.21.0; installed 2.21.0``
    (each strategy's :meth:`~distbench.strategies.base.Strategy.builds`; read from package
    metadata, nothing is imported). Empty when none is installed."""
    classes = dict.fromkeys(registry.strategy_class(n) for n in registry.names())
    return list(dict.fromkeys(line for cls in classes for line in cls.builds()))


def report(cfg: ExperimentConfig, workers: int = 2) -> dict[str, Any]:
    """Provenance, the GPUs and whether TensorFlow can use them (:func:`distbench.gpu.describe`),
    compiled-engine builds (:func:`engine_builds`) and strategy availability, as a JSON-able dict."""
    return {
        "provenance": provenance.collect(cfg.training.seed),
        "gpus": gpu.describe(),
        "builds": engine_builds(),
        "strategies": [{"name": n, "available": ok, "reason": r, "description": d}
                       for n, ok, r, d in strategy_availability(cfg, workers)],
    }
