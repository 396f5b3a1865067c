"""The result record: one JSON object per (configuration, repeat), and its schema.

:data:`FIELDS` defines the record once: every top-level key, its type and its meaning.
:func:`new_record` builds every record from it (a key it does not define is refused),
:func:`distbench.results.store.record_problem` checks a line read back against it, and
the key table of docs/report.md is :func:`schema_markdown`'s output (a test compares them;
``python -m distbench.results.records`` prints it). A ``failed`` or ``unavailable``
record has the same keys as an ``ok`` one (``None`` where not applicable).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from distbench.contracts import Status, accuracy_hint


STATUSES = tuple(s.value for s in Status)

TIMING_KEYS = ("total_s", "startup_s", "train_s", "eval_s")

KINDS = {
    "name": "non-empty string",
    "text": "string",
    "status": ", ".join(STATUSES[:-1]) + " or " + STATUSES[-1],
    "count": "integer >= 0",
    "positive": "integer >= 1",
    "number": "number",
    "nonnegative": "number >= 0",
    "fraction": "number in [0, 1]",
    "object": "object",
    "list": "list",
}
"""The value kinds of :class:`RecordField`, as docs/report.md's table names them."""


@dataclass(frozen=True)
class RecordField:
    """One top-level key of the result record.

    Attributes:
        name: the JSON key.
        kind: one of :data:`KINDS`; every field may be ``null`` unless ``minimal``.
        doc: its meaning (one sentence or more; Markdown), for docs/report.md.
        always: :func:`new_record` puts it in every record (``default`` when not given);
            False for keys only some records carry (a failure's ``log_tail``).
        minimal: a line without it (or with it ``null``) is not a record: the store drops it.
        default: the value when not given, or a zero-argument callable making it.
    """

    name: str
    kind: str
    doc: str
    always: bool = True
    minimal: bool = False
    default: Any = None

    def make_default(self) -> Any:
        """A fresh default value (a callable default is called: lists and dicts are not shared)."""
        return self.default() if callable(self.default) else self.default


def _timings() -> dict[str, Any]:
    return {k: None for k in TIMING_KEYS}


FIELDS: tuple[RecordField, ...] = (
    RecordField("run_id", "text", "the run directory's name, the same in every record of one sweep"),
    RecordField("config_id", "name", "the configuration, safe in file names: `mirrored_w2`, `spark_ps-adag_w2_win5`, "
                "`horovod_w2_slow3x`", minimal=True),
    RecordField("communication_window", "count", "a window sweep's communication window (`null` outside one)"),
    RecordField("bandwidth", "text", "an emulated cluster's link rate in tc units (`100mbit`), or `null`"),
    RecordField("hosts", "list", "the hosts the configuration's processes ran on (host names; emulated hosts' "
                "namespaces)"),
    RecordField("scenario", "object", "the straggler scenario: `worker`, `slowdown`, `jitter_cv`, `jitter_seed`; "
                "`null` outside a scenario sweep"),
    RecordField("strategy", "name", "the strategy as `--strategies` spells it (`spark_ps:adag`)", minimal=True),
    RecordField("workers", "positive", "`--workers`: the worker (replica, rank) count asked for", minimal=True),
    RecordField("replicas", "count", "replicas that trained (`workers`, or what the strategy made of it)"),
    RecordField("repeat", "count", "the repeat's index, from 0", minimal=True),
    RecordField("status", "status", "`ok`: trained and evaluated; `failed`: crashed, refused by an engine or diverged; "
                "`timeout`: killed at `run.timeout_s`; `unavailable`: cannot run here", minimal=True),
    RecordField("reason", "text", "one line: why it is not `ok` (empty when it is)", default=""),
    RecordField("log", "text", "the configuration's log file under the run directory (the shared engine's log for "
                "`spark_ps` and `mpi_ps` rows); `null` where none was written: a record your own launcher wrote, a "
                "strategy found unavailable before anything started"),
    RecordField("log_tail", "text", "the log's last lines (failed and timed-out records only)", always=False),
    RecordField("failed_process", "text", "which process failed (`rank 1`, `worker 0`, `mpirun`...), where known "
                "(failed records only)", always=False),
    RecordField("global_batch_size", "count", "samples per optimizer step over all replicas"),
    RecordField("per_replica_batch_size", "count", "`global_batch_size / replicas`"),
    RecordField("epochs", "count", "`training.epochs`"),
    RecordField("learning_rate", "number", "the local optimizer's learning rate as the strategy trained with it "
                "(scaled by the replicas under `lr_scaling = \"linear\"` where the strategy applies it)"),
    RecordField("lr_scaling", "text", "`training.lr_scaling`"),
    RecordField("optimizer", "text", "`training.optimizer`"),
    RecordField("target_accuracy", "number", "the test accuracy `time_to_target_s` is measured to"),
    RecordField("initial_weights_sha256", "text", "SHA-256 of the initial weights every strategy started from"),
    RecordField("workload", "object", "dataset, sizes, model, loss, parameters, hashes; for Parquet without "
                "`test_path`, `test_split`: rows held out, fraction, rows per class"),
    RecordField("timings", "object", "seconds: `total_s`, `startup_s`, `train_s`, `eval_s` and `phases` "
                "(below)", default=_timings),
    RecordField("steps", "count", "optimizer steps on global batches (synchronous strategies); replica steps summed "
                "over the replicas (parameter servers)"),
    RecordField("samples", "count", "samples all replicas processed: `steps` x the batch each step took"),
    RecordField("samples_per_s", "nonnegative", "`samples / timings.train_s`"),
    RecordField("final_test_accuracy", "fraction", "test accuracy of the final weights, evaluated by the harness"),
    RecordField("final_test_loss", "number", "test loss of the final weights"),
    RecordField("time_to_target_s", "nonnegative", "training seconds until the curve first reached `target_accuracy`; "
                "`null` if never"),
    RecordField("curve", "list", "one point per epoch: `elapsed_s`, `epoch`, `step`, `test_loss`, "
                "`test_accuracy`; `data_epochs` for a parameter server (below)", default=list),
    RecordField("details", "object", "strategy specifics: devices, threads, `batchnorm`, `step_delays`, the "
                "parameter servers' accounting...", default=dict),
    RecordField("provenance", "object", "package versions, Python, OS, CPU model and count, memory, GPUs, hostname, "
                "git commit, seed", default=dict),
    RecordField("finished_unix", "number", "Unix time the record was made", default=time.time),
)
"""Every top-level key of a record, in the order records are written."""

FIELD = {f.name: f for f in FIELDS}

REQUIRED_KEYS = tuple(f.name for f in FIELDS if f.always)
"""Keys every record made by :func:`new_record` has."""

DIVERGED_LOSS = 1e6
"""A final test loss above this (or not finite) marks a run as diverged, in the report and
``advise`` (:func:`distbench.results.stats.flag_collapses`) as in ``predict``: its curve may
cross a low target accuracy by chance (user test: an EASGD run at 0.51, then 0.03, ending at
loss 5e30)."""
CURVE_NUMBERS = ("elapsed_s", "epoch", "step", "test_accuracy", "test_loss", "train_loss")
"""Keys of a curve point that are a number or ``null``."""


def schema_markdown() -> str:
    """The record's key table for docs/report.md: one row per :data:`FIELDS` entry
    (key, type, meaning); ``null`` is allowed where the type does not say "never null"."""
    rows = ["| key | type | meaning |", "|---|---|---|"]
    for f in FIELDS:
        kind = KINDS[f.kind] + ("; never null" if f.minimal else "") + ("; some records" if not f.always else "")
        rows.append(f"| `{f.name}` | {kind} | {f.doc} |")
    return "\n".join(rows) + "\n"


def config_id(strategy: str, workers: int, window: int | None = None, bandwidth: str | None = None, *,
              scenario: Any = None) -> str:
    """Identifier of a configuration, safe in file names: ``spark_ps:adag`` with 2
    workers -> ``spark_ps-adag_w2``; with a swept communication window 5 ->
    ``spark_ps-adag_w2_win5``; on emulated links of 100mbit -> ``..._bw100mbit``; under a
    straggler scenario (a :class:`~distbench.config.scenario.Scenario`) its suffix follows:
    ``horovod_w2_slow2x``."""
    return (f"{strategy.replace(':', '-')}_w{workers}" + (f"_win{window}" if window else "")
            + (f"_bw{bandwidth}" if bandwidth else "") + (scenario.suffix if scenario is not None else ""))


def straggler_text(scenario: dict[str, Any] | None) -> str:
    """A straggler scenario (a record's ``scenario``) in a few characters: ``1x`` (the sweep's
    baseline), ``w1 3x`` (worker 1 three times slower), ``+ jit 0.3`` appended with jitter;
    ``""`` for None (outside a scenario sweep)."""
    if scenario is None:
        return ""
    slow = scenario.get("slowdown", 1.0)
    text = "1x" if scenario.get("worker") is None or slow == 1 else f"w{scenario['worker']} {slow:g}x"
    return text + (f" + jit {scenario['jitter_cv']:g}" if scenario.get("jitter_cv") else "")


def config_label(strategy: str, workers: int, window: int | None = None, bandwidth: str | None = None,
                 scenario: dict[str, Any] | None = None) -> str:
    """How every output names a configuration: the strategy as ``--strategies`` spells it,
    then its settings: ``mirrored (2 workers)``, ``spark_ps:adag (2 workers, window 5)``,
    ``mpi_ps:adag (2 workers, 100mbit links)``, ``horovod (2 workers, w1 3x)``.

    Args:
        strategy: the strategy name (``spark_ps:adag``).
        workers: worker count.
        window: a window sweep's communication window (None outside one).
        bandwidth: an emulated cluster's link rate (tc units), or None.
        scenario: the straggler scenario as a record stores it, or None.
    """
    parts = [f"{workers} worker{'s' if workers != 1 else ''}"]
    if window:
        parts.append(f"window {window}")
    if bandwidth:
        parts.append(f"{bandwidth} links")
    if straggler_text(scenario):
        parts.append(straggler_text(scenario))
    return f"{strategy} ({', '.join(parts)})"


def record_key(cid: str, repeat: int) -> str:
    """Unique key of one record in a run: ``<config_id>_r<repeat>``."""
    return f"{cid}_r{repeat}"


def new_record(run_id: str, strategy: str, workers: int, repeat: int, status: Status | str,
               window: int | None = None, bandwidth: str | None = None, *, scenario: Any = None,
               **fields: Any) -> dict[str, Any]:
    """A record with every key of :data:`REQUIRED_KEYS` (each field's default where not
    given) and ``fields``. Every record of distbench is made here (the harness feeds it
    from ``harness/assembly.py:make_record``).

    ``window`` is the communication window of a window sweep, ``bandwidth`` the link rate
    of an emulated cluster and ``scenario`` the straggler
    :class:`~distbench.config.scenario.Scenario` of a scenario sweep (all part of ``config_id``;
    the record's ``scenario`` field is the scenario's dict, ``None`` outside a sweep).

    Raises:
        ValueError: ``status`` is not a :class:`Status`, or a key of ``fields`` is not in
            :data:`FIELDS` (a new key is defined there first, with its type and meaning).
    """
    try:
        status = Status(status).value
    except ValueError:
        raise ValueError(f"status {status!r} is not one of {STATUSES}") from None
    unknown = sorted(fields.keys() - FIELD.keys())
    if unknown:
        raise ValueError(f"record keys {unknown} are not defined in distbench.results.records.FIELDS; "
                         "define a new key there (type and meaning) before a record carries it")
    given = {"run_id": run_id, "config_id": config_id(strategy, workers, window, bandwidth, scenario=scenario),
             "communication_window": window, "bandwidth": bandwidth,
             "scenario": scenario.to_dict() if scenario is not None else None,
             "strategy": strategy, "workers": workers, "repeat": repeat, "status": status, **fields}
    return {f.name: given[f.name] if f.name in given else f.make_default()
            for f in FIELDS if f.always or f.name in given}


def model_points(curve: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A record's curve points, by epoch, one per state of the model: of consecutive points
    with the same ``step``, only the last; each point's ``epoch`` is the passes over the data
    the model holds (its ``data_epochs`` where it has one, a float).

    A parameter server's centre changes once per commit or barrier round (the curve's
    ``step``); with fewer of them than epochs (a communication window longer than the steps
    a replica takes per epoch: EASGD's default 32 against 13 steps) two epochs hold the same
    centre, taken at the same moment, so the interval between them is not an epoch's time (a
    steady epoch of 0 s, helper-38). The last of them is kept: the update was made after
    the earlier epochs' ends. And the centre taken for epoch 1 there is the first update's,
    which holds 2.46 epochs of each replica's data (``data_epochs``): read as epoch 1, the
    warm-up held 1.46 steady epochs (helper-39). Points without ``epoch`` or ``elapsed_s``
    are dropped.
    """
    pts = sorted((p for p in curve if p.get("epoch") and p.get("elapsed_s") is not None), key=lambda p: p["epoch"])
    kept = [{**p, "epoch": p["data_epochs"]} if p.get("data_epochs") else p for p, nxt in zip(pts, pts[1:] + [None])
            if nxt is None or p.get("step") is None or nxt.get("step") != p["step"]]
    # two updates within the last window both hold every replica's data (a clock past the last full window)
    return [p for p, nxt in zip(kept, kept[1:] + [None]) if nxt is None or nxt["epoch"] > p["epoch"]]


def centre_updated_at_the_end(rec: dict[str, Any]) -> bool:
    """Whether a parameter-server record's communication window is at least the steps each
    replica took in the whole run: every replica then commits once, at its end, and the
    times of its curve's points are when those commits arrived, not epoch ends (user test,
    helper-42: window 50 against 40 steps read as a first epoch of 0.156 s and later ones of
    0.001 s, and advised ``--epochs 962``)."""
    d = rec.get("details") or {}
    window, steps = d.get("communication_window"), d.get("per_worker_steps")
    return bool(window and steps and window >= max(steps))


def time_to_target(curve: list[dict[str, Any]], target: float) -> float | None:
    """Seconds since training start at which test accuracy first reached ``target``
    (the first curve point at or above it), or ``None`` if never.

    Args:
        curve: points with ``elapsed_s`` and ``test_accuracy``, in training order.
        target: accuracy in (0, 1].
    """
    for p in curve:
        if p["test_accuracy"] is not None and p["test_accuracy"] >= target:
            return float(p["elapsed_s"])
    return None


def retarget(records: list[dict[str, Any]], target: float) -> list[dict[str, Any]]:
    """Copies of ``records`` scored against another target accuracy: ``target_accuracy``
    set to ``target`` and each ok record's ``time_to_target_s`` recomputed from its curve
    (:func:`time_to_target`); the records themselves are not changed.

    Args:
        records: run records.
        target: test accuracy in (0, 1].

    Raises:
        ValueError: ``target`` outside (0, 1].
    """
    if not 0.0 < target <= 1.0:
        raise ValueError(f"--target-accuracy {target}: expected a test accuracy in (0, 1]"
                         f"{accuracy_hint(target, '0.85')}")
    out = []
    for r in records:
        r = {**r, "target_accuracy": target}
        if r.get("status") == "ok":
            r["time_to_target_s"] = time_to_target(r.get("curve") or [], target)
        out.append(r)
    return out


if __name__ == "__main__":  # python -m distbench.results.records: docs/report.md's key table
    print(schema_markdown(), end="")
