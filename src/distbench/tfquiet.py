"""Import TensorFlow quietly in a process that does not train (the sweep's parent, reports).

TensorFlow prints start-up notices (oneDNN, ``failed call to cuInit`` on CPU machines)
from C++ before absl logging is set up, so no environment variable silences them; they
are harmless and only clutter a terminal. Here they go to /dev/null, and the process is
kept off the GPUs, which belong to the training processes.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def native_stderr_to_devnull() -> Iterator[None]:
    """Send C++ writes to file descriptor 2 to /dev/null while the block runs; Python
    exceptions still propagate normally."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def import_tensorflow_off_gpus() -> Any:
    """Import TensorFlow with its start-up notices silenced, hide the GPUs from this process
    and initialise the runtime; return the ``tensorflow`` module. Once the runtime is up
    (a second call, or TensorFlow already used here) the device setting is left as it is."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with native_stderr_to_devnull():
        import tensorflow as tf

        try:
            tf.config.set_visible_devices([], "GPU")
            tf.constant(0)  # initialise the runtime while its notices are silenced
        except RuntimeError:  # already initialised: devices fixed, nothing to change
            pass
    return tf
