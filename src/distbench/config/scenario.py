"""Straggler scenarios: the ``[scenario]`` section of the config and one point of its sweep.

A scenario slows replicas of a configuration: one replica's every step takes ``slowdown``
x its own measured compute time, and optionally every replica's steps get random delays
(jitter). The delay itself is applied by the loop core
(:class:`distbench.training.loop.StepDelay`), the same way in every strategy's loop.
:mod:`distbench.config` registers the section; its parsing and checks live here (on
:mod:`distbench.config.values`) and raise :class:`~distbench.contracts.ConfigError`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from distbench.contracts import ConfigError
from distbench.config.values import build, coerce

STRAGGLER_EXAMPLE = "[{ worker = 1, slowdown = 2.0 }]"
JITTER_EXAMPLE = "{ cv = 0.3, seed = 7 }"


@dataclass(frozen=True)
class Scenario:
    """One point of the straggler sweep: what slows the replicas of one configuration.

    Attributes:
        worker: the slowed replica (worker index, Horovod rank, parameter-server replica
            id; 0-based); ``None`` when no replica is slowed (jitter only).
        slowdown: the slowed replica's every step takes ``slowdown`` x its own measured
            compute time (>= 1; 1 = not slowed: the sweep's baseline).
        jitter_cv: random per-step delays on every replica, as the coefficient of
            variation of the step time (0 = none; see :class:`distbench.training.loop.StepDelay`).
        jitter_seed: seed of the jitter's generators (one per replica: ``(seed, replica)``).
    """

    worker: int | None = None
    slowdown: float = 1.0
    jitter_cv: float = 0.0
    jitter_seed: int = 0

    @property
    def active(self) -> bool:
        """True when some replica is delayed (a slowdown above 1, or jitter)."""
        return (self.worker is not None and self.slowdown > 1) or self.jitter_cv > 0

    @property
    def suffix(self) -> str:
        """The ``config_id`` suffix: ``_slow2x`` (worker 1), ``_slow2x_worker0`` (another
        worker), then ``_jit0.3`` with jitter. ``_slow1x`` is the sweep's baseline: every
        replica's step is timed by the same mechanism, with no delay."""
        out = ""
        if self.worker is not None:
            out += f"_slow{self.slowdown:g}x" + (f"_worker{self.worker}" if self.worker != 1 else "")
        return out + (f"_jit{self.jitter_cv:g}" if self.jitter_cv else "")

    def describe(self) -> str:
        """Words for reports: ``worker 1 2x slower``, ``no straggler``; ``, jitter cv 0.3`` added."""
        text = ("no straggler" if self.worker is None or self.slowdown == 1 else
                f"worker {self.worker} {self.slowdown:g}x slower")
        return text + (f", jitter cv {self.jitter_cv:g}" if self.jitter_cv else "")

    def to_dict(self) -> dict[str, Any]:
        """The scenario as plain JSON (the record's ``scenario`` field)."""
        return dataclasses.asdict(self)

    def to_arg(self) -> str:
        """The scenario as compact JSON, for a process's ``--scenario`` option."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, raw: Any) -> "Scenario":
        """The scenario of :meth:`to_dict` (a record's field, or ``--scenario``'s JSON parsed).

        Raises:
            ConfigError: not such a table, or an impossible value.
        """

        names = [f.name for f in dataclasses.fields(cls)]
        if not isinstance(raw, dict) or set(raw) - set(names):
            raise ConfigError(f"scenario {raw!r}: expected a table with keys {', '.join(names)}")
        w = raw.get("worker")
        sc = cls(None if w is None else coerce("scenario.worker", w, int),
                 coerce("scenario.slowdown", raw.get("slowdown", 1.0), float),
                 coerce("scenario.jitter_cv", raw.get("jitter_cv", 0.0), float),
                 coerce("scenario.jitter_seed", raw.get("jitter_seed", 0), int))
        check_delay("scenario", sc.worker or 0, sc.slowdown, sc.jitter_cv)
        return sc

    @classmethod
    def from_arg(cls, text: str | None) -> "Scenario | None":
        """The scenario of :meth:`to_arg` (``None`` for no option).

        Raises:
            ConfigError: not JSON, or see :meth:`from_dict`.
        """

        if not text:
            return None
        try:
            raw = json.loads(text)
        except ValueError:
            raise ConfigError(f"--scenario {text!r}: expected JSON like "
                              '{"worker":1,"slowdown":2.0,"jitter_cv":0,"jitter_seed":0}') from None
        return cls.from_dict(raw)


@dataclass
class ScenarioConfig:
    """``[scenario]``: straggler scenarios, a sweep dimension like ``run.workers``: every
    strategy with more than one replica runs once per scenario (``single`` once, unslowed).

    Attributes:
        stragglers: one scenario per entry ``{ worker = W, slowdown = S }``: replica ``W``'s
            every step takes ``S`` x its own measured compute time.
        slowdowns: shorthand for ``stragglers``: one scenario per factor, all on ``worker``
            (e.g. ``[1, 2, 4]``; 1 is the sweep's unslowed baseline).
        worker: the slowed replica of ``slowdowns``.
        jitter: ``{ cv = C, seed = K }``: random per-step delays on every replica, in every
            scenario; ``C`` in [0, 1) is the step time's coefficient of variation.
    """

    stragglers: list[dict[str, Any]] = field(default_factory=list)
    slowdowns: list[float] = field(default_factory=list)
    worker: int = 1
    jitter: dict[str, Any] = field(default_factory=dict)

    def points(self) -> list[Scenario]:
        """The scenarios of the sweep, in order (empty when ``[scenario]`` sets none)."""
        cv, seed = float(self.jitter.get("cv", 0.0)), int(self.jitter.get("seed", 0))
        pairs = [(int(s["worker"]), float(s.get("slowdown", 1.0))) for s in self.stragglers]
        pairs += [(self.worker, float(f)) for f in self.slowdowns]
        if not pairs and not self.jitter:
            return []
        return [Scenario(w, f, cv, seed) for w, f in pairs] or [Scenario(None, 1.0, cv, seed)]


def check_delay(key: str, worker: int, slowdown: float, cv: float, workers: int | None = None) -> None:
    """Check one scenario's numbers.

    Args:
        key: the config key named in the error.
        worker: the slowed replica's index; workers: the smallest worker count of the
            sweep (``None``: no upper bound).
        slowdown: the slow replica's factor; cv: the jitter's coefficient of variation.

    Raises:
        ConfigError: a worker index out of ``0..workers-1``, a slowdown < 1 (or not
            finite), a cv outside [0, 1).
    """

    if worker < 0 or (workers is not None and worker >= workers):
        top = f"0..{workers - 1}" if workers is not None else ">= 0"
        raise ConfigError(f"{key}: worker = {worker} is out of range: expected a worker index {top} (the smallest "
                          f"worker count of the sweep is {workers}); lower it or drop the smaller worker counts")
    if not math.isfinite(slowdown) or slowdown < 1:
        raise ConfigError(f"{key}: slowdown = {slowdown!r}: must be a finite number >= 1 (1 = not slowed, "
                          "2 = every step takes twice its compute time)")
    if not (math.isfinite(cv) and 0 <= cv < 1):
        raise ConfigError(f"scenario.jitter.cv = {cv!r}: must be in [0, 1) (the step time's coefficient of "
                          "variation)")


def build_scenario(raw: Any) -> ScenarioConfig:
    """``[scenario]`` as parsed from TOML -> :class:`ScenarioConfig`, every key and nested key
    checked (values are checked against the sweep by :func:`check_scenario`).

    Raises:
        ConfigError: not a table, an unknown key, a value of the wrong type.
    """

    if not isinstance(raw, dict):
        raise ConfigError(f"[scenario] must be a table, got {raw!r}")
    sc = build("scenario", ScenarioConfig, {k: v for k, v in raw.items() if k not in ("stragglers", "jitter")})
    types_ = {"worker": int, "slowdown": float, "cv": float, "seed": int}
    stragglers = raw.get("stragglers", [])
    if not isinstance(stragglers, list):
        raise ConfigError(f"scenario.stragglers = {stragglers!r}: expected a list of tables like {STRAGGLER_EXAMPLE}")
    tables = [(f"scenario.stragglers[{i}]", t, ("worker", "slowdown"), STRAGGLER_EXAMPLE)
              for i, t in enumerate(stragglers)]
    tables += [("scenario.jitter", raw["jitter"], ("cv", "seed"), JITTER_EXAMPLE)] if "jitter" in raw else []
    for where, item, allowed, example in tables:
        if not isinstance(item, dict):
            raise ConfigError(f"{where} = {item!r}: expected a table like {example}")
        bad = sorted(set(item) - set(allowed))
        if bad:
            raise ConfigError(f"unknown key '{where}.{bad[0]}' (value {item[bad[0]]!r}); allowed keys: "
                              + ", ".join(allowed))
        if allowed[0] == "worker" and "worker" not in item:
            raise ConfigError(f"{where} = {item!r} names no worker: expected a table like {example}")
        item = {k: coerce(f"{where}.{k}", v, types_[k]) for k, v in item.items()}
        if allowed[0] == "worker":
            sc.stragglers.append(item)
        else:
            sc.jitter = item
    return sc


def check_scenario(cfg: Any) -> None:
    """Cross-field checks of ``cfg.scenario`` (an :class:`~distbench.config.ExperimentConfig`):
    worker indices within the smallest worker count of ``run.workers``, slowdowns >= 1,
    jitter cv in [0, 1), one form of the sweep, no scenario twice.

    Raises:
        ConfigError: naming the key, the value and what is allowed.
    """

    s = cfg.scenario
    if s.stragglers and s.slowdowns:
        raise ConfigError("scenario.stragglers and scenario.slowdowns are both set: give the scenarios one way "
                          "(slowdowns = [1, 2, 4] slows scenario.worker; stragglers lists { worker, slowdown } tables)")
    fewest = min(cfg.run.workers)
    points = s.points()
    for i, p in enumerate(points):
        key = f"scenario.stragglers[{i}]" if s.stragglers else "scenario.slowdowns" if s.slowdowns else "scenario"
        check_delay(key, p.worker or 0, p.slowdown, p.jitter_cv, fewest if p.worker is not None else None)
    dupes = [p for i, p in enumerate(points) if p in points[:i]]
    if dupes:
        raise ConfigError(f"[scenario] lists the scenario {dupes[0].describe()!r} twice: each must be distinct")
