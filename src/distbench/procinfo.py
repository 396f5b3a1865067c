"""Facts about the running process that records carry (bottom layer: no distbench imports).

:func:`current_namespace` tells which network namespace a process runs in, so a worker
can report where it really ran (an emulated host's namespace, or the machine's own).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def current_namespace(pid: int | str = "self") -> str:
    """The network namespace process ``pid`` (default this one) runs in, for records: its
    ``ip netns`` name (an emulated host's ``dbn-<id>-<k>``), ``root`` for the namespace of
    process 1 (the machine's own), else ``net:[<inode>]``; ``?`` when ``/proc`` does not
    tell (no such process)."""
    try:
        ino = os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return "?"
    with contextlib.suppress(OSError):
        if os.stat("/proc/1/ns/net").st_ino == ino:
            return "root"
    with contextlib.suppress(OSError):
        for p in sorted(Path("/run/netns").iterdir()):
            with contextlib.suppress(OSError):
                if p.stat().st_ino == ino:
                    return p.name
    return f"net:[{ino}]"
