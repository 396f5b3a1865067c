"""``distbench calibrate`` and ``distbench predict``: a run's compute measured against the
batch and threads, and the first-order or per-strategy prediction of other clusters."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Any

import click

from distbench.cli.common import ACCURACY, BANDWIDTH, LATENCY, STEP, print_warnings, require_results
from distbench.config import ConfigError
from distbench.entrypoints import user_errors
from distbench.entrypoints import run_dir_param


@click.command()
@user_errors
@run_dir_param("Run directory made by 'distbench run' (its workload is used).")
def calibrate(run_dir: str) -> None:
    """Measure the compute of one step of RUN_DIR's model on this machine against the
    per-worker batch and the CPU threads (single's own step, a few epochs at each batch);
    write RUN_DIR/calibration.json for 'predict --target' and 'advise --target'."""
    from distbench.calibrate import calibrate as measure

    require_results(run_dir)
    doc = measure(run_dir)
    for t in sorted({p["threads"] for p in doc["points"]}, reverse=True):
        pts = sorted((p["batch"], p["step_s"]) for p in doc["points"] if p["threads"] == t)
        click.echo(f"{t} thread(s): " + ", ".join(f"batch {b}: {s * 1e3:.3g} ms" for b, s in pts))
    click.echo(f"wrote {Path(run_dir) / 'calibration.json'}")


@click.command()
@click.option("--bandwidth", type=BANDWIDTH, default=None,
              help="Link bandwidth each way: bytes/s, or with a unit: 10gbit, 100mbit, 1.25GB/s "
                   "[default: 10gbit = 1.25e9 bytes/s, 10 GbE].")
@click.option("--latency", type=LATENCY, default=None,
              help="Per-message latency: seconds, or with a unit: 50us, 0.2ms [default: 50us].")
@click.option("--window", type=int, default=None,
              help="Parameter-server communication window, local steps [default: the run's spark_ps/mpi_ps window, "
                   "else 1].")
@click.option("--per-worker-batch", type=int, default=None,
              help="Samples per step per worker, fixed as N grows [default: single's batch]; the step time "
                   "is scaled linearly from single's.")
@click.option("--samples", type=int, default=None, help="Training samples per epoch [default: the run's].")
@click.option("--max-workers", type=int, default=None, help="Largest N (powers of two from 1)  [default: 1024].")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="PNG to write [default: RUN_DIR/predict.png].")
@click.option("--json", "as_json", is_flag=True, help="Print the predictions as JSON instead of a table.")
@click.option("--target", help='Instead: predict each strategy the run measured on this cluster, e.g. "4 nodes x 2, '
                               '10 Gbit/s", "4x8 GPUs @ 25 Gbit/s", "3 nodes x 1, 1gbit, emulated" (per-strategy '
                               "model calibrated from the run; the first-order options do not apply).")
@click.option("--against", "against", type=click.Path(file_okay=False), default=None,
              help="With --target: a run made on that cluster (real or emulated): its measured epoch times and times "
                   "to target next to the prediction.")
@click.option("--node-step", type=STEP, default=None,
              help="With --target: single's step at the run's global batch measured on one target node: seconds, or "
                   "with a unit: 4ms, 250us [default: a node computes like this machine].")
@click.option("--target-accuracy", type=ACCURACY, default=None,
              help="With --target: time to this test accuracy (from each run's curve) [default: the run's].")
@user_errors
@run_dir_param("Run directory with at least one ok 'single' record (its step time and model size "
                          "are used).")
def predict(run_dir: str, bandwidth: float | None, latency: float | None, window: int | None,
            per_worker_batch: int | None, samples: int | None, max_workers: int | None, plot_path: str | None,
            as_json: bool, target: str | None, against: str | None, node_step: float | None,
            target_accuracy: float | None) -> None:
    """Seconds per epoch of ring allreduce and one parameter server at N = 1, 2, 4, ... workers from a
    run's step time and model size: a table and a plot (distbench/predict.py). With --target: each
    strategy's epoch, time to target and rank there, calibrated on the run (distbench/costmodel.py)."""
    import textwrap

    print_warnings()  # a bare --latency 50 (seconds): said once the command line parsed
    if target is not None or node_step is not None or against is not None or target_accuracy is not None:
        return _predict_target(run_dir, target, node_step, as_json, against, target_accuracy, {
            "--bandwidth": bandwidth, "--latency": latency, "--window": window, "--samples": samples,
            "--per-worker-batch": per_worker_batch, "--plot": plot_path, "--max-workers": max_workers})

    from distbench import predict as model
    from distbench.results.terminal import output_width

    require_results(run_dir)
    try:
        inp = model.inputs_from_run(run_dir)
        for flag, v in (("--window", window), ("--per-worker-batch", per_worker_batch), ("--samples", samples),
                        ("--max-workers", max_workers)):
            if v is not None and v < 1:
                raise ValueError(f"{flag} {v}: expected an integer >= 1 (or leave it out for the default)")
        for flag, v, lo in (("--bandwidth", bandwidth, "> 0"), ("--latency", latency, ">= 0")):
            if v is not None and (not math.isfinite(v) or v < 0 or (lo == "> 0" and v == 0)):
                raise ValueError(f"{flag} {v}: expected a finite number {lo} (bytes/s for --bandwidth, "
                                 "seconds for --latency)")
        b = per_worker_batch or inp.global_batch
        bw = model.DEFAULT_BANDWIDTH_BPS if bandwidth is None else bandwidth
        lat = model.DEFAULT_LATENCY_S if latency is None else latency
        win = window or inp.window or 1
        ns = [n for n in model.POWERS_OF_TWO + tuple(2 ** k for k in range(11, 21)) if n <= (max_workers or 1024)]
        preds = model.predict(inp.step_s * b / inp.global_batch, inp.model_bytes, samples or inp.n_train, b,
                              bw, lat, ns, win)
    except ValueError as e:
        raise ConfigError(f"predict: {e}") from None
    png_path = plot_path or Path(run_dir) / "predict.png"
    try:  # user test (helper-16): --json wrote RUN_DIR/predict.png unasked
        title = f"{run_dir}: {inp.model_bytes / 1e6:.3g} MB model, {bw / 1e9:.3g} GB/s, {lat * 1e6:.0f} us, {b}/worker"
        png = None if as_json and not plot_path else model.plot(preds, png_path, title)
    except OSError as e:
        raise ConfigError(f"predict: cannot write the plot {str(png_path)!r} ({e.strerror or e}); "
                          "pass --plot with a path in a writable folder") from None
    measured = model.measured_vs_predicted(run_dir, inp, bw, lat)
    if as_json:
        click.echo(json.dumps({"inputs": {**inp.__dict__, "per_worker_batch": b, "bandwidth_Bps": bw,
                                          "latency_s": lat, "window": win}, "predictions": model.to_json(preds),
                               "measured": [{**m.__dict__, "ratio": m.ratio} for m in measured]}, indent=2))
        return
    from rich.console import Console
    from rich.markup import escape

    from distbench.results.terminal import print_fitted

    width = output_width()
    for text in (f"compute per step: {inp.step_s * 1e3:.2f} ms at batch {inp.global_batch} ({inp.source}; "
                 f"train_s/steps = {inp.step_s_all * 1e3:.2f} ms), {inp.step_s * b / inp.global_batch * 1e3:.2f} ms "
                 f"at {b}/worker",
                 f"model {inp.model_bytes:,} bytes; bandwidth {bw:.3g} B/s; latency {lat:.3g} s; PS window {win}; "
                 f"{samples or inp.n_train:,} samples per epoch; per-worker batch fixed as N grows"):
        click.echo(text if width is None else textwrap.fill(text, width))
    thin = [p.workers for p in preds if p.steps_per_epoch < 1]
    shown = [p for p in preds if not thin or p.workers <= thin[0]]  # user test: 65x at 1024 workers on 1,293 samples
    console, _ = print_fitted(model.TABLE_HEADERS, model.table_rows(shown), Console(highlight=False), left=(),
                              block_head=1, drop=("allreduce comm/step", "PS comm/window", "steps/epoch"))
    if thin:
        console.print(escape(f"from {thin[0]} worker{'s' if thin[0] > 1 else ''} each worker takes less than one "
                             "step per epoch: the data, not the model, limits those rows, so the table stops there "
                             "(--json has them all; give --samples for a larger dataset); the parameter "
                             "server still pays one whole exchange per worker and epoch"))
    if measured:
        console.print(escape(f"measured in {run_dir} next to the model's prediction for the same setting (its global "
                             "batch split over N workers, its window and link rate; steady-state epochs 2..E):"))
        print_fitted(model.MEASURED_HEADERS, model.measured_rows(measured), console, left=("strategy", "scheme"),
                     block_head=3, drop=("measured s/epoch", "predicted s/epoch"))
        console.print(escape(model.MEASURED_LEGEND))
    console.print(escape(first_order_caveat(run_dir)))
    console.print(escape(f"wrote {png}"), soft_wrap=True)


FIRST_ORDER_CAVEAT = ("first-order model: no contention, stragglers, compute/communication overlap, per-call "
                      "framework costs or topology: its times can be several times off, in either direction. For a "
                      "cluster you mean to run on, ask the per-strategy model calibrated from this run: distbench "
                      "predict {run_dir} --target \"4 nodes x 2, 10 Gbit/s\" (docs/predict.md)")
"""The last line of the first-order table (user test: it said to trust its shape, 13x from --target)."""


def first_order_caveat(run_dir: str) -> str:
    """:data:`FIRST_ORDER_CAVEAT` for ``run_dir``; a run made on a cluster (every distributed row
    over shaped links) cannot calibrate ``--target`` (user test, helper-16: it was told to), so it
    names a one-host run instead and ``--against`` for this one; a run with no distributed row
    names the command that measures them."""
    from distbench.calibrate import distributed_rows
    from distbench.costmodel import run_target
    from distbench.results.store import read_records

    recs = read_records(run_dir)
    rows = distributed_rows(recs)
    if rows == "none":  # helper-26: --target refuses it
        from distbench.costmodel import no_distributed

        return (FIRST_ORDER_CAVEAT.split(" For a cluster")[0] + " The per-strategy model (--target) calibrates from "
                f"the distributed rows: {no_distributed(run_dir, recs)} (docs/predict.md)")
    if rows == "one-host":
        return FIRST_ORDER_CAVEAT.format(run_dir=shlex.quote(str(run_dir)))
    return (FIRST_ORDER_CAVEAT.split(" For a cluster")[0] + " This run was made on a cluster, which cannot "
            "calibrate the per-strategy model: predict from a one-host run of the same workload and check it "
            f"against this one: distbench predict ONE_HOST_RUN --target \"{run_target(run_dir)}\" --against "
            f"{shlex.quote(str(run_dir))} (docs/predict.md)")


def _against(run_dir: str, against: str, tgt: Any, node_step: float | None, preds: list[Any]
             ) -> tuple[dict[str, Any], str]:
    """``--against``'s measured rows at the target's worker count and its warning ('' when
    none); refused for a run of another model or other data (user test, helper-36).

    Raises:
        ConfigError: ``against`` holds no results, or trained another model or other data.
    """
    from distbench import costmodel

    require_results(against)
    other = costmodel.other_model_or_data(run_dir, against)
    if other:
        raise ConfigError(f"predict: --against {against} trained another model or other data ({other}), so it "
                          f"checks nothing of this prediction; give a run of {run_dir}'s workload on the target "
                          f"(distbench run {run_dir}/config.json there, or with --emulate for this machine)")
    measured = costmodel.measured_on(against, tgt.workers)
    warn = costmodel.against_mismatch(run_dir, against, tgt.cluster(node_step))
    if not any(a["strategy"] != "single" for a in costmodel.against(preds, measured)):  # single's own row: not
        # one (helper-26)
        warn = "; ".join(w for w in (warn, f"{against} has no ok row at {tgt.workers} workers of a predicted strategy "
                                     f"(it has {', '.join(map(str, costmodel.measured_counts(against))) or 'none'})")
                         if w)
    return measured, warn


def _predict_target(run_dir: str, target_text: str | None, node_step: float | None, as_json: bool,
                    against: str | None, target_accuracy: float | None, first_order_flags: dict[str, Any]) -> None:
    """``distbench predict RUN_DIR --target TEXT``: the per-strategy table (or JSON).

    Raises:
        ConfigError: ``--node-step``, ``--against`` or ``--target-accuracy`` without
            ``--target``, or with the first-order table's options (``first_order_flags``: each
            flag's value); a bad target, step or accuracy; what the model misses.
    """
    from distbench import costmodel
    from distbench.calibrate import ensure as ensure_calibration
    from distbench.results.advice import parse_target
    from distbench.results.records import accuracy_hint

    def named(flags: list[str], verb: str) -> str:  # "--a needs", "--a and --b need", "--a, --b and --c need"
        many = len(flags) > 1
        return (", ".join(flags[:-1]) + " and " if many else "") + flags[-1] + f" {verb}{'' if many else 's'}"

    first_order = [f for f, v in first_order_flags.items() if v is not None]
    if target_text is None:
        given = [f for f, v in (("--node-step", node_step), ("--against", against),
                                ("--target-accuracy", target_accuracy)) if v is not None]
        raise ConfigError(f"predict: {named(given, 'need')} --target (the cluster "
                          f"{'they are' if len(given) > 1 else 'it is'} about)")
    if first_order:
        raise ConfigError(f"predict: {named(first_order, 'belong')} to the first-order table: give --target "
                          "(per-strategy model, the link in its text) or the first-order options, not both")
    tgt = parse_target(target_text)
    if tgt.emulated and node_step is not None:
        raise ConfigError(f"predict: {costmodel.EMULATED_NODE_STEP}")
    for line in tgt.warnings():
        click.echo(f"distbench: warning: --target: {line}", err=True)
    if node_step is not None and not (math.isfinite(node_step) and node_step > 0):
        raise ConfigError(f"predict: --node-step {node_step}: expected seconds > 0 (single's step at the run's "
                          "global batch, measured on one target node)")
    if target_accuracy is not None and not 0 < target_accuracy <= 1:
        raise ConfigError(f"predict: --target-accuracy {target_accuracy:g}: expected a test accuracy in (0, 1]"
                          f"{accuracy_hint(target_accuracy)}")
    require_results(run_dir)
    ensure_calibration(run_dir)
    try:
        preds, inputs = costmodel.predict_strategies(run_dir, tgt.cluster(node_step), target_accuracy)
    except ValueError as e:
        raise ConfigError(f"predict: {e}") from None
    nothing = costmodel.nothing_distributed(preds, inputs)  # user test (helper-25): single alone, exit 0
    if nothing:
        raise ConfigError(f"predict: {nothing}")
    measured, warn = _against(run_dir, against, tgt, node_step, preds) if against is not None else (None, "")
    if warn:
        click.echo(f"distbench: warning: {warn}", err=True)
    if as_json:
        # the shape of advise --json's target_predictions (user test, helper-15: they differed)
        click.echo(json.dumps({"target": tgt.data(), "inputs": inputs, "strategies": [p.data() for p in preds],
                               **({"measured": measured, "against": costmodel.against(preds, measured),
                                   "against_warning": warn} if measured is not None else {})}, indent=2))
        return
    from rich.console import Console
    from rich.markup import escape

    from distbench.results.terminal import print_fitted

    console = Console(highlight=False)
    console.print(escape(costmodel.describe(tgt.text, tgt.cluster(node_step), inputs)))
    if not any(p.time_to_target_s for p in preds):
        console.print(escape(f"No strategy reaches {inputs['target_accuracy']:g} in the run's curves: the ranks are "
                             "by seconds per epoch only. Give a --target-accuracy the run reached, or run more "
                             "epochs."))
    print_fitted(costmodel.TABLE_HEADERS, costmodel.table_rows(preds, inputs["target_accuracy"]), console,
                 left=("strategy", "notes"), block_head=2, drop=("compute", "framework", "link"))
    if measured is not None:
        _print_against(console, costmodel.against_rows(preds, measured), against, tgt.workers, warn)


def _print_against(console: Any, rows: list[list[str]], against: str | None, workers: int, warn: str) -> None:
    """The ``--against`` table under the prediction, its warning (if any) above it."""
    from rich.markup import escape

    from distbench.costmodel import AGAINST_HEADERS
    from distbench.results.terminal import print_fitted

    if not rows:
        return
    if warn:  # on stdout too, above the ratios it undercuts (user test, helper-19: only after, on stderr)
        console.print(escape(f"warning: {warn}"))
    console.print(escape(f"measured in {against} at {workers} workers (median [min-max] over repeats, where the "
                         "report's time to target is the MLPerf mean; ratio = predicted / measured):"))
    print_fitted(AGAINST_HEADERS, rows, console, left=("strategy",), block_head=1)
