"""``distbench worker keras-jax``: the JAX process of ``keras_jax:data_parallel``, or one
of the N processes of ``keras_jax:multi_process``, or the process of ``keras_jax:model_parallel``.

Started by the strategy (:mod:`distbench.strategies.keras_jax`) from a configuration's
process, with ``KERAS_BACKEND=jax`` and, without accelerators, ``XLA_FLAGS`` giving JAX N
CPU devices (both must be set before Keras and JAX are first imported, which is why this
is a process of its own: the configuration's process and the sweep import Keras on its
TensorFlow backend). It loads the run's workload, trains it
(:func:`distbench.training.jax_loop.train_data_parallel`) and leaves the result in the
configuration's artifacts directory as every configuration's process does
(:func:`~distbench.harness.child.run_configuration`: ``ok`` with the output, ``unavailable``
with the reason when JAX is missing, ``failed`` with the reason); the strategy reads it back.
distbench imports no TensorFlow in this process (a user's model module may: the record's
``details.tensorflow_imported`` says).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import click

from distbench.entrypoints import user_errors
from distbench.harness.child import run_configuration
from distbench.config.scenario import Scenario
from distbench.procinfo import current_namespace
from distbench.training import TrainOutput
from distbench.training.loop import threads_per_process
from distbench.workload import Workload, weights_sha256


def process_main(run_dir: Path, out: Path, workers: int, scenario: Scenario | None = None, coordinator: str = "",
                 process_id: int = 0, threads: int = 0, model_parallel: bool = False) -> int:
    """Train one ``keras_jax`` configuration in this (JAX) process and write its result to ``out``.

    Args:
        run_dir: the run directory (its workload is loaded and checked).
        out: where the result goes (the configuration's artifacts directory). Under several
            processes process 0 writes it there and process k in ``out/process{k}``, and
            each leaves :data:`~distbench.training.jax_loop.PROCESS_FILE` in ``out``.
        workers: devices of the data-parallel mesh (processes, under several).
        scenario: the straggler scenario (None: none).
        coordinator: ``host:port`` of process 0's coordination service; ``""``: one process
            over ``workers`` devices.
        process_id: this process's index under several.
        threads: CPU threads of this process (0: ``training.threads``, else every core).
        model_parallel: ``ModelParallel`` over a 2-D mesh instead of ``DataParallel``.

    Returns:
        The exit code: 0 when the result is ``ok`` or ``unavailable``, 1 when training failed.
    """
    marks: dict[str, float] = {}

    def train() -> TrainOutput:
        from distbench.training import jax_loop

        jax_loop.import_jax_keras()  # JAX missing: unavailable, before anything else is read
        jax_loop.skip_tensorflow_seeding()
        workload = Workload.load(run_dir, cached=True)
        # before JAX starts its CPU client and thread pools (at the first look at its devices)
        pinned = jax_loop.pin_threads(threads or threads_per_process(workload.config.training.threads, 1))
        if coordinator:
            jax_loop.join_processes(coordinator, workers, process_id)
        trained = jax_loop.train_data_parallel(workload, workers, scenario, pinned, model_parallel)
        if coordinator:
            (out / jax_loop.PROCESS_FILE.format(process_id)).write_text(json.dumps(
                {"netns": current_namespace(), "hostname": socket.gethostname(),
                 "weights_sha256": weights_sha256(trained.final_weights)}))
        return trained

    return 0 if run_configuration(out if process_id == 0 else out / f"process{process_id}", marks, train) else 1


@click.command("keras-jax", hidden=True)
@click.option("--run-dir", required=True, type=click.Path(file_okay=False))
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Where the result goes.")
@click.option("--workers", required=True, type=int, help="Devices of the mesh.")
@click.option("--scenario", help="Straggler scenario as JSON (set by distbench run).")
@click.option("--coordinator", default="", help="host:port of process 0 (several processes); empty: one process.")
@click.option("--process-id", default=0, type=click.IntRange(0), help="This process's index under several.")
@click.option("--threads", default=0, type=click.IntRange(0), help="CPU threads of this process (0: derived).")
@click.option("--model-parallel", is_flag=True, help="ModelParallel over a 2-D mesh instead of DataParallel.")
@user_errors
def command(run_dir: str, out: str, workers: int, scenario: str | None, coordinator: str, process_id: int,
            threads: int, model_parallel: bool) -> None:
    """Train one keras_jax configuration (started by the keras_jax strategy with KERAS_BACKEND=jax).

    Leaves with ``os._exit`` once the result is on disk, as the configuration's process does."""
    code = process_main(Path(run_dir), Path(out), workers, Scenario.from_arg(scenario), coordinator, process_id,
                        threads, model_parallel)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
