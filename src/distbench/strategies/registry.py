"""Strategy registry: names -> strategy instances.

Modules register classes with :func:`register`; parametrised families (``spark_ps:<opt>``)
register a factory under a prefix with :func:`register_family`. Strategy modules are
imported lazily and must not import TensorFlow at module level, so ``distbench list``
stays fast.
"""

from __future__ import annotations

import importlib
import os
from typing import Callable

from distbench.config import ConfigError
from distbench.strategies.base import Strategy

# Modules whose import registers strategies, in display order.
_MODULES = ["single_device", "mirrored", "tpu", "multi_worker_mirrored", "tf_ps", "horovod", "spark_ps", "mpi_ps"]

_STRATEGIES: dict[str, type[Strategy]] = {}
_FAMILIES: dict[str, tuple[Callable[[str], Strategy], tuple[str, ...]]] = {}
_loaded = False


def register(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator: register ``cls`` under ``cls.name``."""
    _STRATEGIES[cls.name] = cls
    return cls


def register_family(prefix: str, variants: tuple[str, ...], factory: Callable[[str], Strategy]) -> None:
    """Register ``prefix:<variant>`` names built by ``factory(variant)``."""
    _FAMILIES[prefix] = (factory, variants)


def _load() -> None:
    """Import the built-in strategy modules, then any plugin modules named in the
    environment variable ``DISTBENCH_PLUGINS`` (comma-separated importable module
    names), which register their own strategies with :func:`register`."""
    global _loaded
    if not _loaded:
        _loaded = True
        for m in _MODULES:
            importlib.import_module(f"distbench.strategies.{m}")
        for m in filter(None, (x.strip() for x in os.environ.get("DISTBENCH_PLUGINS", "").split(","))):
            try:
                importlib.import_module(m)
            except ImportError as e:
                raise ConfigError(f"DISTBENCH_PLUGINS names module {m!r}, which cannot be imported: {e}") from None


def names() -> list[str]:
    """Every registered strategy name, families expanded, in display order."""
    _load()
    order = {f"distbench.strategies.{m}": i for i, m in enumerate(_MODULES)}
    out = sorted(_STRATEGIES, key=lambda n: order.get(_STRATEGIES[n].__module__, len(order)))
    for prefix, (_, variants) in _FAMILIES.items():
        out += [f"{prefix}:{v}" for v in variants]
    return out


def get(name: str) -> Strategy:
    """Return a strategy instance for ``name``.

    Raises:
        ConfigError: unknown name (the message lists the known ones).
    """
    _load()
    if name in _STRATEGIES:
        return _STRATEGIES[name]()
    prefix, _, variant = name.partition(":")
    if prefix in _FAMILIES and variant in _FAMILIES[prefix][1]:
        return _FAMILIES[prefix][0](variant)
    raise ConfigError(f"unknown strategy {name!r}; known strategies: {', '.join(names())}")
