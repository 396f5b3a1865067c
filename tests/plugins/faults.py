"""Fault injection through the loop core's epoch hooks (``DISTBENCH_EPOCH_HOOKS``), for tests.

Set ``DISTBENCH_EPOCH_HOOKS=tests.plugins.faults:exit_after_epoch`` and
``DISTBENCH_TEST_EXIT=REPLICA:EPOCH[:CODE|kill|stall]``: the training loop of replica (or
rank) REPLICA, after epoch EPOCH, exits with CODE (default 9), SIGKILLs itself, or stops
making progress while staying alive (``stall``). No production code knows about it.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from distbench.config import ConfigError
from distbench.training.loop import EpochEnd

TEST_EXIT_ENV = "DISTBENCH_TEST_EXIT"
HOOK = "tests.plugins.faults:exit_after_epoch"


def env(spec: str) -> dict[str, str]:
    """The environment that makes replica/rank REPLICA fail as ``spec`` says."""
    return {"DISTBENCH_EPOCH_HOOKS": HOOK, TEST_EXIT_ENV: spec}


def parse(raw: str, replica: int | None) -> tuple[int, int, str] | None:
    """``(replica, epoch, how)`` of ``REPLICA:EPOCH[:CODE|kill|stall]`` if it targets ``replica``.

    Raises:
        ConfigError: a malformed value.
    """
    parts = raw.split(":")
    try:
        r, e = int(parts[0]), int(parts[1])
        how = parts[2] if len(parts) > 2 else "9"
        if how not in ("kill", "stall"):
            int(how)
    except (ValueError, IndexError):
        raise ConfigError(f"{TEST_EXIT_ENV}={raw!r}: expected REPLICA:EPOCH[:CODE|kill|stall], e.g. 1:1:kill") from None
    return (r, e, how) if r == replica else None


def exit_after_epoch(end: EpochEnd) -> None:
    """The epoch hook: fail as :data:`TEST_EXIT_ENV` says, once its epoch has ended."""
    hook = parse(os.environ.get(TEST_EXIT_ENV, ""), end.replica)
    if hook is None or hook[1] != end.epoch:
        return
    print(f"test hook {TEST_EXIT_ENV}: rank {end.replica} exits after epoch {end.epoch} ({hook[2]})",
          file=sys.stderr, flush=True)
    if hook[2] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    while hook[2] == "stall":
        time.sleep(3600)
    os._exit(int(hook[2]))
