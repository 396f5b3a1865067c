"""A first-order scaling cost model (``distbench predict``): time per epoch of synchronous
ring-allreduce training and of a single parameter server, for N = 1..1024 workers.

Inputs (SI units throughout):

- ``compute_s``: seconds of one optimizer step's computation (forward + backward +
  update) on one worker at the per-worker batch ``b``; from a run, single's steady-state
  step time (see :func:`inputs_from_run`);
- ``model_bytes``: bytes of the weights (parameters x 4 for float32); gradients and
  deltas are the same size;
- ``bandwidth_Bps``: bytes per second one worker's (and the server's) link carries in
  each direction; ``latency_s``: one message's latency, seconds;
- ``n_train`` samples per epoch and the per-worker batch ``b``, fixed as N grows (weak
  scaling): ``steps = n_train / (N b)`` optimizer steps per worker per epoch (kept
  fractional so the curves are smooth; below 1 the dataset is too small for N workers).

Ring allreduce (Patarasuk & Yuan 2009; Horovod, NCCL), per step::

    t_step = compute_s + 2 (N-1)/N x model_bytes / bandwidth + 2 (N-1) x latency
    t_epoch = steps x t_step

A single parameter server, per communication window of ``w`` local steps: every worker
pushes a delta and pulls the centre (2 x model_bytes), and the server's one link carries
all N workers' traffic, so an exchange round costs N x 2 x model_bytes / bandwidth, plus
one round trip (2 x latency: the commit and the pull; workers' latencies overlap)::

    t_exchange = N x 2 x model_bytes / bandwidth + 2 x latency
    t_epoch    = steps x compute_s + ceil(steps / w) x t_exchange

A worker commits its last window even when it is partial, so every epoch pays whole
exchanges, at least one (with fewer steps per epoch than ``w`` the window no longer
saves anything). With ``N = 1`` the ring has nothing to exchange, while the server still
costs one push and one pull per window.

Where the model stops being trustworthy (it is deliberately first-order):

- it ignores contention: workers sharing cores, memory bandwidth or one NIC (on one
  2-core machine every extra worker slows every other one's compute);
- no stragglers or variance: a synchronous step waits for the slowest worker, and the
  wait grows with N; the model uses one mean compute time;
- no overlap of communication with computation (Horovod's tensor fusion and
  backprop-overlapped allreduce, asynchronous PS pushes), so it overestimates when
  overlap works and is a lower bound when messages are tiny and per-call overheads
  (Python, framework, Spark, serialization) dominate;
- a single un-sharded server; real deployments shard the parameters over several
  servers (the server term then divides by the shard count) or add aggregation trees;
- bandwidth and latency are one pair of numbers: no topology (hierarchical or 2-D
  rings, NVLink vs PCIe vs Ethernet), no NCCL-vs-TCP/Gloo/MPI protocol differences,
  no TCP slow start or congestion at 1,000 workers;
- it predicts time per epoch only: staleness of asynchronous updates, larger effective
  batches and learning-rate schedules change how many epochs reach a given accuracy,
  which the model does not see.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from distbench.results.records import centre_updated_at_the_end, model_points
from distbench.results.store import read_records, untaken

#: 10 GbE: 1.25e9 bytes/s each way, ~50 microseconds per message (kernel TCP).
DEFAULT_BANDWIDTH_BPS = 1.25e9
DEFAULT_LATENCY_S = 50e-6
POWERS_OF_TWO = tuple(2 ** k for k in range(11))  # 1..1024


@dataclass(frozen=True)
class Prediction:
    """The model's figures for one worker count.

    Attributes:
        workers: N.
        steps_per_epoch: optimizer steps per worker per epoch, ``n_train / (N b)``.
        compute_s: computation seconds of one step (as given).
        allreduce_comm_s: ring-allreduce seconds per step.
        allreduce_epoch_s: ring-allreduce seconds per epoch.
        ps_comm_s: parameter-server seconds of one exchange (once per window, whole windows).
        ps_epoch_s: parameter-server seconds per epoch.
        window: the PS communication window ``w`` (local steps per exchange).
        n_train: samples per epoch.
    """

    workers: int
    steps_per_epoch: float
    compute_s: float
    allreduce_comm_s: float
    allreduce_epoch_s: float
    ps_comm_s: float
    ps_epoch_s: float
    window: int
    n_train: int

    @property
    def allreduce_samples_per_s(self) -> float:
        """Training samples per second of all workers together under ring allreduce."""
        return self.n_train / self.allreduce_epoch_s

    @property
    def ps_samples_per_s(self) -> float:
        """Training samples per second of all workers together with one parameter server."""
        return self.n_train / self.ps_epoch_s



def no_single(run_dir: str | Path, records: list[dict[str, Any]], needs: str, with_rest: bool = False) -> str:
    """The message for a run without an ok ``single`` record: the command that measures one.

    A ``--resume`` keeps recorded configurations as they are, so it measures ``single`` only
    when ``single`` was never recorded; a ``single`` recorded ``unavailable`` or ``failed``
    (e.g. on a GPU machine without CUDA's libraries) is named with its reason and measured
    into a new run directory once that is fixed: ``single`` alone, or with ``with_rest`` (the
    per-strategy model, which needs ``single`` and the distributed rows in one directory;
    user test, helper-25) the whole sweep again.
    """
    rd = str(run_dir)
    bad = [r for r in records if r.get("strategy") == "single" and r.get("status") != "ok"]
    if not bad:
        return (f"{rd} has no ok 'single' record: {needs}; distbench run --strategies single --out {rd} --resume "
                "measures it")
    why = (bad[-1].get("reason") or "").split("; ")[0]
    why = f": {why}" if why else ""  # (helper-26: "(failed: )")
    timeout = longer_timeout(rd) if bad[-1].get("status") == "timeout" else ""  # helper-26: the same command again
    again, alone = untaken(rd + "-again"), untaken(rd + "-single")  # followed once: a new one (helper-29)
    fix = (f"distbench run {rd}/config.json{timeout} --out {again} measures it with the rest of the sweep, which "
           "the model needs in one run directory" if with_rest else
           f"distbench run {rd}/config.json --strategies single{timeout} --out {alone} measures it")
    return (f"{rd} has no ok 'single' record ({bad[-1].get('status')}{why}): {needs}; "
            + ("" if timeout else "once that is fixed, ") + f"{fix} (a --resume keeps recorded configurations as "
            "they are)")


def longer_timeout(run_dir: str | Path | None) -> str:
    """`` --timeout S`` for a ``single`` that timed out: 4x the run's per-configuration limit
    (its config.json's ``run.timeout_s``; 900 s where that is unknown or unreadable), and at
    least that limit plus twice the longest start-up of the run's strategies (their records'
    ``startup_s``, or their families' typical start-up where none ended ok), rounded up to
    10 s: user test (helper-40): a 3 s limit that expired during start-ups of 11-15 s got a
    Run next of 12 s, which timed out again."""
    import json

    from distbench.procinfo import DEFAULT_STARTUP_S, STARTUP_SEED_S

    try:
        if run_dir is None:
            raise ValueError("no run directory")
        cfg = json.loads((Path(run_dir) / "config.json").read_text())
        limit = float(cfg["run"]["timeout_s"])
        names = list(cfg["run"].get("strategies") or [])
    except (OSError, ValueError, KeyError, TypeError):
        limit, names = 900.0, []
    recs = read_records(run_dir) if run_dir is not None and (Path(run_dir) / "results.jsonl").exists() else []
    measured = [float(t) for r in recs if (t := (r.get("timings") or {}).get("startup_s"))]
    start = max(measured + [STARTUP_SEED_S.get(n.split(":")[0], DEFAULT_STARTUP_S) for n in names] or [0.0])
    return f" --timeout {math.ceil(max(4 * limit, limit + 2 * start) / 10) * 10:g}"


def ring_allreduce_s(workers: int, model_bytes: float, bandwidth_Bps: float, latency_s: float) -> float:
    """Seconds of one ring allreduce of ``model_bytes`` over ``workers`` workers:
    ``2 (N-1)/N x bytes / bandwidth + 2 (N-1) x latency`` (0 for one worker)."""
    n = workers
    if n <= 1:
        return 0.0
    return 2 * (n - 1) / n * model_bytes / bandwidth_Bps + 2 * (n - 1) * latency_s


def ps_exchange_s(workers: int, model_bytes: float, bandwidth_Bps: float, latency_s: float) -> float:
    """Seconds of one exchange round with a single parameter server: each of ``workers``
    workers pushes and pulls ``model_bytes`` through the server's one link
    (``N x 2 x bytes / bandwidth``) plus one round trip (``2 x latency``)."""
    return workers * 2 * model_bytes / bandwidth_Bps + 2 * latency_s


def predict(compute_s: float, model_bytes: float, n_train: int, per_worker_batch: int,
            bandwidth_Bps: float = DEFAULT_BANDWIDTH_BPS, latency_s: float = DEFAULT_LATENCY_S,
            workers: Iterable[int] = POWERS_OF_TWO, window: int = 1) -> list[Prediction]:
    """Predict time per epoch for each worker count (weak scaling: per-worker batch fixed).

    Args:
        compute_s: seconds of one step's computation on one worker at ``per_worker_batch``.
        model_bytes: bytes of the model's weights (= of one gradient or delta).
        n_train: training samples per epoch.
        per_worker_batch: samples per step on each worker (fixed as N grows).
        bandwidth_Bps: link bandwidth, bytes per second each way.
        latency_s: per-message latency, seconds.
        workers: worker counts to predict (default 1, 2, 4, ..., 1024).
        window: parameter-server communication window (local steps between exchanges).

    Returns:
        One :class:`Prediction` per worker count, in the given order.

    Raises:
        ValueError: a non-finite input, a non-positive time, size, bandwidth, batch, sample count, worker
            count or window, or a negative latency.
    """
    check_finite(compute_s, model_bytes, bandwidth_Bps, latency_s)
    if compute_s <= 0 or model_bytes <= 0 or bandwidth_Bps <= 0 or n_train <= 0 or per_worker_batch <= 0:
        raise ValueError("compute_s, model_bytes, bandwidth_Bps, n_train and per_worker_batch must be > 0")
    if latency_s < 0 or window < 1:
        raise ValueError("latency_s must be >= 0 and window >= 1")
    out = []
    for n in workers:
        if n < 1:
            raise ValueError(f"worker count {n} must be >= 1")
        steps = n_train / (n * per_worker_batch)
        ar = ring_allreduce_s(n, model_bytes, bandwidth_Bps, latency_s)
        ps = ps_exchange_s(n, model_bytes, bandwidth_Bps, latency_s)
        out.append(Prediction(
            workers=n, steps_per_epoch=steps, compute_s=compute_s, allreduce_comm_s=ar,
            allreduce_epoch_s=steps * (compute_s + ar), ps_comm_s=ps,
            ps_epoch_s=steps * compute_s + exchanges(steps, window) * ps, window=window, n_train=n_train))
    return out


def exchanges(steps: float, window: int) -> int:
    """Parameter-server exchanges per worker per epoch: ``ceil(steps / window)``, at least
    one (the last, partial window is committed too); ``steps`` may be fractional."""
    return max(1, math.ceil(round(steps / window, 9)))


# ---------------------------------------------------------------- model FLOPs
def forward_flops(model: Any, input_shape: Sequence[int], num_classes: int) -> int:
    """Forward-pass FLOPs of one sample through a distbench ``mlp`` or ``cnn``, counted
    analytically from the layer shapes as 2 x multiply-accumulates of the Conv2D (3x3,
    ``same`` padding) and Dense layers; biases, activations and pooling are left out
    (well under 1 % for these models). A training step costs about 3x this per sample
    (forward, plus backward for activations and for weights).

    Args:
        model: a :class:`distbench.config.ModelConfig` (``name``, ``filters``, ``hidden``).
        input_shape: one sample's shape ``(H, W)`` or ``(H, W, C)``.
        num_classes: number of output logits.
    """
    h, w = int(input_shape[0]), int(input_shape[1])
    c = int(input_shape[2]) if len(input_shape) > 2 else 1
    flops = 0
    if model.name == "cnn":
        for f in model.filters:
            flops += 2 * h * w * 9 * c * f
            c = f
            if h >= 2 and w >= 2:
                h, w = h // 2, w // 2
    width = h * w * c
    for units in list(model.hidden) + [num_classes]:
        flops += 2 * width * units
        width = units
    return flops


# --------------------------------------------------------------- from a run dir
@dataclass(frozen=True)
class RunInputs:
    """What :func:`inputs_from_run` reads from a run directory.

    Attributes:
        step_s: single's seconds per optimizer step at ``global_batch`` (steady state).
        step_s_all: single's ``train_s / steps`` (first-epoch tracing included), for reference.
        model_bytes: ``workload.num_parameters`` x 4.
        n_train: training samples.
        global_batch: single's batch (its per-step batch).
        window: the communication window of the run's ``spark_ps``/``mpi_ps`` records (ADAG's first;
            ``None`` if none).
        records: how many ``single`` records were used.
        source: how ``step_s`` was computed, in words.
    """

    step_s: float
    step_s_all: float
    model_bytes: int
    n_train: int
    global_batch: int
    window: int | None
    records: int
    source: str


def steady_step_s(rec: dict[str, Any]) -> float | None:
    """Seconds per step after the first epoch: the median over the record's consecutive
    epoch-end curve points of seconds / steps between them, as :func:`epoch_s` (``None``
    with fewer than 2 epochs). The first epoch holds one-off warm-up (input pipeline, first
    allocations). User test (helper-16): a mean from the first to the last point quoted
    single's step as 7.42 ms here and 7.49 ms in ``predict --target``."""
    pts = [(p["epoch"], p["step"], p["elapsed_s"]) for p in model_points(rec.get("curve") or [])
           if p.get("step") is not None]
    if not pts or pts[0][0] != 1:
        return None
    per = [(b[2] - a[2]) / (b[1] - a[1]) for a, b in zip(pts, pts[1:]) if b[1] > a[1]]
    return statistics.median(per) if per else None


def inputs_from_run(run_dir: str | Path) -> RunInputs:
    """Compute time per step and model size from a run's ``single`` records.

    The step time is the median over ``single``'s ok records of the steady-state step
    time (epochs 2..E: the first epoch's warm-up is a one-off), or of
    ``train_s / steps`` when a run has a single epoch.

    Raises:
        ValueError: no results file, or no ok ``single`` record in it.
    """
    path = Path(run_dir) / "results.jsonl"
    if not path.exists():
        raise ValueError(f"{run_dir!s} holds no results.jsonl: run 'distbench run --strategies single' first")
    recs = read_records(run_dir)
    singles = [r for r in recs if r.get("strategy") == "single" and r.get("status") == "ok" and r.get("steps")]
    if not singles:
        raise ValueError(no_single(run_dir, recs, "predict needs single's step time"))
    all_steps = [r["timings"]["train_s"] / r["steps"] for r in singles]
    steady = [s for s in (steady_step_s(r) for r in singles) if s]
    step_s = statistics.median(steady) if steady else statistics.median(all_steps)
    source = ("single's steady-state step time (median over epochs 2..E and repeats)" if steady
              else "single's train_s / steps (one epoch only: tracing included)")
    ps = ("spark_ps:", "mpi_ps:")  # both run the same replica loop and windows
    windows = [(r.get("details") or {}).get("communication_window") for r in recs
               if str(r.get("strategy", "")).startswith(ps) and r.get("status") == "ok"]
    adag = [(r.get("details") or {}).get("communication_window") for r in recs
            if r.get("strategy") in ("spark_ps:adag", "mpi_ps:adag") and r.get("status") == "ok"]
    window = next((w for w in adag + windows if w), None)
    wl = singles[0]["workload"]
    return RunInputs(step_s=step_s, step_s_all=statistics.median(all_steps),
                     model_bytes=int(wl["num_parameters"]) * 4, n_train=int(wl["sizes"]["train"]),
                     global_batch=int(singles[0]["global_batch_size"]), window=window, records=len(singles),
                     source=source)


# ------------------------------------------------------------------ rendering
def _t(s: float) -> str:
    """Seconds in a compact, readable unit."""
    if s >= 100:
        return f"{s:,.0f} s"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} us"


TABLE_HEADERS = ("workers", "steps/epoch", "allreduce comm/step", "allreduce epoch", "allreduce speed-up",
                 "PS comm/window", "PS epoch", "PS speed-up")


def table_rows(preds: Sequence[Prediction]) -> list[list[str]]:
    """Rows (strings) matching :data:`TABLE_HEADERS`: per N the steps, the communication
    per step/window, the epoch times and each scheme's speed-up (epoch time of the first
    row, normally N = 1, over this row's)."""
    base_ar, base_ps = preds[0].allreduce_epoch_s, preds[0].ps_epoch_s
    return [[str(p.workers), f"{p.steps_per_epoch:.3g}", _t(p.allreduce_comm_s), _t(p.allreduce_epoch_s),
             f"{base_ar / p.allreduce_epoch_s:.1f}x", _t(p.ps_comm_s), _t(p.ps_epoch_s),
             f"{base_ps / p.ps_epoch_s:.1f}x"] for p in preds]


def format_table(preds: Sequence[Prediction]) -> str:
    """:func:`table_rows` as plain text, columns right-aligned, a rule under the headers."""
    rows = [list(TABLE_HEADERS)] + table_rows(preds)
    widths = [max(len(r[i]) for r in rows) for i in range(len(TABLE_HEADERS))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ------------------------------------------------------- measured vs predicted
ALLREDUCE = ("mirrored", "multi_worker_mirrored", "horovod", "horovod_mpi")
PS_FAMILIES = ("spark_ps:", "mpi_ps:")


@dataclass(frozen=True)
class Measured:
    """One measured configuration of the run next to the model's prediction for its setting.

    Attributes:
        strategy, workers: the configuration; ``window``: its PS window (None for allreduce).
        bandwidth: the emulated link rate it ran on (tc units), or None.
        scheme: ``"allreduce"`` or ``"PS"``.
        measured_epoch_s, predicted_epoch_s: seconds per steady-state epoch (epochs 2..E).
        measured_speedup, predicted_speedup: single's steady-state epoch time / this one's
            (the first epoch's one-off warm-up excluded, as the model has none).
        table_speedup: the results table's speed-up of the same configuration (single's
            median training time / its own, warm-up included), or None without one.
    """

    strategy: str
    workers: int
    window: int | None
    bandwidth: str | None
    scheme: str
    measured_epoch_s: float
    predicted_epoch_s: float
    measured_speedup: float
    predicted_speedup: float
    table_speedup: float | None = None

    @property
    def ratio(self) -> float:
        """Measured speed-up / predicted speed-up (1: the model is right; < 1: it is optimistic)."""
        return self.measured_speedup / self.predicted_speedup


def epoch_s(rec: dict[str, Any]) -> float | None:
    """Seconds per steady-state epoch of a record: the median of its curve's intervals
    between consecutive epoch ends (the first epoch's warm-up is before the first point, so
    not in it); ``train_s / epochs`` with one epoch.

    A median, not the mean from the first to the last point: one epoch's stall does not
    move it (a parameter server's last epoch also waits for the final commits; on 2 cores a
    19 KB model's 0.02 s epochs vary by a quarter between repeats, benchmarks/predict_validation.py).
    A parameter server whose replicas commit only at their end
    (:func:`~distbench.results.records.centre_updated_at_the_end`) has no epoch ends in its
    curve: ``train_s / epochs``."""
    pts = [(p["epoch"], p["elapsed_s"]) for p in model_points(rec.get("curve") or [])]  # helper-38: a repeated
    if len(pts) >= 2 and pts[-1][0] > pts[0][0] and not centre_updated_at_the_end(rec):  # centre's zero interval
        return statistics.median((b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(pts, pts[1:]) if b[0] > a[0])
    train, epochs = (rec.get("timings") or {}).get("train_s"), rec.get("epochs") or len(pts)
    return train / epochs if train and epochs else None


def measured_vs_predicted(run_dir: str | Path, inp: RunInputs, bandwidth_Bps: float,
                          latency_s: float) -> list[Measured]:
    """The run's ok allreduce and parameter-server configurations, each with the model's
    prediction for its own setting: the run's global batch split over its N workers
    (``compute_s`` = single's step time / N, ``n_train / global batch`` steps per worker),
    its PS window, its emulated link rate when it had one (else ``bandwidth_Bps``).

    Args:
        run_dir: the run directory.
        inp: :func:`inputs_from_run` of it.
        bandwidth_Bps, latency_s: the links assumed where the run recorded no rate.

    Returns:
        one :class:`Measured` per (strategy, workers, window, bandwidth), in the run's
        order, with the results table's speed-up of the same configuration next to the
        steady-state one; rows with a slowed worker (a straggler sweep) are left out; empty
        when the run has none or no steady-state single epoch time.
    """
    from distbench.config.cluster import parse_rate
    from distbench.results.records import straggler_text

    recs = [r for r in read_records(run_dir) if straggler_text(r.get("scenario")) in ("", "1x")]
    singles = [e for e in (epoch_s(r) for r in recs if r.get("strategy") == "single" and r.get("status") == "ok")
               if e]
    if not singles:
        return []
    single_meas = statistics.median(singles)
    single_pred = inp.n_train / inp.global_batch * inp.step_s
    def train_s(rs: list[dict[str, Any]]) -> float | None:
        ts = [(r.get("timings") or {}).get("train_s") for r in rs]
        return statistics.median([t for t in ts if t]) if any(ts) else None

    single_train = train_s([r for r in recs if r.get("strategy") == "single" and r.get("status") == "ok"])
    groups: dict[tuple[Any, ...], list[float]] = {}
    members: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in recs:
        name = str(r.get("strategy", ""))
        e = epoch_s(r) if r.get("status") == "ok" else None
        if e and (name in ALLREDUCE or name.startswith(PS_FAMILIES)):
            window = (r.get("details") or {}).get("communication_window") if name not in ALLREDUCE else None
            key = (name, int(r["workers"]), window, r.get("bandwidth"))
            groups.setdefault(key, []).append(e)
            members.setdefault(key, []).append(r)
    out = []
    for (name, n, window, rate), times in groups.items():
        bits = parse_rate("bandwidth", rate) if rate else None
        bw = bits / 8 if bits else bandwidth_Bps
        b = max(1, inp.global_batch // n)
        p = predict(inp.step_s * b / inp.global_batch, inp.model_bytes, inp.n_train, b, bw, latency_s, [n],
                    window or 1)[0]
        scheme = "allreduce" if name in ALLREDUCE else "PS"
        pred = p.allreduce_epoch_s if scheme == "allreduce" else p.ps_epoch_s
        meas = statistics.median(times)
        own = train_s(members[(name, n, window, rate)])
        out.append(Measured(name, n, window, rate, scheme, meas, pred, single_meas / meas, single_pred / pred,
                            single_train / own if single_train and own else None))
    return out


MEASURED_HEADERS = ("strategy", "workers", "scheme", "measured s/epoch", "predicted s/epoch", "steady speed-up",
                    "predicted speed-up", "measured/predicted", "table speed-up")
MEASURED_LEGEND = ("steady speed-up: single's steady-state seconds per epoch / the row's (epochs 2..E, the first "
                   "epoch's one-off warm-up left out, as the model has none); measured/predicted divides it by the "
                   "prediction (under 1: the model is optimistic here: per-call framework costs, processes sharing "
                   "cores); table speed-up: the results table's (single's training time / the row's, warm-up "
                   "included), so the two differ where the warm-up weighs.")


def measured_rows(rows: Sequence[Measured]) -> list[list[str]]:
    """Rows (strings) matching :data:`MEASURED_HEADERS`."""
    return [[m.strategy + (f" (window {m.window})" if m.window else "") + (f" ({m.bandwidth})" if m.bandwidth else ""),
             str(m.workers), m.scheme, _t(m.measured_epoch_s), _t(m.predicted_epoch_s), f"{m.measured_speedup:.2f}x",
             f"{m.predicted_speedup:.2f}x", f"{m.ratio:.2f}",
             f"{m.table_speedup:.2f}x" if m.table_speedup is not None else "-"] for m in rows]


def plot(preds: Sequence[Prediction], path: str | Path, title: str = "") -> Path:
    """Write a log-log plot of predicted seconds per epoch vs workers (ring allreduce,
    parameter server, and compute alone = ideal weak scaling) to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = [p.workers for p in preds]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    ax.plot(n, [p.allreduce_epoch_s for p in preds], "o-", label="ring allreduce")
    ax.plot(n, [p.ps_epoch_s for p in preds], "s-", label=f"one parameter server (window {preds[0].window})")
    ax.plot(n, [p.steps_per_epoch * p.compute_s for p in preds], "k--", lw=1, label="compute only (ideal)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("workers N (per-worker batch fixed)")
    ax.set_ylabel("predicted seconds per epoch")
    ax.set_title(title or "distbench predict: time per epoch", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out)
    plt.close(fig)
    return out


def to_json(preds: Sequence[Prediction]) -> list[dict[str, Any]]:
    """The predictions as plain dicts (with the two samples/s figures)."""
    return [{**asdict(p), "allreduce_samples_per_s": p.allreduce_samples_per_s,
             "ps_samples_per_s": p.ps_samples_per_s} for p in preds]


def check_finite(*values: float) -> None:
    """Raise ValueError if any value is NaN or infinite."""
    if not all(math.isfinite(v) for v in values):
        raise ValueError("inputs must be finite numbers")
