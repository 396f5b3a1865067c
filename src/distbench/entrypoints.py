"""Decorators every command-line entry point of distbench shares: the ``distbench``
commands (:mod:`distbench.cli`, ``distbench cluster``) and the entry points launchers run
under the user's own launcher (``distbench worker ...`` in the harness and the strategies).
Below every package that defines such an entry point, so that none imports the CLI for them;
:mod:`distbench.config` no longer imports click.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

from distbench.contracts import ConfigError


def user_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for command-line entry points: a :class:`ConfigError` becomes one line on
    stderr (``distbench: error: ...``) and exit status 2, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ConfigError as e:
            print(f"distbench: error: {e}", file=sys.stderr, flush=True)
            sys.exit(2)

    return wrapper


def run_dir_param(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for a click command taking one run directory: as the positional argument
    ``RUN_DIR`` or, as before, ``--run-dir DIR`` (an alias); the command receives it as
    ``run_dir``. Put it under :func:`user_errors` (so that its errors print as one line).

    Args:
        help: the help text of ``--run-dir`` (the argument has none in click).

    Raises:
        ConfigError: (when the command runs) neither or two different directories given.
    """
    import click

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, run_dir: str | None = None, run_dir_flag: str | None = None, **kwargs: Any) -> Any:
            if run_dir and run_dir_flag and run_dir != run_dir_flag:
                raise ConfigError(f"two run directories given: {run_dir!r} and --run-dir {run_dir_flag!r}; "
                                  "give one (RUN_DIR or --run-dir)")
            if not (run_dir or run_dir_flag):
                raise ConfigError("missing the run directory: give it as RUN_DIR (or --run-dir DIR)")
            return fn(*args, run_dir=run_dir or run_dir_flag, **kwargs)

        wrapper = click.option("--run-dir", "run_dir_flag", type=click.Path(file_okay=False),
                               help=help + " Same as RUN_DIR.")(wrapper)
        return click.argument("run_dir", required=False, type=click.Path(file_okay=False))(wrapper)

    return decorate
