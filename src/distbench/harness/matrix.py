"""Expand an experiment config into the list of configurations to run."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from distbench.config import ExperimentConfig
from distbench.results.advice import AUTO_MAX_RUNS, MoreRuns, more_runs
from distbench.results.records import config_id, config_label, record_key
from distbench.results.store import recorded
from distbench.config.scenario import Scenario
from distbench.strategies import registry


@dataclass(frozen=True)
class ConfigPoint:
    """One (strategy, workers, repeat) to run, with its communication window (a window
    sweep), its link rate (an emulated cluster's bandwidth) and its straggler scenario (a
    scenario sweep); ``None`` where not swept."""

    strategy: str
    workers: int
    repeat: int
    window: int | None = None
    bandwidth: str | None = None
    scenario: Scenario | None = None

    @property
    def config_id(self) -> str:
        """See :func:`distbench.results.records.config_id`."""
        return config_id(self.strategy, self.workers, self.window, self.bandwidth, scenario=self.scenario)

    @property
    def key(self) -> str:
        """See :func:`distbench.results.records.record_key`."""
        return record_key(self.config_id, self.repeat)

    @property
    def label(self) -> str:
        """The configuration as the reports name it (:func:`~distbench.results.records.config_label`):
        ``spark_ps:adag (2 workers)``."""
        return config_label(self.strategy, self.workers, self.window, self.bandwidth,
                            self.scenario.to_dict() if self.scenario is not None else None)


def strategy_names(cfg: ExperimentConfig) -> list[str]:
    """The strategies named by ``run.strategies``, validated and without repeats.

    ``all`` is every registered strategy; a family prefix (``spark_ps``, ``mpi_ps``) or
    ``<prefix>:all`` is every member of that family.

    Raises:
        ConfigError: an unknown strategy name (with close matches suggested).
    """
    families = registry.families()
    out: list[str] = []
    for name in cfg.run.strategies:
        prefix = name[:-len(":all")] if name.endswith(":all") else name
        if name == "all":
            members = registry.names()
        elif prefix in families:
            members = families[prefix]
        else:
            registry.strategy_class(name)  # raises ConfigError on unknown names
            members = [name]
        out += [n for n in members if n not in out]
    return out


def expand(cfg: ExperimentConfig) -> list[ConfigPoint]:
    """Every configuration of the sweep, repeats innermost (one repeat each under
    ``repeats = "auto"``: the sweep adds the extra rounds as it goes, :func:`auto_round`).

    Strategies with a fixed replica count (``single``) run once per repeat with
    ``workers=1`` whatever ``run.workers`` says. Strategies that take a communication
    window (the parameter-server ones) run once per entry of ``ps.windows`` when it is
    set (a window sweep). On an emulated cluster, strategies whose processes talk over the
    network (:attr:`~distbench.strategies.base.Strategy.uses_network`) run once per link rate
    of ``cluster.emulate.bandwidth``; the others run on the launching host, once. Strategies
    with more than one replica run once per straggler scenario of ``[scenario]`` when it
    sets any (``single`` once, unslowed: the reference).
    """
    rates: list[str | None] = [None]
    if cfg.cluster.emulate is not None:
        from distbench.config.cluster import rates as link_rates

        rates = list(link_rates(cfg.cluster))
    points: list[ConfigPoint] = []
    for name in strategy_names(cfg):
        strat = registry.get(name)
        counts = [1] if strat.replicas(2) == 1 else cfg.run.workers
        # a window given twice is one configuration, as a worker count (helper-40: trained twice, one record dropped)
        windows: list[int | None] = list(dict.fromkeys(cfg.ps.windows)) if cfg.ps.windows and strat.takes_window \
            else [None]
        bandwidths = rates if strat.uses_network else [None]
        scenarios: list[Scenario | None] = [None] if counts == [1] else (cfg.scenario.points() or [None])
        for w in dict.fromkeys(counts):
            for win in windows:
                for bw in bandwidths:
                    for sc in scenarios:
                        for r in range(cfg.run.first_repeats):  # "auto": one each, then rounds
                            points.append(ConfigPoint(name, w, r, win, bw, scenario=sc))
    return points


def auto_round(points: Sequence[ConfigPoint], records: list[dict[str, Any]],
               max_runs: int = AUTO_MAX_RUNS) -> tuple[list[ConfigPoint], MoreRuns]:
    """The next round of ``repeats = "auto"``: the sweep's configurations that the
    recommendation cannot separate yet (:func:`~distbench.results.advice.more_runs`, on the
    records of the sweep's configurations), each at its next free repeat index below
    ``max_runs``.

    Args:
        points: the sweep's configurations (:func:`expand`).
        records: the run directory's records.
        max_runs: the most runs of one configuration.

    Returns:
        the points to run (none: the rounds are over) and the decision, whose
        :meth:`~distbench.results.advice.MoreRuns.line` says why.
    """
    first = {p.config_id: p for p in points}  # records of other configurations (an earlier sweep) are not this one's
    mine = [r for r in records if r.get("config_id") in first]
    more = more_runs(mine, max_runs)
    used = recorded(mine)
    out = []
    for s in more.rerun:
        free = [k for k in range(max_runs) if (s.config_id, k) not in used]
        if free:
            out.append(replace(first[s.config_id], repeat=free[0]))
    return out, more
