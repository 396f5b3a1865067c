"""Parameter-server optimizers (DOWNPOUR, ADAG, DynSGD, AEASGD, EAMSGD, EASGD, averaging).

* :mod:`.rules`    pure NumPy worker/server rules and the :data:`OPTIMIZERS` registry
* :mod:`.protocol` framed, validated wire format (no pickle)
* :mod:`.server`   :class:`ParameterServer` (pyzmq ROUTER in a driver thread)
* :mod:`.client`   :class:`PSClient` and :class:`WorkerSession`

Only NumPy and pyzmq are needed; nothing here imports TensorFlow.  ``server``
and ``client`` (which need pyzmq) are imported lazily, so reading the rules or
defaults does not require pyzmq.
"""
from __future__ import annotations

from .rules import DEFAULTS, OPTIMIZERS, OptimizerSpec, get_optimizer, resolve_params

__all__ = ["DEFAULTS", "OPTIMIZERS", "OptimizerSpec", "get_optimizer", "resolve_params",
           "ParameterServer", "PSClient", "PSError", "PSTimeout", "Ack", "WorkerSession",
           "ProtocolError", "new_secret"]

_LAZY = {"ParameterServer": "server", "PSClient": "client", "PSError": "client",
         "PSTimeout": "client", "Ack": "client", "WorkerSession": "client",
         "ProtocolError": "protocol", "new_secret": "protocol"}


def __getattr__(name: str):
    """Lazy access to the pyzmq-dependent classes (PEP 562)."""
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(f"{__name__}.{mod}"), name)
