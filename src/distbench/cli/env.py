"""``distbench env``, ``distbench list`` and ``distbench where``: this machine, the
registered strategies and datasets, the entry points for external launchers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from distbench import api
from distbench import config as config_mod
from distbench.config import ConfigError
from distbench.entrypoints import user_errors


@click.command("env")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--workers", type=int, default=2, show_default=True, help="Worker count to probe for.")
@click.option("--cluster", "cluster_config", type=click.Path(dir_okay=False),
              help="Instead: check every host of this config's [cluster] (reachable, same versions, free port); "
                   "exit 1 on a problem.")
@user_errors
def env_cmd(as_json: bool, workers: int, cluster_config: str | None) -> None:
    """Print this machine's provenance and whether each strategy can run here, and why not
    (with --cluster: check the cluster's hosts)."""
    api.reap_dead_clusters()
    from distbench.env import report as env_report

    if cluster_config:
        from distbench.cluster.cli import env_cluster

        sys.exit(env_cluster(cluster_config, as_json, timeout_s=30.0))
    if workers < 1:
        raise ConfigError(f"--workers {workers}: expected a worker count >= 1")
    # the probes take seconds (a minute on a busy machine): say so before going quiet
    print("probing engines (TF, Horovod, Spark, MPI)...", file=sys.stderr, flush=True)
    info = env_report(config_mod.load(None), workers)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    import textwrap

    from distbench.results.terminal import hanging, output_width

    p, width = info["provenance"], output_width()
    lines = [f"distbench {p['versions'].get('distbench')}  Python {p['python']}  {p['os']}",
             f"host {p['hostname']}: {p['cpu_count']} x {p['cpu_model']}", *info["gpus"],
             "packages: " + ", ".join(f"{k} {v or '-'}" for k, v in p["versions"].items())]
    lines += [f"build: {line}" for line in info["builds"]] + [f"git commit: {p['git_commit']}"]
    for line in lines:  # (wrap_text would keep the first line whole: it starts like a command)
        click.echo(line if width is None else textwrap.fill(line, max(20, width), subsequent_indent="  ",
                                                              break_long_words=False, break_on_hyphens=False))
    click.echo("\nstrategies:")
    for s in info["strategies"]:
        mark = "available  " if s["available"] else "unavailable"
        reason = ("GPUs its framework cannot use (see GPUs above)" if s["reason"].startswith("this machine has ")
                  else s["reason"])  # the GPU line once, not once per strategy
        click.echo(hanging(s["name"], f"{mark} {reason}".rstrip(), width,
                           name_width=max(22, *(len(t["name"]) for t in info["strategies"]))))


@click.command("list")
@user_errors
def list_cmd() -> None:
    """List strategies, datasets and models."""
    from distbench.models import MODEL_DESCRIPTIONS
    from distbench.results.terminal import hanging, output_width
    from distbench.strategies import registry

    strategy_names = registry.names()  # loads DISTBENCH_PLUGINS: a bad one is reported before any output
    width = output_width()
    nw = max(22, *(len(n) for n in strategy_names))  # one name column for every section
    click.echo("strategies:")
    for name in strategy_names:
        click.echo(hanging(name, registry.get(name).description, width, name_width=nw))
    for fam, members in registry.families().items():  # a small family is named member by member
        which = f"all {len(members)} {fam}:<optimizer> strategies above" if len(members) > 3 else \
            f"{', '.join(members)} above"
        click.echo(hanging(fam, f"the family: {which} (also {fam}:all)", width, name_width=nw))
    click.echo("datasets:")
    for d in config_mod.DATASETS:
        click.echo(hanging(d, DATASET_DESCRIPTIONS[d], width, name_width=nw))
    click.echo("models:")
    for m, desc in MODEL_DESCRIPTIONS.items():
        click.echo(hanging(m, desc, width, name_width=nw))


DATASET_DESCRIPTIONS = {
    "digits": "scikit-learn's bundled 8x8 digits, 1,797 images, 10 classes (default)",
    "breast_cancer": "scikit-learn's bundled Wisconsin breast cancer table, 569 samples, 30 features, 2 classes",
    "mnist": "MNIST from a local Keras .npz or IDX files (data.path)",
    "fashion_mnist": "Fashion-MNIST from a local Keras .npz or IDX files (data.path)",
    "synthetic": "random images/labels of data.image_shape (throughput runs)",
    "npz": "your arrays: an .npz with x, y (and optionally x_test, y_test) at data.path",
    "parquet": "your table: Parquet file(s) at data.path, streamed by row group (larger than memory)",
}
"""One line per dataset of ``distbench list`` (every name of :data:`distbench.config.DATASETS`)."""


@click.command()
@click.argument("what", type=click.Choice(["spark-app"]))
def where(what: str) -> None:
    """Print the path of an entry point for external launchers (spark-app: for spark-submit)."""
    from distbench.harness import spark_app

    click.echo(Path(spark_app.__file__).resolve())
