"""Printing tables on a terminal, a file or a pipe."""

from __future__ import annotations

from typing import Any


def console_for(table: Any, console: Any = None, max_width: int = 260) -> Any:
    """The :class:`rich.console.Console` to print ``table`` on: ``console`` (default: stdout)
    when it is a terminal; for a file or a pipe, one as wide as the table needs (between
    100 and ``max_width`` columns), so that no cell wraps in a log."""
    from rich.console import Console
    from rich.measure import Measurement

    console = console or Console()
    if console.is_terminal:
        return console
    need = Measurement.get(console, console.options.update_width(max_width), table).maximum
    return Console(width=max(100, min(max_width, need)))
