"""Text helpers for messages shown to users: reasons and errors cut where a sentence ends;
quantities as people write them (an accuracy as ``0.97`` or ``97%``)."""

from __future__ import annotations

import math

import re

SENTENCE_END = re.compile(r"(?<!e\.g\.)(?<!i\.e\.)(?<=[.!?;])\s+(?=\S)")
"""Where a sentence ends inside a line: after ``.``, ``!``, ``?`` or ``;`` and whitespace
(not after ``e.g.``/``i.e.``; a ``:`` announces what follows, so it is no end)."""
CUT_MARK = " [...]"


def clip(text: str, max_chars: int) -> str:
    """``text`` in at most ``max_chars`` characters, cut where a sentence ends.

    Whole lines are kept while they fit; the first line that does not fit is cut after
    its last sentence end that fits (:data:`SENTENCE_END`) and the rest dropped. Only
    when not even the first sentence of the text fits is it cut inside, at a space if
    there is one. Anything cut ends with `` [...]`` (counted in ``max_chars``): the full
    text stays in the log it came from.

    Args:
        text: one or more lines.
        max_chars: the most characters returned (at least 20).

    Returns:
        The kept text (lines joined by newlines), trailing whitespace removed.
    """
    text = text.rstrip()
    if len(text) <= max_chars:
        return text
    room = max_chars - len(CUT_MARK)
    kept: list[str] = []
    size = 0
    for line in text.splitlines():
        if size + len(line) <= room:
            kept.append(line)
            size += len(line) + 1
            continue
        ends = [m.start() for m in SENTENCE_END.finditer(line) if size + m.start() <= room]
        if ends:
            kept.append(line[:ends[-1]])
        elif not "".join(kept).strip():  # not even one sentence fits: cut it at a space
            space = line.rfind(" ", 0, room - size + 1)
            kept.append(line[:space if space > (room - size) // 2 else room - size])
        break
    return "\n".join(kept).rstrip() + CUT_MARK


def join_and(names: "list[str] | tuple[str, ...]") -> str:
    """``a``, ``a and b``, ``a, b and c`` (for sentences naming several configurations)."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def rate_text(bits_per_s: float) -> str:
    """A link rate in the unit people read it in: ``10 Gbit/s``, ``100 Mbit/s``, ``10 kbit/s``
    (``bits_per_s``: bit/s; Gbit/s from 1 Gbit/s up, so 25 Gbit/s and 1 Tbit/s stay in Gbit/s)."""
    for unit, f in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits_per_s >= f:
            return f"{bits_per_s / f:g} {unit}"
    return f"{bits_per_s:g} bit/s"


def link_text(bytes_per_s: float, latency_s: float) -> str:
    """A target's link as read: ``10 Gbit/s, 50 us per message`` (``bytes_per_s``: bytes/s;
    ``latency_s``: seconds); ``one node: no network link`` for an infinite rate (a target of
    one node needs none)."""
    if math.isinf(bytes_per_s):  # (a rate given for one node is not used: user test, helper-18)
        return "one node: no network link"
    return f"{rate_text(bytes_per_s * 8)}, {duration_text(latency_s)} per message"


def duration_text(seconds: float) -> str:
    """A short duration in the unit people read it in: ``50 us``, ``1.5 ms``, ``2 s``, ``35 min``,
    ``3.6 h``, ``12 days`` (0: ``0 us``; 3 significant digits from a minute up; days from
    48 hours)."""
    if seconds >= 48 * 3600:
        return f"{seconds / 86400:.3g} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    if seconds >= 1:
        return f"{seconds:g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:g} ms"
    return f"{seconds * 1e6:g} us"


def seconds_text(seconds: float) -> str:
    """Seconds with 3 significant digits (``0.0123 s``, ``41.2 s``), from 1,000 s up in
    minutes or hours (``28.7 min``, not ``1.72e+03 s``), and under 1 ms in microseconds
    (``84.3 us``, not ``8.43e-05 s``: user test, helper-30)."""
    if seconds >= 999.5:
        return duration_text(float(f"{seconds:.3g}"))
    if 0 < seconds < 9.995e-4:
        return f"{seconds * 1e6:.3g} us"
    return f"{seconds:.3g} s"


SECONDS = {"us": 1e-6, "µs": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "s": 1.0, "sec": 1.0}
"""Time units people write after a number (``50us``, ``4ms``), as seconds per unit: the CLI's
``--latency``/``--node-step`` and Python's ``node_step="4ms"`` read the same ones."""


def parse_accuracy(value: object) -> float:
    """A test accuracy as people write it: a fraction (``0.97``) or a percentage (``"97%"`` is
    0.97; user test, helper-36: ``97%`` was "not a valid float"). Its range, (0, 1], is for
    the caller to check (a percentage over 100 comes back over 1).

    Raises:
        ValueError: not a number or percentage; a percentage under 1% (helper-37: ``0.97%``
            ran to 0.0097, a target below chance, without a word), naming both readings.
    """
    text = str(value).strip()
    if text.endswith("%"):
        try:
            pct = float(text[:-1])
        except ValueError:
            pct = math.nan
        if 0 < pct < 1:
            raise ValueError(f"{value!r} is {pct / 100:g} of the test samples: did you mean {pct:g} (a fraction) or "
                             f"{pct * 100:g}%?")
        if not math.isnan(pct):
            return pct / 100
    try:
        return float(text) if not isinstance(value, float) else value
    except ValueError:
        raise ValueError(f"{value!r}: expected a test accuracy as a fraction or a percentage, e.g. 0.95 or "
                         "95%") from None


def window_fix(run_steps: int, epochs: int | None) -> str:
    """What window commits during a run of ``run_steps`` steps per replica over ``epochs``
    epochs: one up to an epoch's steps commits every epoch; with one epoch (helper-44: "up
    to 20" named the window 20 it warned about), one under the run's steps, or more epochs."""
    if epochs and epochs > 1 and run_steps >= epochs:
        return f"a window up to the steps of an epoch ({run_steps // epochs}) commits every epoch"
    return f"a window under {run_steps} commits before the end, or train more epochs"
