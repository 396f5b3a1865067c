"""Strategy registry: names -> strategy classes.

A strategy module registers its classes with the :func:`register` decorator; a
parametrised family (``spark_ps:<optimizer>``) registers one class per variant with
:func:`register_family`, which also makes the family's prefix usable as a name for all of
them. Strategy modules are imported lazily (on the first look-up) and must not import
TensorFlow at module level, so ``distbench list`` stays fast.

Loading is atomic: the built-in modules and the plugin modules named in
``DISTBENCH_PLUGINS`` are imported, and only when every import succeeded and no name is
registered twice is the table of names swapped in. A failing plugin leaves the registry
unloaded (the next look-up tries again) and raises a :class:`~distbench.config.ConfigError`
naming it; a name registered by two modules is an error naming both.
"""

from __future__ import annotations

import difflib
import importlib
import os
from collections import OrderedDict

from distbench.config import ConfigError
from distbench.strategies.base import Strategy

# Modules whose import registers strategies, in display order.
_MODULES = ["single_device", "mirrored", "tpu", "keras_jax", "multi_worker_mirrored", "tf_ps", "horovod", "spark_ps",
            "mpi_ps"]

_BY_MODULE: "OrderedDict[str, list[type[Strategy]]]" = OrderedDict()  # every class each module registered
_FAMILY_OF: dict[str, str] = {}  # strategy name -> family prefix
_STRATEGIES: dict[str, type[Strategy]] = {}  # the loaded table (swapped in by _load)
_FAMILIES: dict[str, list[str]] = {}  # prefix -> names, in registration order
_loaded = False


def register(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator: register ``cls`` under ``cls.name``.

    Raises:
        ValueError: ``cls.name`` is empty.
    """
    if not cls.name:
        raise ValueError(f"strategy class {cls.__module__}.{cls.__qualname__} has no name")
    classes = _BY_MODULE.setdefault(cls.__module__, [])
    for c in classes:
        if c.name == cls.name and c.__qualname__ != cls.__qualname__:
            raise ValueError(f"strategy name {cls.name!r} is registered twice in {cls.__module__}: by "
                             f"{c.__qualname__} and by {cls.__qualname__}")
    classes[:] = [c for c in classes if c.name != cls.name] + [cls]  # a re-imported module replaces its own
    return cls


def register_family(prefix: str, classes: list[type[Strategy]]) -> None:
    """Register ``classes`` (one per variant, named ``prefix:<variant>``) as the family ``prefix``.

    Raises:
        ValueError: a class's name does not start with ``prefix:``.
    """
    for cls in classes:
        if not cls.name.startswith(prefix + ":"):
            raise ValueError(f"family {prefix!r}: strategy {cls.name!r} must be named {prefix}:<variant>")
        register(cls)
        _FAMILY_OF[cls.name] = prefix


def _plugin_modules() -> list[str]:
    return [m for m in (x.strip() for x in os.environ.get("DISTBENCH_PLUGINS", "").split(",")) if m]


def _load() -> None:
    """Import the built-in strategy modules, then the plugin modules named in the environment
    variable ``DISTBENCH_PLUGINS`` (comma-separated importable module names), and swap in the
    table of names only if all of that worked.

    Raises:
        ConfigError: a plugin module cannot be imported, or two modules register one name.
    """
    global _loaded, _STRATEGIES, _FAMILIES
    if _loaded:
        return
    modules = [f"distbench.strategies.{m}" for m in _MODULES]
    for m in modules:
        importlib.import_module(m)
    for m in _plugin_modules():
        try:
            importlib.import_module(m)
        except ImportError as e:
            raise ConfigError(f"DISTBENCH_PLUGINS names module {m!r}, which cannot be imported: {e}") from None
        modules.append(m)
    table: dict[str, type[Strategy]] = {}
    families: dict[str, list[str]] = {}
    for m in modules:
        for cls in _BY_MODULE.get(m, []):
            other = table.get(cls.name)
            if other is not None and other is not cls:
                raise ConfigError(f"strategy name {cls.name!r} is registered twice: by {other.__module__} and by "
                                  f"{cls.__module__}; rename one of them")
            table[cls.name] = cls
            if cls.name in _FAMILY_OF:
                families.setdefault(_FAMILY_OF[cls.name], []).append(cls.name)
    _STRATEGIES, _FAMILIES = table, families
    _loaded = True


def names() -> list[str]:
    """Every registered strategy name, in display order (built-in modules first)."""
    _load()
    return list(_STRATEGIES)


def families() -> dict[str, list[str]]:
    """Family prefix -> the names of its members (e.g. ``spark_ps`` -> ``spark_ps:downpour``, ...)."""
    _load()
    return {k: list(v) for k, v in _FAMILIES.items()}


def family_of(name: str) -> str | None:
    """The family prefix of strategy ``name`` (``spark_ps`` for ``spark_ps:adag``), or None."""
    _load()
    return _FAMILY_OF.get(name)


def worker_entries() -> dict[str, str]:
    """Every ``distbench worker`` entry point the registered strategies declare:
    name -> ``"module:attribute"`` of its click command.

    Raises:
        ConfigError: two strategies declare one entry name for different commands.
    """
    out: dict[str, tuple[str, str]] = {}
    for name, cls in _loaded_table().items():
        for entry, ref in cls.worker_entries.items():
            if entry in out and out[entry][0] != ref:
                raise ConfigError(f"worker entry {entry!r} is declared twice: by {out[entry][1]} ({out[entry][0]}) "
                                  f"and by {name} ({ref})")
            out.setdefault(entry, (ref, name))
    return {k: v[0] for k, v in out.items()}


def _loaded_table() -> dict[str, type[Strategy]]:
    _load()
    return _STRATEGIES


def strategy_class(name: str) -> type[Strategy]:
    """The class registered under ``name``.

    Raises:
        ConfigError: unknown name; the message suggests close matches and lists the known names.
    """
    _load()
    try:
        return _STRATEGIES[name]
    except KeyError:
        pass
    known = names() + list(_FAMILIES)
    close = ([k for k in known if k.lower() == name.lower()]  # helper-40: 'SINGLE' got no suggestion
             or difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.6))
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    raise ConfigError(f"unknown strategy {name!r}; {hint}known strategies: {', '.join(names())} "
                      f"(families: {', '.join(_FAMILIES)})")


def get(name: str) -> Strategy:
    """Return a new instance of the strategy registered under ``name``.

    Raises:
        ConfigError: unknown name (see :func:`strategy_class`).
    """
    return strategy_class(name)()
