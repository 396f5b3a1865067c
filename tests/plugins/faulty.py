"""Strategies that misbehave on purpose, loaded through DISTBENCH_PLUGINS in tests."""

from __future__ import annotations

import os
import time

from distbench.strategies.base import LaunchContext, Strategy
from distbench.strategies.registry import register
from distbench.training import TrainOutput


@register
class Crash(Strategy):
    """Dies with exit code 3 partway through, like a segfaulting engine."""

    name = "test_crash"
    description = "test only: crashes"

    def launch(self, ctx: LaunchContext) -> TrainOutput:
        cache = ctx.run_dir / "workload" / "dataset-cache.npz"  # the sweep's dataset cache, seen from a configuration
        print(f"dataset cache present: {cache.exists()}; about to crash", flush=True)
        os._exit(3)


@register
class Segfault(Strategy):
    """Dies of a real SIGSEGV (a NULL read), as a crash inside an engine's C++ would."""

    name = "test_segfault"
    description = "test only: segfaults"

    def launch(self, ctx: LaunchContext) -> TrainOutput:
        import ctypes

        ctypes.string_at(0)
        raise AssertionError("unreachable")


@register
class Hang(Strategy):
    """Sleeps far past any timeout."""

    name = "test_hang"
    description = "test only: hangs"

    def launch(self, ctx: LaunchContext) -> TrainOutput:
        with open(ctx.artifacts_dir / "pid", "w") as f:
            f.write(str(os.getpid()))
        time.sleep(3600)
        raise AssertionError("unreachable")
