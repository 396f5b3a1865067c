"""Config values: a TOML table checked into a typed dataclass (:func:`build`,
:func:`coerce`), and link rates in tc's units (:func:`parse_rate`).

The floor under :mod:`distbench.config` and the modules that check their own sections
(:mod:`distbench.config.scenario`, :mod:`distbench.config.cluster`): it imports nothing of
distbench but :mod:`distbench.contracts`.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import types
import typing
from typing import Any, Literal, get_args, get_origin, get_type_hints

from distbench.contracts import ConfigError

RATE_FORM = re.compile(r"([0-9]+(?:\.[0-9]+)?)(bit|kbit|mbit|gbit)", re.IGNORECASE)
RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9}
UNLIMITED = "unlimited"


def parse_rate(key: str, rate: str) -> int | None:
    """A link rate in bits per second, ``None`` for ``"unlimited"``.

    Args:
        key: the config key or flag, for the message.
        rate: tc's form, a positive number and ``bit``, ``kbit``, ``mbit`` or ``gbit``
            (decimal units, as tc reads them: 1mbit = 10^6 bit/s), or ``"unlimited"``.

    Raises:
        ConfigError: anything else, or a rate below 1 bit/s.
    """
    if rate == UNLIMITED:
        return None
    m = RATE_FORM.fullmatch(rate.strip())
    bits = round(float(m.group(1)) * RATE_UNITS[m.group(2).lower()]) if m else 0
    if bits < 1:
        raise ConfigError(f"{key} = {rate!r}: expected a link rate in tc's units (a positive number and bit, kbit, "
                          'mbit or gbit), e.g. "100mbit" or "1gbit", or "unlimited"')
    return bits


_UNIONS = (types.UnionType, typing.Union)  # ``int | str``; ``int | Literal["auto"]`` is a typing.Union


_SCALARS = {int: ("an integer", "integers"), float: ("a number", "numbers"), str: ("a string", "strings"),
            bool: ("true or false", "true or false values")}


def type_name(tp: Any, plural: bool = False) -> str:
    """``tp`` as a config file's reader says it, with its article: ``an integer``, ``a
    list of strings``, ``a table with the keys ...``, ``"auto"``."""
    origin = get_origin(tp)
    if origin in _UNIONS:
        return " or ".join(type_name(a, plural) for a in get_args(tp) if a is not types.NoneType)
    if origin is Literal:
        return " or ".join(json.dumps(a) for a in get_args(tp))
    if dataclasses.is_dataclass(tp):
        keys = ", ".join(f.name for f in dataclasses.fields(tp))
        return f"{'tables' if plural else 'a table'} with the keys {keys}"
    if origin is list:
        return ("lists" if plural else "a list") + f" of {type_name(get_args(tp)[0], plural=True)}"
    if origin is dict:
        return "tables of strings" if plural else "a table of strings"
    if tp in _SCALARS:
        return _SCALARS[tp][plural]
    return getattr(tp, "__name__", str(tp))


def shown(value: Any) -> str:
    """``value`` as the config file spells it where Python's repr differs (``true``, not ``True``)."""
    return ("true" if value else "false") if isinstance(value, bool) else repr(value)


def coerce(key: str, value: Any, tp: Any) -> Any:
    """``value`` checked against type ``tp`` (scalars, lists, string tables, literals,
    unions, nested dataclass tables); ints are accepted where floats are, and one scalar
    where a list of scalars is (``workers = 2`` is ``[2]``).

    Raises:
        ConfigError: naming ``key``, the value as the file spells it and the type expected.
    """
    origin = get_origin(tp)
    if dataclasses.is_dataclass(tp):  # a nested table, e.g. cluster.emulate
        if not isinstance(value, dict):
            raise ConfigError(f"{key} = {shown(value)}: expected {type_name(tp)}")
        return build(key, tp, value)
    if origin is Literal:
        if isinstance(value, str) and value in get_args(tp):
            return value
        raise ConfigError(f"{key} = {shown(value)}: expected {type_name(tp)}")
    if origin in _UNIONS:
        if value is None and types.NoneType in get_args(tp):  # an unset optional table (JSON null)
            return None
        table = next((a for a in get_args(tp) if dataclasses.is_dataclass(a)), None)
        if table is not None and isinstance(value, dict):
            return build(key, table, value)
        for arm in get_args(tp):
            try:
                return coerce(key, value, arm)
            except ConfigError:
                continue
        raise ConfigError(f"{key} = {shown(value)}: expected {type_name(tp)}")
    if origin is list:
        (inner,) = get_args(tp)
        example = '["a", "b"]' if inner is str else "[1, 2]"
        if not isinstance(value, (list, dict)) and not dataclasses.is_dataclass(inner):
            try:  # one value where a list is expected: a list of one (workers = 2)
                return [coerce(key, value, inner)]
            except ConfigError:  # helper-44: windows = "5" was told "expected an integer", not a list
                raise ConfigError(f"{key} = {shown(value)}: expected {type_name(tp)}, e.g. {example}") from None
        if not isinstance(value, list):
            raise ConfigError(f"{key} = {shown(value)}: expected {type_name(tp)}, e.g. {example}")
        return [coerce(f"{key}[{i}]", v, inner) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key} = {shown(value)}: expected a table of strings")
        out = {}
        for k, v in value.items():
            if isinstance(v, (dict, list)):
                raise ConfigError(f"{key}.{k} = {v!r}: expected a string (or a number or true/false), as Spark "
                                  f"properties are; write it as Spark spells it, e.g. \"{k}\" = \"...\"")
            out[str(k)] = str(v)  # Spark parses booleans case-insensitively ("False" is false)
        return out
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{key} = {shown(value)}: expected an integer")
    if not isinstance(value, tp) or (tp is not bool and isinstance(value, bool)):
        raise ConfigError(f"{key} = {shown(value)}: expected {type_name(tp)}")
    return value


def build(section: str, cls: type, raw: Any) -> Any:
    """A ``cls`` dataclass from the TOML table ``raw`` of ``[section]``: every key known,
    every value :func:`coerce`-d to its field's type.

    Raises:
        ConfigError: ``raw`` is not a table, an unknown key (with a did-you-mean), a value of
            the wrong type.
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"[{section}] must be a table, got {raw!r}")
    hints = get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for k, v in raw.items():
        if k not in hints:
            # helper-39: 'window' was told only 'ps.windows' (a sweep), not 'ps.communication_window'
            close = list(dict.fromkeys(_abbreviated(str(k), names) + difflib.get_close_matches(str(k), names, 1, 0.6)))
            hint = f"did you mean {' or '.join(repr(f'{section}.{c}') for c in close)}? " if close else ""
            raise ConfigError(
                f"unknown key '{section}.{k}' (value {v!r}); {hint}allowed keys in [{section}]: "
                + ", ".join(names)
            )
        kwargs[k] = coerce(f"{section}.{k}", v, hints[k])
    return cls(**kwargs)


def _abbreviated(key: str, names: list[str]) -> list[str]:
    """The one field ``key`` abbreviates: its initials (``lr``: ``learning_rate``) or the end
    of its name (``batch_size``: ``global_batch_size``); empty when none or several do."""
    key = key.lower()
    hits = [n for n in names if "".join(w[0] for w in n.split("_")) == key or n.endswith("_" + key)]
    return hits if len(hits) == 1 else []


def choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    """Check that ``value`` is one of ``allowed``.

    Raises:
        ConfigError: ``key = value: expected one of ...``.
    """
    if value not in allowed:
        raise ConfigError(f"{key} = {value!r}: expected one of {', '.join(allowed)}")


def at_least(key: str, value: float, minimum: float = 1) -> None:
    """Check that ``value >= minimum``.

    Raises:
        ConfigError: ``key = value: must be >= minimum``.
    """
    if value < minimum:
        raise ConfigError(f"{key} = {value!r}: must be >= {minimum}")
