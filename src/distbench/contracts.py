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
  (where a configuration's processes run);
- :class:`EngineRequest` and :class:`EngineReply`, the messages between the sweep and a
  shared engine (one JSON object per line, checked field by field when read).

The kinds are ``enum.StrEnum``: each member equals, prints and serialises (JSON) as its
string, so a record or a config keeps the plain words.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any


INPUTS_DIR = "inputs"
"""``RUN_DIR/inputs``: where ``distbench.compare`` saves the model instance (``model.keras``)
and the arrays or DataFrame (``data.npz``) it was given, for every process of the run."""


class ConfigError(ValueError):
    """Bad user input (config file, CLI flag, data file): the message says what was
    received, what was expected, and how to fix it."""


def accuracy_hint(value: float, example: str = "0.95") -> str:
    """What follows "expected a test accuracy in (0, 1]" for ``value``: the fraction a
    percentage meant (`` (a fraction: for 95% write 0.95)``), else an example. A value under
    10 is taken for no percentage (user test, helper-35: 1.5 was told "for 1.5% write 0.015")."""
    if isinstance(value, (int, float)) and 10 <= value <= 100:
        return f" (a fraction: for {value:g}% write {value / 100:g})"
    return f", e.g. {example}"


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


def _message(cls: type, line: bytes | str) -> dict[str, Any]:
    """The fields of one JSON line holding a ``cls`` message, each checked against the
    dataclass' field types (``str``, ``int``, ``float``, ``bool``, or ``X | None``).

    Raises:
        ValueError: not a JSON object, a field missing or unknown, or of the wrong type.
    """
    text = line.decode(errors="replace") if isinstance(line, bytes) else line
    try:
        raw = json.loads(text)
    except ValueError:
        raise ValueError(f"{cls.__name__}: {text[:80]!r} is not JSON") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{cls.__name__}: {text[:80]!r} is not a JSON object")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(raw.keys() - fields.keys())
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown field(s) {unknown}; expected {sorted(fields)}")
    types = {"str": (str, "a string"), "int": (int, "an integer"), "float": ((int, float), "a number"),
             "bool": (bool, "true or false")}
    for name, f in fields.items():
        if name not in raw:
            if f.default is dataclasses.MISSING:
                raise ValueError(f"{cls.__name__}: no {name!r}")
            continue
        kind, _, optional = str(f.type).partition(" | ")
        v = raw[name]
        if v is None and optional == "None":
            continue
        accepted, words = types[kind]
        if not isinstance(v, accepted) or (kind != "bool" and isinstance(v, bool)):
            raise ValueError(f"{cls.__name__}: {name} = {v!r:.60} is not {words}")
    return raw


class _Message:
    """One JSON line between two processes of distbench (a dataclass' fields)."""

    def to_line(self) -> bytes:
        """The message as one JSON line (UTF-8, ending in a newline)."""
        return (json.dumps(dataclasses.asdict(self)) + "\n").encode()

    @classmethod
    def from_line(cls, line: bytes | str) -> Any:
        """The message of :meth:`to_line`, an instance of ``cls``.

        Raises:
            ValueError: not such a message (names the field and what was expected).
        """
        return cls(**_message(cls, line))


@dataclasses.dataclass(frozen=True)
class EngineRequest(_Message):
    """One configuration sent to a shared engine: one JSON line on its request channel
    (``distbench.harness.shared_engine``).

    Attributes:
        key: the configuration's record key (``spark_ps-adag_w2_r0``): its artifacts and
            logs directory.
        strategy: the strategy's registry name (``spark_ps:adag``).
        workers: replicas.
        window: the communication window of a window sweep, or None.
        spawn_unix: Unix time (seconds) the sweep sent it: the configuration's spawn.
        scenario: the straggler scenario as ``Scenario.to_arg`` writes it, or None.
    """

    key: str
    strategy: str
    workers: int
    window: int | None = None
    spawn_unix: float = 0.0
    scenario: str | None = None


@dataclasses.dataclass(frozen=True)
class EngineReply(_Message):
    """A shared engine's answer to an :class:`EngineRequest`: the configuration's result is
    in its artifacts directory.

    Attributes:
        key: the request's ``key``.
        closing: the engine ends after this answer (a configuration failed and left its
            processes in an unknown state): the next configuration starts a new engine.
    """

    key: str
    closing: bool = False
