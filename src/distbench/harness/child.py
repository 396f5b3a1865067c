"""The child side of the harness contract, shared by the per-configuration child process
(:func:`child_main`, ``distbench worker config``) and the shared engines
(:mod:`distbench.harness.mpi_engine`, :mod:`distbench.harness.spark_engine`): where a
configuration leaves its outputs, how one configuration's training is run and its result
(or failure) written, and the one-line reason of a failure. Below the runner and the
engines, so that neither imports the other for it.
"""

from __future__ import annotations

import re
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from distbench.cluster.placement import Placement
from distbench.contracts import Status, StrategyUnavailable, TrainingFailed
from distbench.launch import process
from distbench.config.scenario import Scenario
from distbench.strategies import registry
from distbench.strategies.base import LaunchContext
from distbench.text import clip
from distbench.training.output import TrainOutput, write_child_result
from distbench.workload import Workload


def artifacts_dir(run_dir: Path, key: str) -> Path:
    """Where configuration ``key`` leaves its outputs."""
    return run_dir / "artifacts" / key


PHASE_MARKS = "phase_marks"
"""Key of the child's own timestamps in ``TrainOutput.extra`` (moved into ``timings.phases``)."""


def failure_reason(e: BaseException) -> str:
    """One line (about 500 characters, never cut mid-sentence) naming why ``e`` ended a
    configuration.

    An exception with a ``reason`` attribute (e.g. ``HorovodJobError``, whose message
    continues with log tails) gives ``ExceptionName: reason``. Otherwise
    ``ExceptionName: first line``; when the message spans lines (a ``Py4JJavaError`` wraps
    the JVM's stack trace), the last line naming a JVM or Python exception is added, since
    the first line only says which call failed (e.g. Spark's
    ``java.lang.IllegalArgumentException: Executor memory 4 must be at least ...``); a
    cause line ending with ``:`` is completed by the lines that follow it. The result is
    :func:`~distbench.text.clip`-ped: the full text stays in the log.
    """
    own = getattr(e, "reason", None)
    if isinstance(own, str) and own.strip():
        return clip(f"{type(e).__name__}: {' '.join(own.split())}", 500)
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    head = f"{type(e).__name__}: {lines[0] if lines else ''}"
    causes = [i for i, ln in enumerate(lines) if i and re.match(r"^:?\s*[\w.$]+(Exception|Error)\b", ln)]
    if not causes:
        return clip(head, 500)
    i = causes[-1]
    cause = lines[i].lstrip(": ")
    if cause.endswith(":"):  # "... The first process to do so was:" + the (up to 3) lines it announces
        for more in lines[i + 1:i + 4]:
            if more.startswith("---") or re.match(r"^[\w.$]+(Exception|Error)\b", more):
                break
            cause += " " + more
    return clip(f"{head} ({cause})", 500)


def run_configuration(art: Path, marks: dict[str, float], train: Callable[[], TrainOutput],
                      extra: dict[str, Any] | None = None) -> bool:
    """Run one configuration's training in this process and leave its result in ``art``
    (:func:`~distbench.training.output.write_child_result`), as the per-configuration
    child and the shared engines (:mod:`distbench.harness.shared_engine`) do.

    Args:
        art: the configuration's artifacts directory (created; the strategy may write there).
        marks: the phase timestamps so far (``child_start_unix``, ``workload_unix``, which
            ``train`` may set); ``launch_end_unix`` is added and they go into the output's
            ``extra`` under :data:`PHASE_MARKS`.
        train: trains and returns the output.
        extra: more ``extra`` fields of the output (``{"mpi_engine": "shared"}``).

    Returns:
        False when it failed: any exception but
        :class:`~distbench.strategies.base.StrategyUnavailable` (recorded ``unavailable``)
        is recorded ``failed`` with :func:`failure_reason`, the traceback on stderr.
    """
    art.mkdir(parents=True, exist_ok=True)
    try:
        out = train()
        marks["launch_end_unix"] = time.time()
        out.extra[PHASE_MARKS] = marks
        out.extra.update(extra or {})
        write_child_result(art, Status.OK, out)
        return True
    except StrategyUnavailable as e:
        write_child_result(art, Status.UNAVAILABLE, reason=str(e))
        return True
    except Exception as e:  # recorded as failed, with the traceback in the log
        traceback.print_exc()
        failed = e if isinstance(e, TrainingFailed) else None
        write_child_result(art, Status.FAILED, reason=failure_reason(e),
                           failed_process=failed.failed_process if failed else None,
                           details=failed.details if failed else None)
        return False


def child_main(run_dir: Path, key: str, strategy: str, workers: int, window: int | None = None,
               scenario: Scenario | None = None) -> int:
    """Entry of the per-configuration child process (``distbench worker config``).

    Trains with the strategy and saves its :class:`TrainOutput`; on
    :class:`StrategyUnavailable` or an exception it writes a ``result.json`` with that
    status and reason. Returns the process exit code (0 ok/unavailable, 1 failed).
    """
    marks = {"child_start_unix": time.time()}
    process.install_cleanup_handler()
    art = artifacts_dir(run_dir, key)

    def train() -> TrainOutput:
        workload = Workload.load(run_dir, cached=True)
        marks["workload_unix"] = time.time()
        ctx = LaunchContext(workload, run_dir, key, workers, art, run_dir / "logs" / key,
                            workload.config.run.timeout_s, window, scenario=scenario,
                            placement=Placement.from_config(workload.config.cluster))
        return registry.get(strategy).launch(ctx)

    return 0 if run_configuration(art, marks, train) else 1
