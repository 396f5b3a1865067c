"""The ``distbench`` command line (click): ``run``, ``report``, ``advise``, ``env``, ``list``,
``where``, ``calibrate``, ``predict``, ``cluster``, ``worker``, one module per command or
pair of commands (:mod:`~distbench.cli.sweep`, :mod:`~distbench.cli.reports`,
:mod:`~distbench.cli.env`, :mod:`~distbench.cli.prediction`, :mod:`~distbench.cli.workers`,
``distbench.cluster.cli``), each thin over the library; :mod:`~distbench.cli.common` holds
what they share.

Bad input (config, flags, data files) exits with status 2 and one line naming what was
received and what is allowed; no traceback.
"""

from __future__ import annotations

import logging
import os

import click

from distbench import __version__
from distbench.cli.common import OneLineErrors
from distbench.cli.env import env_cmd, list_cmd, where
from distbench.cli.prediction import calibrate, predict
from distbench.cli.reports import advise, report
from distbench.cli.sweep import run
from distbench.cli.workers import worker
from distbench.cluster.cli import cluster_group


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="distbench")
def main() -> None:
    """Train the same Keras model under several distributed-training strategies and
    compare them fairly (accuracy, time, throughput, speed-up)."""
    logging.basicConfig(level=logging.WARNING, format="distbench: %(levelname)s: %(message)s")
    # TensorFlow's C++ start-up notices (oneDNN, cuInit on CPU machines) are noise here;
    # level 2 still shows errors. A user's own setting wins.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


for _command in (run, report, advise, env_cmd, list_cmd, where, calibrate, predict, cluster_group, worker):
    main.add_command(_command)
