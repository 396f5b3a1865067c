"""``distbench worker``: the entry points launchers run (the harness' ``config`` and every
registered strategy's worker entries)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from distbench.entrypoints import user_errors


class _WorkerGroup(click.Group):
    """``distbench worker``: the ``config`` entry of the harness, and every entry point the
    registered strategies declare (:attr:`~distbench.strategies.base.Strategy.worker_entries`),
    imported only when it runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from distbench.strategies import registry

        return sorted({*super().list_commands(ctx), *registry.worker_entries()})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is not None:
            return cmd
        import importlib

        from distbench.strategies import registry

        ref = registry.worker_entries().get(name)
        if ref is None:
            return None
        module, _, attr = ref.partition(":")
        return getattr(importlib.import_module(module), attr)




@click.group(cls=_WorkerGroup)
def worker() -> None:
    """Entry points run by launchers (and by users under their own launchers).

    Each enables :mod:`faulthandler`: a process that dies of SIGSEGV, SIGFPE, SIGABRT or
    SIGBUS (a crash inside TensorFlow, Horovod or MPI) leaves its Python stack in its log,
    which the failed record's log tail shows next to the signal."""
    import faulthandler
    import io

    for stream in (sys.stderr, sys.__stderr__):  # a caller's captured stderr (a test runner) has no descriptor
        try:
            faulthandler.enable(file=stream)
            break
        except (AttributeError, ValueError, io.UnsupportedOperation):
            continue


@worker.command("config", hidden=True)
@click.option("--run-dir", required=True, type=click.Path(file_okay=False))
@click.option("--key", required=True)
@click.option("--strategy", required=True)
@click.option("--workers", required=True, type=int)
@click.option("--window", type=int)
@click.option("--scenario", help="Straggler scenario as JSON (set by 'distbench run').")
@user_errors
def worker_config(run_dir: str, key: str, strategy: str, workers: int, window: int | None,
                  scenario: str | None) -> None:
    """Run one configuration (started by 'distbench run' in a fresh process).

    Leaves with ``os._exit`` once the result is on disk: the strategy has already stopped
    its processes, servers and clients, and the interpreter's teardown with TensorFlow
    loaded (1-1.5 s on 2 cores, every configuration, on the sweep's wall time) would do
    nothing the sweep needs."""
    import logging

    from distbench.harness.child import child_main
    from distbench.config.scenario import Scenario

    code = child_main(Path(run_dir), key, strategy, workers, window, Scenario.from_arg(scenario))
    logging.shutdown()
    from distbench.procinfo import remove_autograph_sources

    remove_autograph_sources()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
