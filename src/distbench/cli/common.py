"""What every ``distbench`` command shares: the top-level group's one-line errors, the
flag parsers (lists, repeats, quantities with units) and the run-directory check."""

from __future__ import annotations

import logging
import math
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from distbench import config as config_mod
from distbench.config import values
from distbench.config import ConfigError
from distbench.text import SECONDS


def int_list(flag: str, value: str | None) -> list[int] | None:
    """``2`` or ``1,2,4`` -> a list of integers; ``None`` (flag not given) -> ``None``.

    Raises:
        ConfigError: an item is not an integer.
    """
    if value is None:
        return None
    try:
        return [int(v) for v in value.split(",")]
    except ValueError:
        raise ConfigError(f"{flag} {value!r}: expected an integer or a comma-separated list, e.g. 2 or 1,2,4") from None


def repeats_value(flag: str, value: str | None) -> int | str | None:
    """``--repeats``: a positive integer or ``auto``; ``None`` when not given.

    Raises:
        ConfigError: anything else.
    """
    if value is None or value.strip().lower() == config_mod.AUTO_REPEATS:
        return None if value is None else config_mod.AUTO_REPEATS
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{flag} {value!r}: expected a positive integer (runs of each configuration) or "
                          f"'{config_mod.AUTO_REPEATS}'") from None


def name_list(flag: str, value: str | None) -> list[str] | None:
    """``a,b`` -> ``["a", "b"]``; ``None`` (flag not given) -> ``None``.

    Raises:
        ConfigError: the flag was given but names nothing, or holds an empty item.
    """
    if value is None:
        return None
    names = [v.strip() for v in value.split(",")]
    if not any(names) or not all(names):
        raise ConfigError(f"{flag} {value!r}: expected comma-separated names, e.g. single,mirrored "
                          "(see 'distbench list'), or 'all'")
    return names


class OneLineErrors(click.Group):
    """The top-level group: a click usage error (unknown option, missing or malformed
    value) prints as one line, ``distbench: error: ... (see 'distbench run --help')``, and
    exits with status 2, like every other bad input (:func:`~distbench.entrypoints.user_errors`); click's own
    format is four lines (usage, hint, blank line, error)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("standalone_mode", None)
        kwargs["prog_name"] = "distbench"  # also under ``python -m distbench`` and click's test runner
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except click.UsageError as e:
            where = e.ctx.command_path if e.ctx is not None else _command_path(self, kwargs.get("args"))
            msg = e.format_message()
            extra = re.search(r"unexpected extra arguments? \(([^)\s]+)", msg)
            if extra and extra.group(1).lower() in {*BANDWIDTH.units, *LATENCY.units}:
                msg += "; a unit is written without a space: --latency 50us, --bandwidth 25Gbit/s"
            print(f"distbench: error: {msg} (see '{where} --help')", file=sys.stderr, flush=True)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except click.Abort as e:
            if isinstance(e.__cause__, KeyboardInterrupt):  # Ctrl-C before a command's own handler was set
                print("distbench: interrupted", file=sys.stderr, flush=True)
                sys.exit(130)
            print("Aborted!", file=sys.stderr, flush=True)
            sys.exit(1)
        # without standalone mode click returns ctx.exit()'s status instead of exiting
        sys.exit(rv if isinstance(rv, int) else 0)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The ``distbench`` command itself (the console script, ``python -m distbench``;
        click's test runner calls :meth:`main`). Bad input (exit status 2) found after
        TensorFlow was imported, e.g. a model whose output does not fit the data, leaves
        with ``os._exit``: the interpreter's teardown with TensorFlow loaded took 1.2 s
        (measured on 2 cores), and at that point nothing has run that needs it.

        Raises:
            SystemExit: the command's exit status (every other exit).
        """
        try:
            return self.main(*args, **kwargs)
        except SystemExit as e:
            if e.code == 2 and "tensorflow" in sys.modules:
                logging.shutdown()
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(2)
            raise


def _command_path(group: click.Group, args: Any) -> str:
    """``distbench <command>`` for the first word of ``args`` (default ``sys.argv[1:]``)
    that names a command, else ``distbench``: for errors raised without a context."""
    words = [a for a in (sys.argv[1:] if args is None else args) if not str(a).startswith("-")]
    return f"distbench {words[0]}" if words and words[0] in group.commands else "distbench"


def require_results(run_dir: str) -> None:
    """Raise unless ``run_dir`` holds readable results: naming whether it does not exist, is a run
    that finished no configuration yet (with the command that continues it), or is not a
    run directory at all.

    Raises:
        ConfigError: as above.
    """
    from distbench.results.store import RESULTS_FILE, read_records

    d = Path(run_dir)
    if (d / RESULTS_FILE).exists():
        if not read_records(d):  # user test (helper-36): only torn lines was "No records", exit 0
            raise ConfigError(f"{str(d / RESULTS_FILE)!r} holds no readable record (empty, or every line torn or "
                              "corrupt): there is nothing to read; run the sweep again into a new --out "
                              "(a --resume there would run everything again)")
        return
    if not d.exists():
        raise ConfigError(f"{run_dir!r} does not exist: expected a run directory made by 'distbench run' "
                          "(e.g. runs/20261201-091500)")
    if (d / "config.json").exists():
        raise ConfigError(f"{run_dir!r} holds a run that finished no configuration yet (no {RESULTS_FILE}): "
                          f"continue it with distbench run --resume --out {shlex.quote(run_dir)}")
    raise ConfigError(f"{run_dir!r} holds no {RESULTS_FILE}: expected a run directory made by 'distbench run'")


class _Quantity(click.ParamType):
    """A positive quantity with an optional unit suffix (case-insensitive), converted to
    the base unit: a bare number is taken in the base unit (``--bandwidth 1.25e9`` is
    bytes/s, ``--latency 5e-5`` seconds).

    Args:
        units: suffix -> factor to the base unit, e.g. ``{"gbit": 1.25e8}`` (bytes/s).
        example: shown in the error, e.g. ``10gbit``.
        positive: 0 is refused too.
        plausible: ``(low, high)`` in the base unit: a bare number outside it is used as given
            but warned about on stderr (``--latency 50`` is 50 seconds, not 50 us).
        rate: a parser tried first on the text (``--bandwidth``: the ``--target`` link rates,
            case-sensitive bytes and bits, :func:`distbench.results.advice.parse_bandwidth`):
            bytes/s, or ``None`` to go on with ``units``.
    """

    def __init__(self, name: str, units: dict[str, float], example: str, positive: bool = False,
                 plausible: tuple[float, float] = (0.0, math.inf), rate: Any = None) -> None:
        self.name, self.units, self.example, self.positive = name, units, example, positive
        self.plausible, self.rate = plausible, rate

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        """``"10Gbit"`` -> 1.25e9 (bytes/s); a float passes through; anything else fails
        with the accepted forms."""
        if isinstance(value, (int, float)):
            return float(value)
        text = str(value).strip().replace(" ", "")
        if self.rate is not None and (v := self.rate(text)) is not None:  # "10Gbps", "10Gb/s", "1.25GB/s"
            return self._checked(v, value, param, ctx, bare=False)
        unit = next((u for u in sorted(self.units, key=len, reverse=True) if text.lower().endswith(u)), None)
        try:
            v = float(text[: -len(unit)] if unit else text) * (self.units[unit] if unit else 1.0)
        except ValueError:
            v = math.nan
        return self._checked(v, value, param, ctx, bare=unit is None)

    def _checked(self, v: float, value: Any, param: Any, ctx: Any, bare: bool) -> float:
        """``v`` (base unit) if in range, a warning if a ``bare`` number (no unit) is implausible."""
        if not math.isfinite(v) or v < 0 or (self.positive and v == 0):
            self.fail(f"{value!r}: expected a number {'>' if self.positive else '>='} 0, bare ({self.name}) or "
                      f"with a unit ({', '.join(self.units)}), e.g. {self.example}", param, ctx)
        if bare and not self.plausible[0] <= v <= self.plausible[1]:
            warning = (f"distbench: warning: {getattr(param, 'opts', [''])[0]} {value}: a bare number is {self.name}, "
                       f"so this is {v:g} {self.name}; did you mean a unit (e.g. {self.example})?")
            if ctx is not None:  # printed once the whole command line parsed (not before a usage error)
                ctx.meta.setdefault(WARNINGS_KEY, []).append(warning)
        return v


class _Accuracy(click.ParamType):
    """A test accuracy: a fraction (``0.97``) or a percentage (``97%`` is 0.97; user test,
    helper-36: ``97%`` was "not a valid float"). Its range, (0, 1], is checked by the command
    (with the percentage hint for ``97``)."""

    name = "accuracy"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        """``"97%"`` -> 0.97; otherwise as a float, failing with both forms named
        (:func:`distbench.text.parse_accuracy`)."""
        from distbench.text import parse_accuracy

        try:
            return parse_accuracy(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


ACCURACY = _Accuracy()
"""The ``--target-accuracy`` type of every command."""


WARNINGS_KEY = "distbench.warnings"  # click context meta: warnings about parsed values, see print_warnings


def print_warnings() -> list[str]:
    """Print the warnings the parameter types left in the current click context (stderr);
    returns them, for a ``--json`` that carries them too."""
    warned = click.get_current_context().meta.pop(WARNINGS_KEY, [])
    for w in warned:
        click.echo(w, err=True)
    return warned


def _rate(text: str) -> float | None:
    """``--bandwidth``'s link rate in bytes/s as ``--target`` reads it, ``None`` for a bare number."""
    from distbench.results.advice import parse_bandwidth

    return parse_bandwidth(text)


# bytes per second: tc's decimal bit rates (values.RATE_UNITS, as [cluster] emulate reads them) and byte rates
BANDWIDTH = _Quantity("bytes/s", {**{unit: bits / 8 for unit, bits in sorted(values.RATE_UNITS.items(),
                                                                  key=lambda u: -u[1])},
                                  **{f"{unit}/s": bits / 8 for unit, bits in values.RATE_UNITS.items()},
                                  "b/s": 1.0}, "10gbit, 10Gbps or 1.25GB/s",
                      positive=True, plausible=(1e5, 1.25e11), rate=_rate)  # 0.8 Mbit/s .. 1 Tbit/s, as --target
LATENCY = _Quantity("seconds", SECONDS, "50us or 0.05ms", plausible=(0.0, 1.0))
STEP = _Quantity("seconds", SECONDS, "4ms or 0.004", positive=True,
                 plausible=(1e-6, 10.0))
"""A step time (``--node-step``): seconds, or with us/ms/s; a bare number outside 1 us .. 10 s is warned about."""
