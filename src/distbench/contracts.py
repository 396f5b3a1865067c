"""The ground floor: the errors and kinds every layer of distbench shares. It imports
nothing else of distbench, so any module may import it without an upward import
(docs/architecture.md, "Layers").

- :class:`ConfigError` (bad user input) and :class:`DataError` (bad data), the errors the
  CLI prints as one line and the Python API raises;
- :class:`TrainingFailed` (a strategy's training failed) and :class:`StrategyUnavailable`
  (it cannot run here), which the harness records as ``failed`` and ``unavailable``;
- :class:`Status`, how a configuration ended, as the records spell it;
- the other kinds written as strings in configs, records and reports: :class:`SyncKind`
  (how a parameter server's replicas meet: ``sync`` or ``async``) and :class:`PlacementKind`
  (where a configuration's processes run).

They are ``enum.StrEnum``: each member equals, prints and serialises (JSON) as its string, so
a record or a config keeps the plain words.
"""

from __future__ import annotations

import enum
from typing import Any


class ConfigError(ValueError):
    """Bad user input (config file, CLI flag, data file): the message says what was
    received, what was expected, and how to fix it."""


class DataError(ConfigError):
    """A data file is missing, corrupt, or holds values outside what was expected."""


class TrainingFailed(RuntimeError):
    """A strategy's training failed; raised by strategies and engines alike.

    Args:
        message: one line (or more: the first says who failed and how).
        failed_process: which process failed (``rank 1``, ``worker 0``, ``mpirun``...), or None.
        details: JSON-able facts kept in the failed record (e.g. the parameter server's
            accounting at the failure).
        reason: the one line the record shows (default: the message's first line), when
            the message goes on with log tails.
    """

    def __init__(self, message: str, failed_process: str | None = None,
                 details: dict[str, Any] | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.failed_process = failed_process
        self.details = details
        self.reason = reason if reason is not None else (message.splitlines() or [""])[0]



class StrategyUnavailable(RuntimeError):
    """Raised inside :meth:`Strategy.launch` when a probe there finds the strategy
    cannot run (e.g. no TPU); the harness records ``status="unavailable"`` with the
    message as reason."""


class Status(str, enum.Enum):
    """How a configuration ended (a string in JSON: ``"ok"``, ``"failed"``, ...).

    ``ok``: it trained and was evaluated; ``failed``: it crashed, was refused by an engine
    or its replicas diverged (``reason`` says which); ``timeout``: killed at
    ``run.timeout_s``; ``unavailable``: it cannot run on this machine (``reason``: why).
    """

    OK = "ok"
    FAILED = "failed"
    TIMEOUT = "timeout"
    UNAVAILABLE = "unavailable"

    def __str__(self) -> str:
        return self.value


class SyncKind(enum.StrEnum):
    """How the replicas of a parameter-server optimizer meet the centre variable.

    ``async``: each replica commits and pulls on its own clock (DOWNPOUR, ADAG, DynSGD,
    AEASGD, EAMSGD); ``sync``: barrier rounds, every replica's contribution in each (EASGD,
    model averaging).
    """

    SYNC = "sync"
    ASYNC = "async"


class PlacementKind(enum.StrEnum):
    """Where a configuration's processes run: ``local`` (this machine), ``ssh`` (real hosts
    of ``[cluster] hosts``) or ``emulated`` (network namespaces of ``[cluster] emulate``)."""

    LOCAL = "local"
    SSH = "ssh"
    EMULATED = "emulated"
