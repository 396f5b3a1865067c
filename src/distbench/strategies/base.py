"""The strategy interface.

A strategy knows whether it can run here (:meth:`Strategy.is_available`, a real probe)
and how to train the workload (:meth:`Strategy.launch`), which the harness calls inside
a fresh child process per configuration. ``launch`` trains in that process
(single-process strategies) or starts and watches more processes through
:mod:`distbench.launch.process` (multi-process strategies), and returns a
:class:`~distbench.training.TrainOutput`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from distbench.cluster.placement import Placement
from distbench.config import ExperimentConfig
from distbench.contracts import StrategyUnavailable  # noqa: F401 (re-exported)
from distbench.config.scenario import Scenario
from distbench.training import TrainOutput
from distbench.training.loop import threads_per_process
from distbench.workload import Workload


@dataclass(frozen=True)
class Availability:
    """Result of an availability probe: ``ok`` and, if not, the ``reason`` (one line)."""

    ok: bool
    reason: str = ""


@dataclass
class LaunchContext:
    """Where and how one configuration runs.

    Attributes:
        workload: the run's workload (already loaded and verified).
        run_dir: the run directory.
        key: ``<config_id>_r<repeat>``, unique per record.
        workers: number of workers/replicas requested.
        artifacts_dir: directory for this configuration's outputs.
        log_dir: directory for per-process logs of this configuration.
        timeout_s: seconds left for this configuration (for nested launchers).
        window: communication window of a window sweep (None = the config's/default).
        scenario: the straggler :class:`~distbench.config.scenario.Scenario` of a scenario sweep
            (None = none); a strategy hands it to every replica's loop core
            (:class:`~distbench.training.loop.TrainLoop`), or raises
            :class:`StrategyUnavailable` if its replicas' steps cannot be delayed.
        placement: where the worker processes run (:class:`~distbench.cluster.placement.Placement`:
            this machine, real hosts or an emulated cluster).
    """

    workload: Workload
    run_dir: Path
    key: str
    workers: int
    artifacts_dir: Path
    log_dir: Path
    timeout_s: float
    window: int | None = None
    scenario: Scenario | None = None
    placement: Placement = field(default_factory=Placement)

    @property
    def config(self) -> ExperimentConfig:
        """The run's experiment config."""
        return self.workload.config

    def threads_per_process(self, processes: int) -> int:
        """Intra-op threads for each of ``processes`` processes sharing this machine:
        ``training.threads`` if set, else ``max(1, cores // processes)``."""
        return threads_per_process(self.config.training.threads, processes)


class Strategy(abc.ABC):
    """Base class of every strategy.

    Class attributes:
        name: registry name (``single``, ``mirrored``, ``spark_ps:adag``...).
        description: one line for ``distbench list``.
        takes_window: the strategy has a communication window (swept by ``ps.windows``).
        scales_learning_rate: the strategy applies ``training.lr_scaling`` (lr x replicas,
            for synchronous data parallelism with one global batch); False for the
            asynchronous parameter servers, whose replicas each step with the base rate.
        synchronous: every optimizer step (or exchange round) waits for every replica, so a
            slow replica slows them all (all-reduce, barrier rounds); False for the
            asynchronous parameter servers, whose replicas commit and pull independently.
        needs: the operational cost in one sentence: what must be installed and running to
            use the strategy on a real cluster (shown by the report's recommendation and by
            ``distbench advise``).
        uses_network: the strategy's processes talk over the network (several processes):
            on a cluster they are placed on its hosts, and an emulated cluster's link rates
            are a sweep dimension for it; False for the single-process strategies, which
            run on the launching host.
        worker_entries: the ``distbench worker NAME`` entry points of this strategy:
            NAME -> ``"module:attribute"`` of a click command, imported only when it runs
            (so an entry may live in the harness, which evaluates and records).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    takes_window: ClassVar[bool] = False
    scales_learning_rate: ClassVar[bool] = True
    synchronous: ClassVar[bool] = True
    needs: ClassVar[str] = ""
    uses_network: ClassVar[bool] = True
    worker_entries: ClassVar[dict[str, str]] = {}

    def is_available(self, config: ExperimentConfig, workers: int) -> Availability:
        """Probe whether this strategy can run here with ``workers`` workers.

        Must be cheap enough to run before each configuration (no engine start-up);
        definitive probes that need the engine raise :class:`StrategyUnavailable`
        from :meth:`launch` instead. Default: available.
        """
        return Availability(True)

    def replicas(self, workers: int) -> int:
        """Number of model replicas this strategy trains with for ``workers``."""
        return workers

    @abc.abstractmethod
    def launch(self, ctx: LaunchContext) -> TrainOutput:
        """Train the workload; runs in the configuration's own child process.

        Raises:
            StrategyUnavailable: a probe found the strategy cannot run here.
            Exception: any training failure (the harness records it as ``failed``).
        """

    @classmethod
    def builds(cls) -> list[str]:
        """Lines for ``distbench env`` on what this strategy's compiled engine was built
        against and what is installed (default none); read from metadata, cheap."""
        return []

    def record_fields(self, ctx: LaunchContext) -> dict[str, Any]:
        """Extra, strategy-specific fields known before training (default none)."""
        return {}
