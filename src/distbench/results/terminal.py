"""Printing tables on a terminal, a file or a pipe, within the width there is.

:func:`console_for` picks the width (the terminal's; for a pipe ``COLUMNS`` when set, else
as wide as the table needs); :func:`fit_table` lays rows out within it: the whole table
when it fits, else the table without its least important columns, else one block of
lines per row. Cells are never truncated or wrapped inside a table (a strategy name is
always whole).
"""

from __future__ import annotations

import os
from typing import Any, Sequence

#: Below this many columns a results table is not expected to fit whole.
NARROW = 110


def _columns_env() -> int | None:
    """``COLUMNS`` from the environment as a positive int, else None."""
    try:
        n = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return None
    return n if n > 0 else None


PIPE_MAX_WIDTH = 260
"""The widest console made for a pipe or a file (a wider table is laid out by :func:`fit_table`
within it: columns dropped, then blocks; rich would otherwise cut its cells)."""


def console_for(table: Any = None, console: Any = None, max_width: int = PIPE_MAX_WIDTH) -> Any:
    """The :class:`rich.console.Console` to print ``table`` on.

    Args:
        table: a rich renderable, or None.
        console: the console to use when it is a terminal (default: stdout).
        max_width: widest console made for a pipe or a file.

    Returns:
        ``console`` when it is a terminal; for a file or a pipe a console ``COLUMNS`` wide
        when that variable is set, else one as wide as ``table`` needs (between 100 and
        ``max_width`` columns), so that no cell wraps in a log.
    """
    from rich.console import Console
    from rich.measure import Measurement

    console = console or Console()
    if console.is_terminal:
        return console
    cols = _columns_env()
    if cols is not None:
        return Console(width=cols, file=console.file)
    if table is None:
        return Console(width=max_width, file=console.file)
    need = Measurement.get(console, console.options.update_width(max_width), table).maximum
    return Console(width=max(100, min(max_width, need)), file=console.file)


def _table(title: str | None, headers: Sequence[str], rows: Sequence[Sequence[str]], keep: Sequence[int],
           left: Sequence[str]) -> Any:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(title) if title else None, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  collapse_padding=True)
    for i in keep:
        table.add_column(escape(headers[i]), justify="left" if headers[i] in left else "right", no_wrap=True)
    for row in rows:
        table.add_row(*(escape(row[i]) for i in keep))
    return table


def _width(console: Any, table: Any) -> int:
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update_width(10_000), table).maximum


def fit_table(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int, *, title: str | None = None,
              drop: Sequence[str] = (), left: Sequence[str] = ("strategy", "status"),
              block_head: int = 3) -> tuple[Any, list[str]]:
    """Lay ``rows`` out within ``width`` columns.

    Tried in order: the whole table; the table without the columns named in ``drop``
    (least important first, dropped one at a time until it fits); one block per row: its
    first ``block_head`` cells on one line, then ``header value`` pairs (those with a value
    other than ``-``) indented and packed into lines of at most ``width`` characters. No
    cell is ever truncated.

    Args:
        headers: column headers.
        rows: rows of cell strings, as many as ``headers``.
        width: columns available (characters).
        title: table title (None: none).
        drop: headers that may be left out, least important first.
        left: headers of left-aligned columns (the rest are right-aligned).
        block_head: how many leading cells make a block's first line.

    Returns:
        ``(renderable, dropped)``: what to print and the headers left out (empty for the
        whole table; every header after the first ``block_head`` is shown in blocks).
    """
    import textwrap

    from rich.console import Console, Group
    from rich.markup import escape
    from rich.text import Text

    probe = Console(width=10_000)
    keep = list(range(len(headers)))
    dropped: list[str] = []
    table = _table(title, headers, rows, keep, left)
    if _width(probe, table) <= width:
        return table, dropped
    for name in drop:
        if name not in headers:
            continue
        i = list(headers).index(name)
        if i in keep:
            keep.remove(i)
            dropped.append(name)
            table = _table(title, headers, rows, keep, left)
            if _width(probe, table) <= width:
                return table, dropped
    parts: list[Any] = [Text(title, style="italic")] if title else []
    for row in rows:
        head = [c if h in left else f"{h} {c}" for h, c in zip(headers[1:block_head], row[1:block_head])]
        parts.append(Text.from_markup("[bold]" + escape(row[0]) + "[/]  " + escape("  ".join(head))))
        line = " "
        for h, c in zip(headers[block_head:], row[block_head:]):
            if c in ("", "-"):
                continue  # nothing measured: a table shows '-', a block leaves it out
            item = f"{h} {c}"
            if len(line) > 1 and len(line) + 3 + len(item) > width:
                parts.append(Text(line))
                line = " "
            if len(item) + 2 > width:  # a long cell (notes): its own lines, continued under its text (helper-22)
                if len(line) > 1:
                    parts.append(Text(line))
                parts.append(Text(textwrap.fill(item, max(20, width), initial_indent="  ",
                                                subsequent_indent=" " * (3 + len(h)), break_long_words=False,
                                                break_on_hyphens=False)))
                line = " "
                continue
            line += ("   " if len(line) > 1 else " ") + item
        if len(line) > 1:
            parts.append(Text(line))
    return Group(*parts), []


def print_fitted(headers: Sequence[str], rows: Sequence[Sequence[str]], console: Any = None,
                 **kw: Any) -> tuple[Any, list[str]]:
    """Print ``rows`` laid out by :func:`fit_table` within the width of ``console`` (see
    :func:`console_for`: a terminal's width, ``COLUMNS`` for a pipe, else the whole table).

    Args:
        headers, rows: as for :func:`fit_table`.
        console: where to print (default: stdout).
        **kw: ``title``, ``drop``, ``left``, ``block_head`` of :func:`fit_table`.

    Returns:
        ``(console, dropped)``: the console printed on (for what follows the table) and the
        headers left out.
    """
    from rich.console import Console

    console = console or Console()
    if console.is_terminal or _columns_env() is not None:
        console = console_for(None, console)
        renderable, dropped = fit_table(headers, rows, console.width, **kw)
    else:  # a pipe or a file: as wide as needed up to console_for's widest, never squeezed past it
        renderable, dropped = fit_table(headers, rows, PIPE_MAX_WIDTH, **kw)
        console = console_for(renderable, console)
    console.print(renderable)
    return console, dropped


def output_width(stream: Any = None) -> int | None:
    """Columns to lay plain text out in: ``COLUMNS`` when set, else the terminal's width
    when ``stream`` (default stdout) is a terminal, else None (a pipe or file: no limit)."""
    import shutil
    import sys

    cols = _columns_env()
    if cols is not None:
        return cols
    stream = stream or sys.stdout
    return shutil.get_terminal_size().columns if stream.isatty() else None


def hanging(name: str, text: str, width: int | None, indent: int = 2, name_width: int = 22) -> str:
    """``name`` then ``text`` wrapped within ``width`` columns, continuation lines under the
    text's first column; ``name`` is never cut (a longer one pushes the text to the next
    line). ``width`` None: one line.

    Args:
        name: the item (e.g. a strategy name).
        text: its description.
        width: columns available, or None for no limit.
        indent: spaces before ``name``.
        name_width: columns the names are padded to.

    Returns:
        the lines joined by newlines.
    """
    import textwrap

    lead = " " * indent + f"{name:<{name_width}} "
    if width is None:
        return lead + text
    pad = " " * len(lead)
    if len(name) > name_width or width - len(pad) < 20:  # a long name or a tiny width: text below, indented
        pad = " " * (indent + 4)
        return lead.rstrip() + "\n" + textwrap.fill(text, width, initial_indent=pad, subsequent_indent=pad)
    return textwrap.fill(text, width, initial_indent=lead, subsequent_indent=pad)


def wrap_text(text: str, width: int | None) -> str:
    """``text`` with each line wrapped within ``width`` columns, continuation lines indented
    under the line's text (after its indentation and a ``- `` bullet). Lines that are
    commands to copy (starting with ``distbench `` or ``python ``) are left whole, as is
    everything when ``width`` is None (a pipe or file without ``COLUMNS``).

    Args:
        text: lines separated by newlines.
        width: columns available, or None for no limit.
    """
    import textwrap

    if width is None:
        return text
    out = []
    for line in text.splitlines():
        body = line.lstrip(" ")
        lead = " " * (len(line) - len(body))
        if len(line) <= width or body.startswith(("distbench ", "python ")):
            out.append(line)
            continue
        sub = lead + ("  " if body.startswith("- ") else "")
        out.append(textwrap.fill(body, width=max(20, width), initial_indent=lead, subsequent_indent=sub,
                                 break_long_words=False, break_on_hyphens=False))
    return "\n".join(out)
