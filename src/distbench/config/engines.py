"""The engine sections that need no module of their own: ``[ps]`` (the parameter-server
optimizers), ``[tf]`` (TensorFlow's multi-process strategies) and ``[mpi]``, and their checks.
``[spark]`` is in :mod:`distbench.config.spark`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from distbench.contracts import ConfigError
from distbench.config.values import at_least, choice


@dataclass
class PSConfig:
    """Parameter-server optimizer settings (ps_async). 0 / "" = the optimizer's default.

    Attributes:
        communication_window: local mini-batches between commits (0 = default).
        rho: elastic force for AEASGD/EAMSGD/EASGD (Zhang et al. 2015).
        learning_rate: eta in alpha = eta * rho for the elastic optimizers.
        momentum: EAMSGD Nesterov momentum.
        windows: communication windows to sweep (one configuration each); empty = none.
        host: address the server binds (reachable by executors).
        port: server port, 0 = any free port.
    """

    communication_window: int = 0
    rho: float = 5.0
    learning_rate: float = 0.1
    momentum: float = 0.9
    windows: list[int] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 0


@dataclass
class TFConfig:
    """Settings of TensorFlow's multi-process strategies.

    Attributes:
        collective: MultiWorkerMirroredStrategy's all-reduce: ``ring`` | ``nccl`` | ``auto``.
        ps_tasks: parameter-server tasks of ``tf_ps``.
    """

    collective: str = "ring"
    ps_tasks: int = 1


@dataclass
class MPIConfig:
    """Settings of the ``mpi_ps`` strategies' MPI launch.

    Attributes:
        share_engine: ``distbench run`` runs the sweep's ``mpi_ps`` configurations on one
            ``mpirun`` job whose ranks stay up between them (one per rank count and thread
            count, :mod:`distbench.harness.mpi_engine`); false = a new ``mpirun`` per
            configuration. Only on this machine (not under ``[cluster]``).
    """

    share_engine: bool = True


ELASTIC = ("aeasgd", "eamsgd", "easgd")
"""The elastic optimizers: the ones ``ps.rho`` and ``ps.learning_rate`` set (the optimizers of
:data:`distbench.ps_async.rules.DEFAULTS` with a ``rho``)."""


def check_engines(ps: PSConfig, tf: TFConfig, strategies: Sequence[str] = ELASTIC) -> None:
    """``[ps]`` and ``[tf]``: windows, the elastic moving rate (where ``strategies``, the
    sweep's, has an elastic optimizer), port; collective, ps tasks."""
    at_least("ps.communication_window", ps.communication_window, 0)
    for i, w in enumerate(ps.windows):
        at_least(f"ps.windows[{i}]", w)
    if not 0 < ps.rho < math.inf:
        raise ConfigError(f"ps.rho = {ps.rho!r}: must be a finite number > 0")
    if not 0 < ps.learning_rate < math.inf:
        raise ConfigError(f"ps.learning_rate = {ps.learning_rate!r}: must be a finite number > 0")
    if not 0 <= ps.momentum < 1:  # helper-45: -0.5 passed (only warned about as unused)
        raise ConfigError(f"ps.momentum = {ps.momentum!r}: must be in [0, 1) (EAMSGD's Nesterov momentum delta, "
                          "Zhang, Choromanska, LeCun 2015, Algorithm 2); 0 turns it off")
    alpha = ps.learning_rate * ps.rho
    elastic = any(s == "all" or s.rpartition(":")[2] in ELASTIC for s in strategies)  # helper-42: not `single`
    if alpha >= 1 and elastic:  # each exchange moves a replica and the centre alpha of the way to each other
        raise ConfigError(f"ps.learning_rate x ps.rho = {ps.learning_rate:g} x {ps.rho:g} = {alpha:g}: the "
                          "elastic optimizers' moving rate alpha must be < 1 (each exchange moves the replica and "
                          "the centre alpha of the way towards each other; 1 or more overshoots, Zhang, "
                          "Choromanska, LeCun 2015); lower ps.learning_rate or ps.rho, e.g. 0.1 x 5 = 0.5")
    choice("tf.collective", tf.collective, ("ring", "nccl", "auto"))
    at_least("tf.ps_tasks", tf.ps_tasks)
    if not 0 <= ps.port <= 65535:
        raise ConfigError(f"ps.port = {ps.port!r}: must be in 0..65535 (0 = any free port)")
