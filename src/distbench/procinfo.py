"""Facts about the running process that records carry, and its housekeeping (bottom
layer: no distbench imports).

:func:`current_namespace` tells which network namespace a process runs in, so a worker
can report where it really ran (an emulated host's namespace, or the machine's own);
:func:`remove_autograph_sources` removes what AutoGraph wrote for this process;
:data:`STARTUP_SEED_S` is how long a strategy family's processes typically take to start
(the progress display's first ETA, and the ``--timeout`` a timed-out run's Run next gets).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

#: Typical seconds from spawn to the first training step per strategy family, measured on a
#: 2-core machine with the digits workload (records' ``startup_s``); only a seed: once one
#: configuration of a family finished, its measured wall time is used instead.
STARTUP_SEED_S = {"single": 15.0, "mirrored": 15.0, "tpu": 10.0, "multi_worker_mirrored": 30.0, "tf_ps": 20.0,
                  "horovod": 45.0, "horovod_mpi": 25.0, "spark_ps": 110.0, "mpi_ps": 30.0, "keras_jax": 15.0}
DEFAULT_STARTUP_S = 30.0  # a plugin's family


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


def remove_autograph_sources() -> int:
    """Delete the Python files TensorFlow's AutoGraph wrote to the temporary directory for
    the functions this process converted (``$TMPDIR/__autograph_generated_file*.py``, one per
    converted function: its modules in ``sys.modules``). AutoGraph removes them in an
    ``atexit`` hook, which ``os._exit`` skips: without this every configuration's process
    left about six in ``/tmp``, and each Spark replica two (PySpark's workers end with
    ``os._exit`` too).

    Returns:
        The number of files removed.
    """
    removed = 0
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if name.startswith("__autograph_generated_file") and path:
            try:
                os.remove(path)
                removed += 1
            except OSError:
                pass
    return removed
