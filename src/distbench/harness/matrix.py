"""Expand an experiment config into the list of configurations to run."""

from __future__ import annotations

from dataclasses import dataclass

from distbench.config import ExperimentConfig
from distbench.results.records import config_id, record_key
from distbench.strategies import registry


@dataclass(frozen=True)
class ConfigPoint:
    """One (strategy, workers, repeat) to run."""

    strategy: str
    workers: int
    repeat: int

    @property
    def config_id(self) -> str:
        """See :func:`distbench.results.records.config_id`."""
        return config_id(self.strategy, self.workers)

    @property
    def key(self) -> str:
        """See :func:`distbench.results.records.record_key`."""
        return record_key(self.config_id, self.repeat)


def strategy_names(cfg: ExperimentConfig) -> list[str]:
    """The strategies named by ``run.strategies`` (``all`` = every registered one), validated.

    Raises:
        ConfigError: an unknown strategy name.
    """
    out: list[str] = []
    for name in cfg.run.strategies:
        for n in (registry.names() if name == "all" else [name]):
            registry.get(n)  # raises ConfigError on unknown names
            if n not in out:
                out.append(n)
    return out


def expand(cfg: ExperimentConfig) -> list[ConfigPoint]:
    """Every configuration of the sweep, repeats innermost.

    Strategies with a fixed replica count (``single``) run once per repeat with
    ``workers=1`` whatever ``run.workers`` says.
    """
    points: list[ConfigPoint] = []
    for name in strategy_names(cfg):
        strat = registry.get(name)
        counts = [1] if strat.replicas(2) == 1 else cfg.run.workers
        for w in dict.fromkeys(counts):
            for r in range(cfg.run.repeats):
                points.append(ConfigPoint(name, w, r))
    return points
