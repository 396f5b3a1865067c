"""distbench: train the same Keras model under every major way of distributing training
and compare them with honest numbers."""

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """``distbench.compare`` and ``distbench.Results`` (:mod:`distbench.api`), imported on first use
    so that ``import distbench`` stays light (the CLI and the worker processes import it too)."""
    if name in ("compare", "Results"):
        import importlib

        return getattr(importlib.import_module("distbench.api"), name)
    raise AttributeError(f"module 'distbench' has no attribute {name!r}")
