"""The per-strategy cost model behind ``distbench predict --target`` and ``advise --target``:
each strategy's epoch time and time to target on a described cluster, calibrated from a
one-host run.

What is **measured** (in the run directory):

- each strategy's steady seconds per step at each worker count the run has
  (:func:`distbench.predict.epoch_s` over ``n_train // global_batch`` steps per worker:
  every strategy runs that many per worker and epoch);
- the compute of one step against the per-worker batch and the CPU threads
  (:mod:`distbench.calibrate`, ``calibration.json``: measured at 8 or more batches, not
  assumed linear);
- each strategy's **framework cost** per step: its measured step minus the compute of its
  per-worker batch under the core sharing it ran with. It holds everything that is not
  the model's arithmetic: the collective's or the transport's own CPU time for this
  model's bytes (gRPC, Gloo, MPI, ZeroMQ, Spark), Python per step, the server's share;
- each strategy's curve: epochs to the target accuracy, and the first epoch's one-off
  warm-up (its time over a steady epoch).

What is **assumed**: the link (the target's rate and latency, which cannot be measured
from one host), and how much longer than bytes / rate each transport's exchange takes on it
(:data:`WIRE_FACTOR`, fitted on emulated 100 Mbit/s and 1 Gbit/s links of this machine); that a target
node computes like this machine unless a step time measured on one is given; that the
framework cost at a worker count beyond the run's
follows the straight line through the two largest measured ones (said in the output).

The model, per strategy ``S`` at ``N = nodes x per_node`` workers, per-worker batch
``b = B / N`` (the run's global batch ``B``), ``M`` bytes of float32 weights, rate ``R``
(bytes/s), latency ``L``, ``steps = n_train // B`` per worker and epoch::

    step     = compute(b, threads) x share + framework_S(N) x share / share_run(N)
    link     = the strategy's link time per step below (every M / R x wire_factor(S, R)), of which half the
               smaller of (framework, link) overlaps the other (OVERLAP)
    ring     (multi_worker_mirrored, horovod, keras_jax:multi_process;
              Patarasuk & Yuan 2009):
               epoch = steps x (step + 2 (N-1)/N x M / R + 2 (N-1) L)          [nodes > 1]
    horovod_mpi: as a ring, with the bytes of the algorithm Open MPI picks for N ranks and M
             bytes in place of 2 (N-1)/N x M (:func:`openmpi_allreduce`: Rabenseifner's,
             3 M at N = 3, for a model of MBs)
    tf_ps    every step pulls the variables and pushes the gradients (2 M) over the
             worker's host link; the ps tasks' link carries all N workers' on a real cluster:
               epoch = max(steps x (step + per_node x 2 M / R + 2 L), steps x N x 2 M / R)
    spark_ps / mpi_ps, async (Dean et al. 2012; Zhang et al. 2015), window w:
               epoch = max(steps x step + X x (per_node x 2 M / R + 2 L), X x N x 2 M / R)
               X = ceil(steps / w) exchanges per worker; the second term is the server's
               link (shaped on a real cluster; mpi_ps's server serves one exchange at a
               time, so its round of N always costs N x 2 M / R); and at least
               N x X x s, s the server's CPU seconds per exchange as the run recorded it
               (``server_busy_s``; :func:`_server_bound`): one server handles every exchange
    sync EASGD (mpi_ps:easgd, spark_ps:easgd): every round waits for all N exchanges:
               epoch = steps x step + X x (N x 2 M / R + 2 L)

``share`` is how much slower a worker computes for sharing cores: ``max(1, k t / C)`` for
``k`` processes of ``t`` threads on ``C`` cores (on the run's host ``k = N``; on a target
node ``k = per_node``; on an emulated target, whose hosts are this machine, ``k = N`` as in
the run, so the compute and the framework cost are the run's own at that ``N``). A target of
GPUs gives each worker its own device: its compute is ``compute(b, single's threads)``
unshared, and its framework cost is as measured without oversubscribed cores, unshared and
not scaled by ``--node-step`` (a GPU node has a core or more per GPU).
On an emulated target the parameter servers sit on the launching host's unshaped bridge,
so only the workers' host links count (the server term applies to ``mpi_ps`` only), and each
link is a token bucket (:func:`distbench.cluster.emulated.tbf_burst_bytes`) that passes a
message's first bytes unshaped: there every ``x M / R`` above charges the bytes beyond
the tokens the bucket holds when the exchange starts, ``min(bucket, R x the seconds since
the last exchange)``, at the rate (it refills at the rate while the worker computes; at
2 Mbit/s a 64 KiB bucket takes 0.26 s to refill, longer than a small model's step), and the
tokens' bytes at the veth's own one-stream speed
(:data:`distbench.cluster.emulated.EMULATED_VETH_BPS`, 2 GB/s): at 10 Gbit/s a 4.5 MB message
fits the 5 MB bucket whole, where charging it nothing had predicted ``mpi_ps:easgd``'s
serial rounds of 4 x 2 such messages 22% short (BENCHMARKS.md, predict_validation).

Time to target: the warm-up of the strategy's first epoch plus its epochs to the target
(from its own curve at the nearest measured worker count; said when it is not the
target's) times the predicted epoch. The warm-up of a row run in a shared Spark or MPI
engine is taken from its repeats in fresh processes (:func:`measured_rows`): a cluster
starts every configuration's processes anew.
"""

from __future__ import annotations

import itertools
import math
import shlex
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from distbench.calibrate import CALIBRATION_FILE, compute_s, distributed_rows, mismatch, no_workload, read_calibration
from distbench.calibrate import failure as calibration_failure
from distbench.cluster.emulated import EMULATED_VETH_BPS, tbf_burst_bytes
from distbench.predict import epoch_s, longer_timeout, no_single
from distbench.text import duration_text, link_text, rate_text, seconds_text
from distbench.results.records import DIVERGED_LOSS, centre_updated_at_the_end
from distbench.results.store import read_records

RING = ("multi_worker_mirrored", "horovod", "horovod_mpi", "keras_jax:multi_process")
ONE_MACHINE = ("mirrored", "keras_jax:data_parallel")
"""One process driving one machine's devices: predicted for a one-node target only (no link;
its framework cost from its own rows as any strategy's), named as not predicted otherwise."""
CLUSTER_EXAMPLES = ("horovod", "multi_worker_mirrored", "mpi_ps:adag")
"""Strategies a run without any the model predicts on a cluster is told to measure."""
PS_FAMILIES = ("spark_ps:", "mpi_ps:")
SYNC_PS = ("easgd", "averaging")

OVERLAP = 0.5
"""Share of the smaller of (framework cost, link time) per step that overlaps the other: the
framework cost measured on one host holds the transport's own CPU work (copies,
serialization, the server's folding), which on a real link runs while bytes are on the
wire. Adding both over-predicted every strategy at 1 Gbit/s by 16-72%; taking the larger
under-predicted; half fits the calibration cell and the 1 Gbit/s cell (docs/predict.md)."""

WIRE_FACTOR = {"horovod": ((1e8, 1.09), (1e9, 1.13)), "multi_worker_mirrored": ((1e8, 1.19), (1e9, 1.37)),
               "horovod_mpi": ((1e8, 1.58), (1e9, 1.35)), "tf_ps": ((1e8, 1.04), (1e9, 1.05)),
               "spark_ps:": ((1e8, 1.05), (1e9, 1.15)), "mpi_ps:easgd": ((1e8, 0.90), (1e9, 0.88)),
               "mpi_ps:": ((1e8, 0.91), (1e9, 0.74))}
"""How much longer a transport's exchange takes on a shaped link than its bytes / rate, at
the link rates (bit/s) it was measured at: TCP/IP headers and acknowledgements, and the
collective's phases (Open MPI's allreduce of a 4.5 MB buffer between 2 ranks moves a ring's
bytes, :func:`openmpi_allreduce`, in two phases with a reduction between them; the MPI
parameter server overlaps part of one worker's
pull with the next worker's commit). Measured on this machine's emulated 100 Mbit/s and
1 Gbit/s links (``benchmarks/predict_validation.py --fit``, the calibration cells
:data:`CALIBRATION` of the large model: the factor at which the predicted epoch equals the
measured one) and checked on the other cells; a property of the transport, not of the
model, and assumed for a target: between the measured rates it is interpolated in log
rate, outside them held at the nearest (:func:`wire_factor`). A family's entry (``"spark_ps:"``,
``"mpi_ps:"``) is its ADAG run's, the asynchronous pattern; ``mpi_ps:easgd``'s synchronous
rounds are fitted on their own. Under 1 the server's exchanges overlap (one replica's pull
with the next one's commit). A fitted factor also takes in whatever else of the run the
model does not hold at that rate: the gRPC ring's factor is 15% higher at 1 Gbit/s than at
100 Mbit/s, not broken down further."""

CALIBRATION = ("2 hosts at 100 Mbit/s", "2 hosts at 1 Gbit/s")
"""The emulated cells :data:`WIRE_FACTOR` was fitted on (4.5 MB of weights, one worker per host)."""

VALIDATED = ("against emulated clusters of this machine (BENCHMARKS.md, predict_validation, 49 rows): epoch time "
             "within 7% at the median (largest 78%), time to target within 10% (largest 55%); pairwise order "
             "right for 94% of separable pairs; for a model of MBs (21 rows) epoch time within 7% (largest 25.4%), "
             "a synchronous strategy's time to target within 4% (largest 19%)")
"""The error band :mod:`benchmarks.predict_validation` measured (printed with every prediction)."""


@dataclass(frozen=True)
class Cluster:
    """The cluster to predict for.

    Attributes:
        nodes: machines; per_node: workers per machine.
        bandwidth_Bps: each host link's rate, bytes/s each way; latency_s: per message, seconds.
        emulated: the nodes are this machine's emulated hosts (they share its cores; the
            servers sit on the unshaped launching host).
        node_step_s: seconds of ``single``'s step at the run's global batch measured on one
            target node (``None``: the nodes compute like this machine).
        gpus: each worker has its own device (GPUs) and a CPU core or more: a node's workers
            share neither (ignored on an emulated target).
    """

    nodes: int
    per_node: int
    bandwidth_Bps: float
    latency_s: float
    emulated: bool = False
    node_step_s: float | None = None
    gpus: bool = False

    @property
    def workers(self) -> int:
        """N = nodes x per_node."""
        return self.nodes * self.per_node


@dataclass
class StrategyPrediction:
    """One strategy's prediction on the cluster.

    Attributes:
        strategy: the name; workers: N on the cluster.
        epoch_s: predicted seconds per steady epoch (``None`` when ``missing``).
        time_to_target_s: predicted seconds to the target accuracy (``None``: not reached
            in the run's curve, or missing).
        epochs_to_target: epochs its curve took to the target (median over repeats).
        terms_s: the epoch's parts, seconds: ``compute``, ``framework``, ``link``.
        notes: what was extrapolated or assumed for this strategy, in words.
        missing: why there is no prediction, with the command that measures what is missing.
        rank: 1 = fastest to target (then by epoch time); 0 unranked.
        warmup_s: the first epoch's one-off seconds over a steady one, as measured (time to
            target = ``warmup_s + epochs_to_target x epoch_s``; ``None`` where not reached).
        window: a parameter server's communication window the prediction is for (``None``
            for the others); swept: the run measured this strategy at several windows, each
            predicted on its own (the label names the window).
    """

    strategy: str
    workers: int
    epoch_s: float | None = None
    time_to_target_s: float | None = None
    epochs_to_target: float | None = None
    terms_s: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    missing: str | None = None
    rank: int = 0
    warmup_s: float | None = None
    window: int | None = None
    swept: bool = False

    @property
    def label(self) -> str:
        """The strategy's name, with its window where the run swept it (``mpi_ps:adag (window 8)``)."""
        return window_label(self.strategy, self.window if self.swept else None)

    def data(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict, with :attr:`label` (``predict --json``, ``advise --json``)."""
        return {**self.__dict__, "label": self.label}


def window_label(strategy: str, window: int | None) -> str:
    """``strategy``, or ``strategy (window W)`` for one window of a window sweep."""
    return strategy + (f" (window {window})" if window else "")


@dataclass(frozen=True)
class Measured:
    """What the one-host run measured of one (strategy, worker count): medians over its repeats.

    Attributes:
        step_s: steady seconds per step; warmup_s: the first epoch's extra seconds;
        epochs_to_target: epochs to the target (``None``: not reached); threads: intra-op
        threads of each worker; window: the PS communication window (``None`` otherwise);
        diverged: repeats whose final test loss is not finite or over :data:`DIVERGED_LOSS`.
        reached, runs: repeats that reached the target, of all (``epochs_to_target`` is
            their median where more than half did, else ``None``).
        server_s: a parameter server's CPU seconds per exchange (its ``server_busy_s`` over
            the replicas' exchanges; ``None`` where not recorded).
    """

    step_s: float
    warmup_s: float
    epochs_to_target: float | None
    threads: int
    window: int | None
    diverged: int = 0
    reached: int = 0
    runs: int = 0
    server_s: float | None = None


EMULATED_NODE_STEP = ("--node-step does not apply to an emulated target: its nodes are this machine, whose step the "
                      "run measured; leave out --node-step, or 'emulated' to predict real nodes")
"""The refusal of a node step on an emulated target (CLI, API and :func:`predict_strategies`)."""


def _epochs_to(rec: dict[str, Any], target: float) -> float | None:
    from distbench.results.records import model_points

    for p in model_points(rec.get("curve") or []):  # a centre held over epochs counts at its last one
        if p.get("test_accuracy") is not None and p["test_accuracy"] >= target and p.get("epoch"):
            return float(p["epoch"])
    return None


def _first_epoch_s(rec: dict[str, Any], epoch: float | None) -> float | None:
    """Seconds to the end of a record's first epoch: its first curve point's, less the steady
    ``epoch`` seconds of the epochs before it where that point is a later epoch's (a centre
    held over epochs, :func:`~distbench.results.records.model_points`); None where the curve
    has no epoch ends (:func:`~distbench.results.records.centre_updated_at_the_end`)."""
    from distbench.results.records import model_points

    pts = [] if centre_updated_at_the_end(rec) else model_points(rec.get("curve") or [])
    return pts[0]["elapsed_s"] - (pts[0]["epoch"] - 1) * (epoch or 0.0) if pts else None


def _in_shared_engine(rec: dict[str, Any]) -> bool:
    """The record ran in a sweep's shared Spark or MPI engine (one host only), whose processes
    stay up between configurations."""
    d = rec.get("details") or {}
    return "shared" in (d.get("spark_session"), d.get("mpi_engine"))


ENGINE_STARTED_S = 1.0
"""A shared-engine record whose ``engine_start_s`` phase is longer than this started the engine
(6-11 s here, against 0.1-0.35 s for one that reused it)."""


def _started_engine(rec: dict[str, Any]) -> bool:
    """The record's configuration started its shared engine (fresh processes)."""
    return float(((rec.get("timings") or {}).get("phases") or {}).get("engine_start_s") or 0.0) > ENGINE_STARTED_S


def measured_rows(records: Sequence[dict[str, Any]], steps_per_epoch: int
                  ) -> dict[tuple[str, int, int | None], Measured]:
    """The one-host run's ok records without a straggler or an emulated link, grouped by
    (strategy, workers, communication window: ``None`` but for a parameter server; a window
    sweep's windows are configurations of their own), as :class:`Measured` medians. The warm-up of a group run in a
    shared engine is the median over its repeats in fresh processes only (the first
    repeat, and any that started the engine): the others ran with the engine's kernels
    already compiled, a first epoch 40-120 ms shorter on 2 cores (BENCHMARKS.md,
    predict_validation), which no cluster run has. A parameter-server record that committed
    once (:func:`~distbench.results.records.centre_updated_at_the_end`) is left out: it has
    no epochs to take a step time or epochs to target from."""
    from distbench.results.records import straggler_text

    groups: dict[tuple[str, int, int | None], list[dict[str, Any]]] = {}
    for r in records:
        if (r.get("status") == "ok" and not r.get("bandwidth") and straggler_text(r.get("scenario")) in ("", "1x")
                and epoch_s(r) and not centre_updated_at_the_end(r)):
            groups.setdefault((r["strategy"], int(r["workers"]), window_of(r)), []).append(r)
    out = {}
    for key, rs in groups.items():
        rs.sort(key=lambda r: r.get("repeat") or 0)
        epochs = [epoch_s(r) for r in rs]
        firsts = [_first_epoch_s(r, e) for r, e in zip(rs, epochs)]
        fresh = [i == 0 or not _in_shared_engine(r) or _started_engine(r) for i, r in enumerate(rs)]
        warm = [max(0.0, f - e) for f, e, new in zip(firsts, epochs, fresh) if f is not None and e and new]
        target = rs[0].get("target_accuracy") or 1.0
        reach = [_epochs_to(r, target) for r in rs]
        reached = [x for x in reach if x is not None]
        d = rs[0].get("details") or {}
        losses = [r.get("final_test_loss", 0.0) for r in rs]  # a NaN loss is stored as null (helper-23)
        diverged = sum(1 for x in losses if x is None or not (math.isfinite(x) and x <= DIVERGED_LOSS))
        served = [r["details"]["server_busy_s"] / sum(r["details"]["per_worker_exchanges"]) for r in rs
                  if (r.get("details") or {}).get("server_busy_s") and sum(r["details"].get("per_worker_exchanges")
                                                                          or [0])]
        out[key] = Measured(statistics.median(epochs) / steps_per_epoch, statistics.median(warm) if warm else 0.0,
                            statistics.median(reached) if len(reached) * 2 > len(reach) else None,
                            int(d.get("intra_op_threads") or 1), d.get("communication_window"), diverged,
                            len(reached), len(reach), statistics.median(served) if served else None)
    return out


def window_of(rec: dict[str, Any]) -> int | None:
    """The communication window a parameter-server record trained with (``None`` for the others)."""
    w = (rec.get("details") or {}).get("communication_window") or rec.get("communication_window")
    return int(w) if w else None


def _server_bound(mine: dict[int, Measured], n: int, steps: int, here: bool) -> tuple[float, str]:
    """The epoch's lower bound from a parameter server that handles one exchange at a time
    (Dean et al. 2012, sec. 4.1: one shard serves every replica's commits and pulls): ``N x
    ceil(steps / window)`` exchanges per epoch, each taking the server's measured CPU seconds
    per exchange; (0, '') where the run did not record it. On dedicated nodes the smallest
    measured figure (the least contended for the cores), on this machine the nearest row's."""
    rows = {w: m for w, m in mine.items() if m.server_s}
    if not rows:
        return 0.0, ""
    at = min(rows, key=lambda w: (abs(w - n), -w)) if here else min(rows, key=lambda w: rows[w].server_s)
    m = rows[at]
    x = max(1, math.ceil(steps / (m.window or 1)))
    return n * x * m.server_s, (f"bounded by its server: {n} workers x {x} exchanges per epoch at "
                                f"{duration_text(float(f'{m.server_s:.3g}'))} of its CPU each (measured at {at} "
                                "workers)")


def share(processes: int, threads: int, cores: int) -> float:
    """How much slower each of ``processes`` processes of ``threads`` threads computes on
    ``cores`` cores than alone: ``max(1, processes x threads / cores)`` (time slicing)."""
    return max(1.0, processes * threads / cores)


def _framework(rows: dict[int, float], n: int, kept: str = "") -> tuple[float, str]:
    """The per-worker framework cost (normalised by core sharing) at ``n`` workers from the
    measured ones: the measured value, else interpolated, else the straight line through
    the two largest (or the one measured), never below the smallest measured value (a
    line falling with N is noise between two rows: user test, 8 MPI ranks on 2 cores were
    extrapolated to no framework cost and ranked first). ``kept`` qualifies the rows used in
    the text (e.g. ``without oversubscribing the cores``)."""
    ns = sorted(rows)
    if n in rows:
        return rows[n], ""
    lo = [m for m in ns if m < n]
    hi = [m for m in ns if m > n]
    if lo and hi:
        a, b = lo[-1], hi[0]
        return rows[a] + (rows[b] - rows[a]) * (n - a) / (b - a), f"interpolated between {a} and {b} workers"
    if len(ns) == 1:
        return rows[ns[0]], f"taken as at {ns[0]} workers (the only count measured{' ' + kept if kept else ''})"
    a, b = (ns[-2], ns[-1]) if lo else (ns[0], ns[1])
    v = rows[a] + (rows[b] - rows[a]) * (n - a) / (b - a)
    how = f"extrapolated from {a} and {b} workers" + (f" ({kept})" if kept else "")
    floor = min(rows.values())
    if v < floor:
        return floor, how + ", held at the smallest measured (the line falls)"
    return v, how


def _link(name: str, c: Cluster, model_bytes: float, steps: int, window: int | None, idle_s: float = math.inf
          ) -> tuple[float, float]:
    """(per-step link seconds added to every step, link seconds of the whole epoch that
    bound it from below) for ``name`` on ``c``; see the module docstring. ``idle_s``: seconds
    of a step off the link (compute and framework), in which an emulated link's bucket refills."""
    n, R, L = c.workers, c.bandwidth_Bps, c.latency_s
    if c.nodes <= 1:
        return 0.0, 0.0
    f = wire_factor(name, R * 8)
    w = window or 1
    # an emulated link's token bucket passes its first bytes unshaped, as many as refilled since the last exchange
    bucket = float(tbf_burst_bytes(int(R * 8))) if c.emulated else 0.0
    every = 1 if name in RING or name in ("horovod_mpi", "tf_ps") else w  # steps between exchanges

    def wire(b: float) -> float:  # seconds for b bytes sent back to back in one direction
        tokens = min(b, bucket, R * idle_s * every)  # these cross the emulated veth at its own speed
        return f * (b - tokens) / R + tokens / EMULATED_VETH_BPS

    M = model_bytes
    if name == "horovod_mpi":  # Open MPI picks its allreduce algorithm by world size and bytes
        return wire(openmpi_allreduce(n, M)[1]) + 2 * (n - 1) * L, 0.0
    if name in RING:
        return wire(2 * (n - 1) / n * M) + 2 * (n - 1) * L, 0.0
    server_shaped = not c.emulated
    if name == "tf_ps":  # pull (in) and push (out) over the host's link
        return 2 * wire(c.per_node * M) + 2 * L, (steps * n * 2 * M * f / R if server_shaped else 0.0)
    x = max(1, math.ceil(steps / w))
    rule = name.split(":", 1)[1]
    if rule in SYNC_PS:
        return x * (n * 2 * wire(M) + 2 * L) / steps, 0.0
    serial = name.startswith("mpi_ps:")
    return (x * (2 * wire(c.per_node * M) + 2 * L) / steps,
            x * n * 2 * M * f / R if server_shaped else (x * n * 2 * wire(M) if serial else 0.0))


OPENMPI_ALLREDUCE = ((4, ((8, 4), (4096, 3), (8192, 4), (16384, 3), (65536, 4), (262144, 5), (None, 6))),
                     (8, ((16, 4), (8192, 3), (None, 6))), (16, ((8192, 3), (None, 6))),
                     (32, ((64, 5), (4096, 3), (None, 6))), (64, ((128, 5), (None, 6))),
                     (128, ((262144, 3), (None, 6))), (256, ((131072, 2), (262144, 3), (None, 6))),
                     (512, ((4096, 2), (None, 6))), (2048, ((2048, 2), (16384, 3), (None, 6))),
                     (4096, ((2048, 2), (4096, 5), (16384, 3), (None, 6))),
                     (None, ((2048, 2), (16384, 5), (32768, 3), (None, 6))))
"""Open MPI 4.1's fixed choice of allreduce algorithm for a commutative sum (its ``coll/tuned``
component, ``ompi_coll_tuned_allreduce_intra_dec_fixed``): per world size below the first
bound, per message bytes below the second, the algorithm number (2 nonoverlapping, 3
recursive doubling, 4 ring, 5 segmented ring, 6 Rabenseifner); ``None``: no bound. The
MPI that ``horovod_mpi`` runs on here (Debian's Open MPI 4.1)."""

_ALGORITHMS = {2: "reduce then broadcast", 3: "recursive doubling", 4: "ring", 5: "segmented ring",
               6: "Rabenseifner's reduce-scatter + allgather"}


def openmpi_allreduce(world: int, nbytes: float) -> tuple[str, float]:
    """The allreduce algorithm Open MPI 4.1 runs for ``nbytes`` bytes over ``world`` ranks
    (:data:`OPENMPI_ALLREDUCE`) and the bytes one rank sends one after another on its
    critical path (the link time is those bytes / rate).

    With ``p'`` the largest power of two not above ``world`` and ``M = nbytes``: ring and
    segmented ring ``2 (p-1)/p M`` (Patarasuk & Yuan 2009); Rabenseifner's reduce-scatter by
    recursive halving and allgather by recursive doubling ``2 (p'-1)/p' M`` (Thakur,
    Rabenseifner & Gropp 2005, sec. 4.4); recursive doubling ``log2(p') M``; reduce then
    broadcast over binomial trees ``2 ceil(log2 p) M``. A world that is not a power of two
    first folds its ``p - p'`` extra ranks into partners and sends them the result at the
    end, ``2 M`` more on the critical path for Rabenseifner and recursive doubling: at 3
    ranks a 4.5 MB allreduce moves ``3 M`` where a ring moves ``1.33 M``.

    Args:
        world: ranks (>= 1); nbytes: the message, bytes.

    Returns:
        (the algorithm's name, bytes on one rank's critical path); ``("none", 0.0)`` for one rank.
    """
    if world <= 1:
        return "none", 0.0
    alg = next(a for top, table in OPENMPI_ALLREDUCE if top is None or world < top
               for below, a in table if below is None or nbytes < below)
    pof2 = 1 << (world.bit_length() - 1)
    fold = 0.0 if pof2 == world else 2 * nbytes
    sent = {2: 2 * math.ceil(math.log2(world)) * nbytes, 3: math.log2(pof2) * nbytes + fold,
            6: 2 * (pof2 - 1) / pof2 * nbytes + fold}.get(alg, 2 * (world - 1) / world * nbytes)
    return _ALGORITHMS[alg], sent


def wire_factor(name: str, bits_per_s: float) -> float:
    """:data:`WIRE_FACTOR` of strategy ``name`` (by name, or by its family's prefix; 1 if
    unknown) on a link of ``bits_per_s``: interpolated in log rate between the rates it was
    measured at, held at the nearest outside them."""
    pts = WIRE_FACTOR.get(name) or next((f for k, f in WIRE_FACTOR.items() if name.startswith(k) and
                                         k.endswith(":")), None)
    if not pts:
        return 1.0
    (r0, f0), (r1, f1) = pts[0], pts[-1]
    if bits_per_s <= r0 or r1 == r0:
        return f0
    if bits_per_s >= r1:
        return f1
    return f0 + (f1 - f0) * math.log(bits_per_s / r0) / math.log(r1 / r0)


def predict_strategies(run_dir: str | Path, c: Cluster, target_accuracy: float | None = None
                       ) -> tuple[list[StrategyPrediction], dict[str, Any]]:
    """Predict every multi-process strategy the run measured (and ``single``) on ``c``.

    Args:
        run_dir: a one-host run directory with ``calibration.json`` (:mod:`distbench.calibrate`).
        c: the cluster.
        target_accuracy: the accuracy for time to target (default: the run's).

    Returns:
        (predictions ranked fastest first, unranked ``missing`` ones last; the inputs used:
        ``model_bytes``, ``n_train``, ``global_batch``, ``cores``, ``measured`` and ``assumed``
        lists of words).

    Raises:
        ValueError: no results, no ok ``single`` record, no one-host distributed row, no
            calibration, one of another run (:func:`distbench.calibrate.mismatch`) or one far
            from ``single``'s own step (:func:`_anchored`) (each naming the command that
            makes what is needed), a run made on a cluster (no one-host distributed row), the
            cluster splits the global batch to nothing, or a node step on an emulated cluster
            (:data:`EMULATED_NODE_STEP`).
    """
    rd = str(run_dir)
    if c.emulated and c.node_step_s:  # user test (helper-16): it changed every number without a word
        raise ValueError(EMULATED_NODE_STEP)
    recs, singles, cal = _calibrated_run(rd)
    wl = singles[0]["workload"]
    B, n_train, M = int(singles[0]["global_batch_size"]), int(wl["sizes"]["train"]), 4 * int(wl["num_parameters"])
    if B < c.workers:
        raise ValueError(_unsplit(rd, recs, B, n_train, c.workers))
    steps, cores = n_train // B, int(cal["cores"])
    target = target_accuracy or singles[0].get("target_accuracy") or 1.0
    rows = measured_rows(recs, steps) if target_accuracy is None else measured_rows(
        [{**r, "target_accuracy": target} for r in recs], steps)
    single = rows[("single", 1, None)]
    cal, anchor, doubts = _anchored(cal, single, B, rd, min((int(r["epochs"]) for r in singles if r.get("epochs")),
                                                               default=None))
    speed = (c.node_step_s / single.step_s) if c.node_step_s else 1.0
    assumed = _assumed(c, B, cores, single.step_s, speed) + doubts
    if B % c.workers:  # user test (helper-17): 120 over 32 workers, predicted without a word
        command = _rebatch_command(rd, recs, B, n_train, c.workers)[0]  # helper-25: advise did not always name it
        assumed.append(f"the run's global batch of {B} split over {c.workers} workers ({B / c.workers:.3g} samples "
                       f"each), which a run cannot do: a run on the target itself needs a global batch its "
                       f"{c.workers} workers split ({-(-B // c.workers) * c.workers})"
                       + (f"; a one-host run to predict from at a global batch of {command}" if command else ""))
    out = [_single(single, cal, B, steps, cores, speed)]
    gpu_threads = single.threads if c.gpus and not c.emulated else None
    names = sorted({s for s, _, _ in rows if s != "single" and (s in RING or s == "tf_ps" or s.startswith(PS_FAMILIES)
                                                                or (c.nodes == 1 and s in ONE_MACHINE))})
    for name in names:
        windows = sorted({x for s, _, x in rows if s == name}, key=lambda x: x or 0)
        for window in windows:  # helper-39: a window sweep's windows were pooled into one prediction
            p = _one(name, {(s, w): m for (s, w, x), m in rows.items() if s == name and x == window}, cal, c, M, B,
                     steps, cores, speed, gpu_threads)
            p.window, p.swept = window, len(windows) > 1 or len(  # helper-45: the others committed once
                {window_of(r) for r in recs if r.get("strategy") == name and r.get("status") == "ok"}) > 1
            out.append(p)
    ranked = sorted([p for p in out if p.epoch_s is not None],
                    key=lambda p: (p.time_to_target_s is None, p.time_to_target_s or 0.0, p.epoch_s))
    for i, p in enumerate(ranked, 1):
        p.rank = i
    left = sorted({s for s, _, _ in rows} - {"single", *names})  # user test: they vanished without a word
    shaped = sorted({r["strategy"] for r in recs if r.get("status") == "ok" and r.get("bandwidth")}
                    - {s for s, _, _ in rows})  # user test (helper-15): a cluster run's strategies, gone silently
    unmeasured = ["mirrored"] if c.nodes == 1 and not any(s in ONE_MACHINE for s, _, _ in rows) else []
    once = sorted({f"{r['strategy']} (window {window_of(r)})" for r in recs if r.get("status") == "ok"
                   and centre_updated_at_the_end(r) and (r["strategy"], int(r["workers"]), window_of(r)) not in rows})
    inputs = {"not_predicted": left, "not_predicted_links": shaped, "not_measured": unmeasured,
              "not_predicted_once": once,
              "run_dir": rd,
              "model_bytes": M, "n_train": n_train, "global_batch": B, "cores": cores, "target_accuracy": target,
              "measured": ["each strategy's step and framework cost at the run's worker counts",
                           f"compute vs per-worker batch at {len({p['batch'] for p in cal['points']})} batches "
                           "(distbench calibrate" + (f", scaled by {anchor:.2f} to single's own step at batch {B}, "
                                                     "which its compute there exceeded)" if anchor < 1 else ")"),
                           "epochs to target and warm-up from each strategy's curve"],
              "assumed": assumed, "validated": VALIDATED + _beyond_validation(c)}
    return ranked + [p for p in out if p.epoch_s is None], inputs


CALIBRATION_IMPLAUSIBLE = 10.0
"""A calibration whose step at the run's batch is this many times ``single``'s own measured
step, or this many times shorter, is refused: the two measure the same loop at the same batch."""
CALIBRATION_DOUBTFUL = 0.5
"""Below this fraction of ``single``'s own step a calibration is used with an Assumed line saying so."""


def _anchored(cal: dict[str, Any], single: Measured, B: int, rd: str, epochs: int | None = None
              ) -> tuple[dict[str, Any], float, list[str]]:
    """The calibration scaled to ``single``'s own step (``anchor`` <= 1: a compute above single's
    whole step at the run's batch was measured slower than the run, at another time; user test,
    helper-17: 8.75 ms against 7.49 ms), its anchor, and the Assumed lines that doubt it.

    Raises:
        ValueError: the calibration's step at batch ``B`` is over :data:`CALIBRATION_IMPLAUSIBLE`
            times single's own, or under its inverse (user test, helper-25: 10 s and 1 ns per
            step were used, "scaled by 0.00"); where the run has one epoch (``epochs``), whose
            time is mostly the one-off first epoch, the error says so and names a run of 3
            (user test, helper-45: recalibrating, as it said, gave the same error).
    """
    at_b = compute_s(cal, B, single.threads)
    ratio = at_b / single.step_s
    fix = f"remove {Path(rd) / CALIBRATION_FILE} and run 'distbench calibrate {rd}'"
    if ratio < 1 / CALIBRATION_IMPLAUSIBLE and epochs is not None and epochs < 2:
        raise ValueError(f"single's step in {rd} ({duration_text(single.step_s)}) is from a run of 1 epoch, whose "
                         f"time is mostly its one-off first epoch (the calibration measured {duration_text(at_b)} per "
                         f"step at batch {B}), so there is no steady step to predict from: distbench run "
                         f"{shlex.quote(rd + '/config.json')} --out {shlex.quote(rd + '-e3')} --epochs 3 measures one")
    if not 1 / CALIBRATION_IMPLAUSIBLE <= ratio <= CALIBRATION_IMPLAUSIBLE:
        raise ValueError(f"{rd}'s calibration takes {duration_text(at_b)} per step at batch {B}, {ratio:.3g}x "
                         f"single's own measured step ({duration_text(single.step_s)}), which runs the same loop at "
                         f"that batch: it is not a measurement of this run's workload on this machine; {fix}")
    doubts = [] if "workload" in cal else [  # written before calibrate recorded it (helper-25: a copy passed)
        f"{CALIBRATION_FILE} records no workload (an older distbench wrote it): it is taken to be this run's "
        f"without a check; {fix} to have one that is checked"]
    if ratio < CALIBRATION_DOUBTFUL:
        doubts.append(f"the calibration's step at batch {B} ({duration_text(at_b)}) is {ratio:.2f} of single's own "
                      f"measured step ({duration_text(single.step_s)}), which runs the same loop: they were measured "
                      "under other conditions (another workload, or this machine's load), and the framework terms "
                      f"hold the difference; {fix} on a quiet machine")
    anchor = min(1.0, 1 / ratio)
    return {**cal, "points": [{**q, "step_s": q["step_s"] * anchor} for q in cal["points"]]}, anchor, doubts


def _unsplit(rd: str, recs: Sequence[dict[str, Any]], B: int, n_train: int, workers: int) -> str:
    """Why a target of ``workers`` cannot be predicted from a run whose global batch ``B``
    gives some worker nothing, with the one-host run that can (:func:`one_host_batch`)."""
    if workers > n_train:
        return (f"the target's {workers} workers cannot split the run's global batch of {B} samples, "
                f"and the data's {n_train} training samples cap a target at {n_train} workers (one "
                "sample each): ask about fewer workers, or measure with more data")
    command, counts = _rebatch_command(rd, recs, B, n_train, workers)
    if command is None:
        return (f"the target's {workers} workers cannot split the run's global batch of {B} samples, "
                f"and no global batch within the data's {n_train} training samples splits over them and "
                f"over a worker count of the run ({', '.join(map(str, counts))}): ask about a worker "
                "count that is a multiple of one of them, or fewer workers, or measure with more data")
    return (f"the target's {workers} workers cannot split the run's global batch of {B} samples "
            f"(each worker needs 1 or more): run again with a global batch of {command}")


def _rebatch_command(rd: str, recs: Sequence[dict[str, Any]], B: int, n_train: int, workers: int
                     ) -> tuple[str | None, list[int]]:
    """The one-host run at a global batch that ``workers`` and the run's own worker counts
    split (:func:`one_host_batch`; ``None`` when none fits the data), as "``BATCH``, which
    ... split: ``COMMAND``", and those counts."""
    counts = sorted({int(r["workers"]) for r in recs if int(r.get("workers") or 1) > 1 and not r.get("bandwidth")})
    found = one_host_batch(B, workers, counts, n_train)  # helper-23/24: one the run's worker counts split too
    if found is None:
        return None, counts
    nb, keep = found
    flag = f" --workers {','.join(map(str, keep))}" if keep != counts else ""
    split = f"the target's {workers} and the run's {', '.join(map(str, keep))} workers" if keep else \
        f"the target's {workers} workers"  # user test (helper-26): 600 for 200 nodes went unexplained
    return f"{nb}, which {split} split: distbench run {rd}/config.json --batch-size {nb}{flag} --out NEW_RUN_DIR", \
        counts


def one_host_batch(batch: int, workers: int, counts: Sequence[int], n_train: int) -> tuple[int, list[int]] | None:
    """The global batch of a one-host run to predict a target of ``workers`` from, where the
    run's ``batch`` does not split over them: the smallest multiple of the least common
    multiple of ``workers`` and every worker count in ``counts`` (the run's own, which
    ``distbench run`` requires to split it too) that is at least ``batch``; where that
    exceeds ``n_train`` training samples (0: unknown, no limit), the same over as many of
    the counts as fit (the smallest such batch among equally many; user test, helper-27:
    121 workers over counts 2, 3, 4 found none where 484 keeps 2 and 4).

    Returns:
        ``(global batch, the counts kept)``, or ``None`` when not even one count fits
        within ``n_train`` (a run without multi-worker rows predicts nothing).
    """
    for size in range(len(counts), 0 if counts else -1, -1):
        fits = []
        for kept in itertools.combinations(sorted(counts), size):
            step = math.lcm(workers, *kept)
            nb = -(-max(batch, 1) // step) * step
            if not n_train or nb <= n_train:
                fits.append((nb, list(kept)))
        if fits:
            return min(fits)
    return None


def no_distributed(rd: str | Path, recs: Sequence[dict[str, Any]]) -> str:
    """The message for a run whose only ok rows are ``single``'s: the distributed rows that
    did not end ok, if any (a ``--resume`` keeps them: the sweep again into a new directory
    once fixed; user test, helper-27), else the command that measures some the model
    predicts (:data:`CLUSTER_EXAMPLES`)."""
    q = shlex.quote(str(rd))
    bad = {f"{r.get('strategy')} {r.get('status')}" + (f" ({r['reason'].split('; ')[0]})" if r.get("reason") else "")
           for r in recs if r.get("strategy") != "single" and r.get("status") != "ok"}
    timeout = longer_timeout(rd) if any(r.get("status") == "timeout" for r in recs
                                        if r.get("strategy") != "single") else ""  # helper-28: the same limit again
    if bad:
        return (f"{rd} has no distributed row to calibrate the model from: {'; '.join(sorted(bad))}; "
                + ("" if timeout else "once that is fixed, ")
                + f"distbench run {q}/config.json{timeout} --out {q}-again measures them with single (a --resume "
                "keeps recorded configurations as they are)")
    return (f"{rd} has no distributed row to calibrate the model from (no strategy but single ran): distbench run "
            f"--resume --out {q} --strategies {','.join(CLUSTER_EXAMPLES)} measures some into it")


def _calibrated_run(rd: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """``rd``'s records, its ok ``single`` records and its calibration; ValueError (naming the
    command that makes what is missing) without the last two, or for a cluster run."""
    recs = [r for r in read_records(rd)] if (Path(rd) / "results.jsonl").exists() else []
    singles = [r for r in recs if r.get("strategy") == "single" and r.get("status") == "ok"]
    if not singles:
        raise ValueError(no_single(rd, recs, "the model needs single's step", with_rest=True))
    rows = distributed_rows(recs)
    if rows == "cluster":  # user test (helper-18): it calibrated for 20 s, then predicted single alone
        raise ValueError(f"{rd} was made on a cluster: the model calibrates each strategy from one-host rows, and it "
                         "has none; predict from a one-host run of this workload and check it against this one: "
                         f"distbench predict ONE_HOST_RUN --target \"{run_target(rd)}\" --against {rd}")
    if rows == "none":  # user test (helper-25): it calibrated for 20 s, then ranked single alone and exited 0
        raise ValueError(no_distributed(rd, recs))
    cal = read_calibration(rd)
    if cal is None and calibration_failure(rd):
        raise ValueError(f"{rd} has no compute calibration, and measuring it failed: {calibration_failure(rd)}")
    if cal is None:
        raise ValueError(f"{rd} has no compute calibration: distbench calibrate {rd} measures it" if
                         (Path(rd) / "workload").is_dir() else f"no compute calibration: {no_workload(rd)}")
    wrong = mismatch(cal, singles[0], rd)  # user test (helper-24): a copied calibration.json was used silently
    if wrong:
        raise ValueError(wrong)
    return recs, singles, cal


def _assumed(c: Cluster, B: int, cores: int, step: float, speed: float) -> list[str]:
    """The "Assumed" sentences of a prediction for ``c``: the links, and how a node computes
    (``step``: single's measured seconds per step here; ``speed``: the node's step over it)."""
    def _dur(x: float) -> str:  # 3 significant digits in a readable unit (helper-17: "2e+03 ms")
        return duration_text(float(f"{x:.3g}"))

    def _fast(than: str) -> str:  # "2x as fast as", "267x slower than" (not "0.00374x as fast")
        return f"{speed:.3g}x slower than {than}" if speed > 1 else f"{1 / speed:.3g}x as fast as {than}"

    assumed = [f"links of {rate_text(c.bandwidth_Bps * 8)} and {duration_text(c.latency_s)} per message",
               "each transport's time on a link over bytes / rate as fitted on emulated 100 Mbit/s and 1 Gbit/s "
               "links of one worker per host (WIRE_FACTOR, docs/predict.md)"] if c.nodes > 1 else [
        "one node: its workers exchange over no network link (what they exchange within it is in the framework "
        "cost measured here)"]
    if c.emulated:
        assumed.append("the hosts are this machine's emulated hosts (shared cores, servers on the unshaped bridge)")
    elif c.gpus:  # user test (helper-15/16): 8 GPUs on one node computed 4x slower than single
        per = (f"{_fast('single here')} (the step time given, {_dur(c.node_step_s)} at "
               f"batch {B}, against {_dur(step)} here)" if c.node_step_s else
               f"like single here ({_dur(step)} at batch {B}, on this machine's CPU: a GPU's step is shorter, so "
               "communication weighs more there than predicted here; --node-step SECONDS, single's "
               "step measured on one target GPU, changes that)")
        assumed.append(f"each GPU computes its share of the batch {per}, none sharing another's; each worker's "
                       "per-step framework work (the CPU side) takes what it took here without oversubscribed "
                       "cores: a node has a CPU core or more per GPU; the first epoch's one-off warm-up is kept "
                       "at this machine's")
    elif c.node_step_s:
        assumed.append(f"a node computes {_fast('this machine')} (the step time given, "
                       f"{_dur(c.node_step_s)} at batch {B}, against {_dur(step)} here); "
                       "the first epoch's one-off warm-up is kept at this machine's")
    else:
        assumed.append(f"a node computes like this machine ({cores} cores, its {c.per_node} worker(s) sharing "
                       "them as processes did here); "
                       "--node-step SECONDS (single's step at the run's global batch, measured "
                       f"on one; here {_dur(step)} at batch {B}) changes that")
    return assumed


def _beyond_validation(c: Cluster) -> str:
    """What of target ``c`` lies outside the validated cells (2-4 hosts of one worker, 100 Mbit/s
    to 10 Gbit/s, this machine's emulated hosts); '' when none does."""
    out = [w for w, off in ((f"{c.nodes} node{'s' if c.nodes > 1 else ''}", not 2 <= c.nodes <= 4),
                            (f"{c.workers} workers", c.workers > 4),  # user test (helper-18): 8 went unsaid
                            (f"{c.per_node} workers per node", c.per_node != 1),
                            ("GPUs", c.gpus and not c.emulated),
                            (rate_text(c.bandwidth_Bps * 8), c.nodes > 1 and not 1e8 <= c.bandwidth_Bps * 8 <= 1e10),
                            ("dedicated nodes", not c.emulated and c.nodes > 1)) if off]  # helper-26: one node
    return f"; this target's {', '.join(out)} lie outside those cells, which the band does not cover" if out else ""


def _single(m: Measured, cal: dict[str, Any], B: int, steps: int, cores: int, speed: float) -> StrategyPrediction:
    """``single`` on one target node: its own measured step (x ``speed``: ``--node-step`` gives
    it exactly), split into the calibrated compute and the rest."""
    step = m.step_s * speed
    comp = min(step, compute_s(cal, B, m.threads) * speed)
    fw = step - comp if step - comp > 1e-9 * step else 0.0  # not 2.7e-19 s of rounding (helper-25)
    e = steps * step
    return StrategyPrediction("single", 1, e, m.warmup_s + m.epochs_to_target * e if m.epochs_to_target else None,
                              m.epochs_to_target, {"compute": steps * comp, "framework": steps * fw, "link": 0.0},
                              ["one worker on one of the target's nodes: the baseline distributing has to beat"],
                              warmup_s=m.warmup_s if m.epochs_to_target else None)


def _one(name: str, rows: dict[tuple[str, int], Measured], cal: dict[str, Any], c: Cluster, M: float, B: int,
         steps: int, cores: int, speed: float, gpu_threads: int | None = None) -> StrategyPrediction:
    """``name``'s prediction on ``c``; ``gpu_threads``: each worker has its own device, which
    computes its share of the batch as ``single`` (that many threads) did here x ``speed``."""
    n = c.workers
    mine = {w: m for (s, w), m in rows.items() if s == name and w >= 2}
    p = StrategyPrediction(name, n)
    if not mine:
        p.missing = f"{name} has no multi-worker row in the run"
        return p
    one = name in ONE_MACHINE  # one process for all its replicas

    def procs(w: int) -> int:  # processes sharing the machine's cores at w workers
        return 1 if one else w

    fw_norm = {}
    for w, m in mine.items():  # framework cost per step, normalised by the core sharing it ran with
        sh = share(procs(w), m.threads, cores)
        fw_norm[w] = max(0.0, m.step_s - compute_s(cal, B / w, m.threads) * sh) / sh
    # on dedicated nodes, rows that oversubscribed the run's cores (MPI ranks busy-polling, time
    # slicing beyond what the normalisation removes) say little: those that did not, where there are any
    # (for GPUs, one process's replicas time-slicing the cores are oversubscribed too: helper-17, mirrored)
    # one node like this machine (no --node-step, no GPUs) is this machine: its rows as they ran (helper-20: at
    # "1 node x 4" the 2-worker row's cost gave multi_worker_mirrored 0.47 of its own measured 4-worker epoch)
    here = c.emulated or (c.nodes == 1 and not gpu_threads and not c.node_step_s)
    free = {w: v for w, v in fw_norm.items()
            if here or (w if one and gpu_threads else procs(w) * mine[w].threads) <= cores}
    fw, how = _framework(free or fw_norm, n, "without oversubscribing the cores" if free and free != fw_norm else "")
    if how:
        p.notes.append(f"framework cost {how}")
    k = 1 if one else n if c.emulated else c.per_node  # processes sharing one machine's cores
    t = max(1, cores // k)  # the run's thread rule (distbench.training.loop.threads_per_process)
    sh = share(k, t, cores)
    if gpu_threads:  # a device per worker, and a core or more each for its host-side work (helper-17)
        comp, fw_s = compute_s(cal, B / n, gpu_threads) * speed, fw
    else:
        comp, fw_s = compute_s(cal, B / n, t) * sh * speed, fw * sh * speed
    window = next((m.window for m in mine.values() if m.window), None)
    per_step, bound = _link(name, c, M, steps, window, comp + fw_s)
    overlap = OVERLAP * min(fw_s, per_step)  # the transport's own CPU work runs while bytes are on the wire
    epoch = max(steps * (comp + fw_s + per_step - overlap), bound)
    served, why = _server_bound(mine, n, steps, here) if name.startswith(PS_FAMILIES) else (0.0, "")
    if served > epoch:  # user test (helper-23): 120 workers on one server took as long as 2
        fw_s += (served - epoch) / steps  # the server's CPU, a framework cost
        epoch = served
        p.notes.append(why)
    elif name.startswith(PS_FAMILIES) and not why and n > max(mine):  # helper-24: the missing bound unsaid
        p.notes.append("not bounded by its server's time per exchange, which this run did not record (runs made "
                       "since distbench records server_busy_s have it)")
    if name == "horovod_mpi" and c.nodes > 1:
        alg, sent = openmpi_allreduce(n, M)
        p.notes.append(f"Open MPI's allreduce at {n} ranks: {alg}, {sent / M:.2g} x the model's bytes per step")
    if c.nodes > 1 and not any(name == k or (k.endswith(":") and name.startswith(k)) for k in WIRE_FACTOR):
        p.notes.append("its transport's link factor is not measured: bytes / rate assumed")
    elif c.nodes > 1 and not 1e8 <= c.bandwidth_Bps * 8 <= 1e9:
        p.notes.append("its link factor was fitted at 100 Mbit/s and 1 Gbit/s; the nearest one is used at "
                       f"{rate_text(c.bandwidth_Bps * 8)}")
    p.epoch_s = epoch
    p.terms_s = {"compute": steps * comp, "framework": steps * fw_s, "link": epoch - steps * (comp + fw_s)}
    near = min(mine, key=lambda w: (abs(w - n), -w))
    m = mine[near]
    p.epochs_to_target = m.epochs_to_target
    p.notes += _curve_notes(m, near, n)
    if m.epochs_to_target is not None:
        # on dedicated nodes the warm-up of a row that oversubscribed the cores says little (helper-17: 0.28 s at
        # 4 workers against 0.11 s at 2): the nearest that did not, as for the framework cost
        warm_at = min(free, key=lambda w: (abs(w - n), -w)) if free and not here else near
        p.warmup_s = mine[warm_at].warmup_s
        p.time_to_target_s = p.warmup_s + m.epochs_to_target * epoch
        if warm_at != near:
            p.notes.append(f"warm-up as at {warm_at} workers (without oversubscribing the cores)")
        if near != n:
            p.notes.append(f"epochs to target from its curve at {near} workers (extrapolated to {n})")
    return p


def _curve_notes(m: Measured, near: int, n: int) -> list[str]:
    """Notes on the curve a prediction at ``n`` workers takes its epochs to target from
    (``m``, measured at ``near`` workers): divergence, runs that did not reach the target,
    and a curve from another worker count where the target is not reached."""
    out = []
    if m.diverged:  # user test (helper-28): "not reached" alone read as merely slow
        out.append(f"diverged in {m.diverged} of its runs at {near} workers (final test loss not finite or over "
                   f"{DIVERGED_LOSS:g}; advise and the report leave it out): "
                   + ("its epochs to target may be a chance crossing" if m.epochs_to_target is not None else
                      "not reached for that reason, not for its speed"))
    if near != n and m.epochs_to_target is None:
        out.append(f"its curve at {near} workers is the nearest measured (the target is at {n})")
    if 0 < m.reached < m.runs:  # user test (helper-17): 2 of 3 counted as reached without a word
        out.append(f"reached the target in {m.reached} of {m.runs} runs at {near} workers: "
                   + ("its epochs to target are theirs" if m.epochs_to_target is not None else
                      "counted as not reached (half or fewer)"))
    return out


TABLE_HEADERS = ("rank", "strategy", "workers", "s/epoch", "to target", "compute", "framework", "link", "notes")


def _s(x: float | None) -> str:
    """Seconds, 3 significant digits; ``-`` for None."""
    return "-" if x is None else seconds_text(x)


def table_rows(preds: Sequence[StrategyPrediction], target_accuracy: float) -> list[list[str]]:
    """Rows (strings) matching :data:`TABLE_HEADERS`; a strategy without a prediction says why."""
    rows = []
    for p in preds:
        if p.epoch_s is None:
            rows.append(["-", p.label, str(p.workers), "-", "-", "-", "-", "-", p.missing or ""])
            continue
        ttt = _s(p.time_to_target_s) if p.time_to_target_s is not None else f"not reached ({target_accuracy:g})"
        rows.append([str(p.rank), p.label, str(p.workers), _s(p.epoch_s), ttt, _s(p.terms_s.get("compute")),
                     _s(p.terms_s.get("framework")), _s(p.terms_s.get("link")), "; ".join(p.notes)])
    return rows


def nothing_distributed(preds: Sequence[StrategyPrediction], inputs: dict[str, Any]) -> str | None:
    """The sentence for a prediction that ranks no distributed strategy (only ``single``:
    nothing to compare with it; user tests, helper-17 and -25), naming why; ``None`` otherwise."""
    if any(p.strategy != "single" and p.rank for p in preds):
        return None
    why = not_predicted_text(inputs) or "It has no multi-worker row of a strategy with a cluster form."
    rd = shlex.quote(str(inputs.get("run_dir") or "RUN_DIR"))
    return (f"No distributed strategy can be predicted from {inputs['run_dir']}, so nothing to rank against single. "
            f"{why} distbench run --resume --out {rd} --strategies {','.join(CLUSTER_EXAMPLES)} measures strategies "
            "the model predicts on a cluster")  # user test (helper-27): it named no command


def not_predicted_text(inputs: dict[str, Any]) -> str:
    """The sentences naming the run's strategies the model does not predict on a cluster
    (``inputs["not_predicted"]`` of :func:`predict_strategies`) and those it cannot calibrate
    from (``inputs["not_predicted_links"]``: measured only over an emulated cluster's shaped
    links), ``mirrored`` where a one-node target's run lacks it (``inputs["not_measured"]``)
    and the rows that committed once (``inputs["not_predicted_once"]``), or ``""`` when there
    are none."""
    names, shaped = inputs.get("not_predicted") or [], inputs.get("not_predicted_links") or []
    once = inputs.get("not_predicted_once") or []
    one = [n for n in names if n in ONE_MACHINE or n == "tpu"]
    other = [n for n in names if n not in one]  # user test (helper-27): a plugin was "one machine's devices"
    rd = shlex.quote(str(inputs.get("run_dir") or "RUN_DIR"))
    return " ".join(  # mirrored on a one-node target (user test, helper-18: absent without a word)
        [f"Not measured in this run: mirrored, tf.distribute's strategy for one machine's devices; distbench run "
         f"{rd}/config.json --out {rd} --resume --strategies mirrored measures it."] * bool(inputs.get("not_measured"))
        +
        ([f"Not predicted (one process on one machine's devices, no form on a cluster of nodes): {', '.join(one)}."]
         if one else [])
        + ([f"Not predicted (no cost model for it: the model knows ring allreduce ({', '.join(RING)}), tf_ps and "
            f"the parameter servers ({', '.join(f + '*' for f in PS_FAMILIES)})): {', '.join(other)}."]
           if other else [])
        + ([f"Not predicted (measured only over the shaped links of an emulated cluster; the model calibrates "
            f"from one-host rows: predict from a one-host run of this workload): {', '.join(shaped)}."]
           if shaped else [])
        + ([f"Not predicted (its window is at least the steps each replica took in the whole run, so each replica "
            f"committed once, at its end, and the curve has no epochs to extrapolate; a window under those steps "
            f"commits before the end): {', '.join(once)}."] if once else []))


def describe(text: str, c: Cluster, inputs: dict[str, Any]) -> str:
    """The lines above the table: the cluster as read, what was measured and what assumed,
    and the error band the validation measured."""
    return (f"{text}: {c.nodes} node(s) x {c.per_node} = {c.workers} workers, "
            f"{link_text(c.bandwidth_Bps if c.nodes > 1 else math.inf, c.latency_s)}; "
            f"{inputs['model_bytes']:,} bytes of weights, global batch {inputs['global_batch']}, "
            f"{inputs['n_train']:,} samples per epoch, time to {inputs['target_accuracy']:g}.\n"
            f"Measured in the run: {'; '.join(inputs['measured'])}.\n"
            f"Assumed: {'; '.join(inputs['assumed'])}.\n"
            + (not_predicted_text(inputs) + "\n" if not_predicted_text(inputs) else "")
            + f"Error band (benchmarks/predict_validation.py): {inputs['validated']}.")


def measured_on(run_dir: str | Path, workers: int) -> dict[str, dict[str, Any]]:
    """A run on a (real or emulated) cluster: per strategy at ``workers`` workers (``single``
    at its one), the steady seconds per epoch and the times to target of its ok records
    without a slowed worker, its ``strategy`` and a parameter server's ``window`` (each window of a window
    sweep on its own, keyed ``strategy (window W)``). ``single``'s row shows how fast the
    machine ran for each run (user test, helper-25: an emulated run's ``single`` took 2.3x as
    long per step)."""
    from distbench.results.records import straggler_text

    recs = [r for r in read_records(run_dir) if r.get("status") == "ok" and straggler_text(r.get("scenario")) in
            ("", "1x") and int(r.get("workers") or 0) == (1 if r.get("strategy") == "single" else workers)]
    swept = {s for s in {r["strategy"] for r in recs} if len({window_of(r) for r in recs if r["strategy"] == s}) > 1}
    out: dict[str, dict[str, Any]] = {}
    for r in recs:
        key = window_label(r["strategy"], window_of(r) if r["strategy"] in swept else None)
        m = out.setdefault(key, {"epoch_s": [], "ttt_s": [], "strategy": r["strategy"], "window": window_of(r)})
        if epoch_s(r):
            m["epoch_s"].append(float(epoch_s(r) or 0.0))
        if r.get("time_to_target_s") is not None:
            m["ttt_s"].append(float(r["time_to_target_s"]))
    return out


def _ok(run_dir: str | Path) -> list[dict[str, Any]]:
    return [r for r in read_records(run_dir) if r.get("status") == "ok"]


def _shape(rs: list[dict[str, Any]]) -> dict[str, Any]:
    """The workload settings a check of a prediction must share, from the first ok record."""
    r = rs[0]
    wl = r.get("workload") or {}
    return {"parameters": wl.get("num_parameters"), "training samples": (wl.get("sizes") or {}).get("train"),
            "global batch": r.get("global_batch_size"), "target accuracy": r.get("target_accuracy"),
            "epochs": r.get("epochs")}


def other_model_or_data(run_dir: str | Path, against: str | Path) -> str:
    """How the run ``against`` trained another model or other data than ``run_dir`` (its
    parameter count or training samples), as ``"parameters 4810 (here 17226)"``; ``""`` when
    they agree or either has no ok record. Such a run checks nothing of the prediction
    (user test, helper-36: its one row was tabled with a ratio of 0.40, exit 0)."""
    mine, theirs = _ok(run_dir), _ok(against)
    if not mine or not theirs:
        return ""
    a, b = _shape(mine), _shape(theirs)
    return ", ".join(f"{k} {b[k]} (here {a[k]})" for k in ("parameters", "training samples") if a[k] != b[k])


def against_mismatch(run_dir: str | Path, against: str | Path, c: Cluster | None = None) -> str:
    """What makes the cluster run ``against`` no check of a prediction from the one-host run
    ``run_dir`` for cluster ``c``, as one sentence; ``""`` when nothing does. Compared: the
    workload (model size, training samples, global batch, target accuracy, epochs), and
    with ``c`` the cluster: a run on one host, an emulated run for real nodes (or the other
    way round), or links of another rate than ``c``'s. (User tests: ``--against`` took a run
    of other epochs, a one-host run, an emulated run for dedicated nodes, and a 1 Gbit/s run
    for a 10 Gbit/s target without a word.)"""
    from distbench.config.values import parse_rate

    mine, theirs = _ok(run_dir), _ok(against)
    if not mine or not theirs:
        return ""
    a, b = _shape(mine), _shape(theirs)
    out = [f"it ran another workload: {', '.join(f'{k} {b[k]} (here {a[k]})' for k in a if a[k] != b[k])}"
           ] if a != b else []
    if c is not None and c.nodes > 1:
        rates = {parse_rate("bandwidth", r["bandwidth"]) for r in theirs if r.get("bandwidth")}
        emulated = any((r.get("details") or {}).get("cluster_id") for r in theirs)
        if not any(len(r.get("hosts") or []) > 1 for r in theirs):
            out.append("it ran on one host, not on a cluster")
        elif emulated != c.emulated:  # shared cores and servers on the unshaped bridge, or not
            out.append("it ran on this machine's emulated cluster: add ', emulated' to the target" if emulated else
                       "it ran on real hosts: leave 'emulated' out of the target")
        em = _emulated_layout(against)
        if emulated and em and em != (c.nodes, c.per_node):  # user test (helper-16): 4x1 checked a 2x2 target
            out.append(f"it ran on {em[0]} emulated hosts x {em[1]}, the target is {c.nodes} nodes x {c.per_node}")
        if rates and all(abs(x / (c.bandwidth_Bps * 8) - 1) > 0.01 for x in rates if x):
            out.append(f"its links ran at {', '.join(sorted(rate_text(x) for x in rates if x))}, the "
                       f"target's at {rate_text(c.bandwidth_Bps * 8)}")
    if c is not None and c.nodes == 1 and any(len(r.get("hosts") or []) > 1 for r in theirs):  # helper-21
        out.append("it ran on several hosts, the target is one node")
    if c is not None and c.gpus and not c.emulated and not any((r.get("provenance") or {}).get("gpus")
                                                              for r in theirs):
        out.append("it ran on CPUs, the target's workers are GPUs")
    # the same workload only: a bigger model's single is slower for its own reason (helper-26)
    drift = _single_drift(mine, theirs, against) if a == b and (c is None or c.emulated or c.nodes == 1) else ""
    return "; ".join(x for x in (f"{against} does not check this prediction: {'; '.join(out)}" if out else "",
                                 drift) if x)


SINGLE_DRIFT = 0.2
"""``single``'s steady epoch in a cluster run of this machine and in the one-host run may differ
by this share before ``--against`` says the machine ran at another speed."""


def _single_drift(mine: list[dict[str, Any]], theirs: list[dict[str, Any]], against: str | Path) -> str:
    """The sentence for a run of this machine (emulated, or one node) whose ``single`` ran at
    another speed than the one-host run's by over :data:`SINGLE_DRIFT` (its load differed; the
    prediction keeps the one-host run's): every ratio holds that difference. '' otherwise."""
    def single_epoch(rs: list[dict[str, Any]]) -> float | None:
        es = [e for r in rs if r.get("strategy") == "single" and (e := epoch_s(r))]
        return statistics.median(es) if es else None

    here, there = single_epoch(mine), single_epoch(theirs)
    if not here or not there or abs(there / here - 1) <= SINGLE_DRIFT:
        return ""
    return (f"{against}'s single took {there / here:.2f}x as long per epoch as in the run predicted from "
            f"({seconds_text(there)} against {seconds_text(here)}): this machine ran at another speed for the two runs "
            "(its load), and every ratio holds that")


def _emulated_layout(run_dir: str | Path) -> tuple[int, int] | None:
    """``(hosts, workers per host)`` of the emulated cluster ``run_dir``'s config ran on, or ``None``."""
    import json

    try:
        em = (json.loads((Path(run_dir) / "config.json").read_text()).get("cluster") or {}).get("emulate")
    except (OSError, ValueError):
        return None
    return (int(em["hosts"]), int(em.get("slots") or 1)) if isinstance(em, dict) and em.get("hosts") else None


def run_target(run_dir: str | Path) -> str:
    """The ``--target`` text of the emulated cluster ``run_dir`` ran on (``2 nodes x 1, 1gbit,
    emulated``), or the template ``N nodes x M, RATE`` for another cluster run."""
    import json

    lay = _emulated_layout(run_dir)
    if lay is None:
        return "N nodes x M, RATE"
    em = json.loads((Path(run_dir) / "config.json").read_text())["cluster"]["emulate"]
    return f"{lay[0]} nodes x {lay[1]}, {em.get('bandwidth') or 'RATE'}, emulated"


def measured_counts(run_dir: str | Path) -> list[int]:
    """The worker counts of ``run_dir``'s ok records (for saying which it has)."""
    return sorted({int(r.get("workers") or 0) for r in read_records(run_dir) if r.get("status") == "ok"})


AGAINST_HEADERS = ("strategy", "predicted s/epoch", "measured s/epoch", "ratio", "predicted to target",
                   "measured to target", "ratio ")


def against(preds: Sequence[StrategyPrediction], measured: dict[str, dict[str, list[float]]]) -> list[dict[str, Any]]:
    """Each predicted strategy the cluster run measured: ``strategy``, ``epoch_s`` and
    ``ttt_s`` as predicted, ``measured_epoch_s`` and ``measured_ttt_s`` (every repeat's
    seconds), their medians ``measured_epoch_median_s``/``measured_ttt_median_s`` and
    ``epoch_ratio``/``ttt_ratio`` = predicted / median measured (``None`` where either
    side has none)."""
    out = []
    for p in preds:
        m = measured.get(p.label) or next((v for v in measured.values()  # the same window, labelled or not
                                           if v.get("strategy") == p.strategy and v.get("window") == p.window), None)
        if not m or p.epoch_s is None:
            continue
        me = statistics.median(m["epoch_s"]) if m["epoch_s"] else None
        mt = statistics.median(m["ttt_s"]) if m["ttt_s"] else None
        out.append({"strategy": p.label, "epoch_s": p.epoch_s, "ttt_s": p.time_to_target_s,
                    "measured_epoch_s": m["epoch_s"], "measured_ttt_s": m["ttt_s"], "measured_epoch_median_s": me,
                    "measured_ttt_median_s": mt, "epoch_ratio": p.epoch_s / me if me else None,
                    "ttt_ratio": p.time_to_target_s / mt if (mt and p.time_to_target_s) else None})
    return out


def against_rows(preds: Sequence[StrategyPrediction], measured: dict[str, dict[str, list[float]]]) -> list[list[str]]:
    """Rows matching :data:`AGAINST_HEADERS` from :func:`against`: predicted next to measured
    (median [min-max] over its repeats), ratio = predicted / measured."""
    def cell(vals: list[float]) -> str:
        if not vals:
            return "-"
        lo, hi = (seconds_text(v).removesuffix(" s") for v in (min(vals), max(vals)))
        rng = f" [{lo}-{hi}]" if len(vals) > 1 else ""
        return f"{seconds_text(statistics.median(vals))}{rng}"

    def ratio(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    return [[a["strategy"], _s(a["epoch_s"]), cell(a["measured_epoch_s"]), ratio(a["epoch_ratio"]), _s(a["ttt_s"]),
             cell(a["measured_ttt_s"]), ratio(a["ttt_ratio"])] for a in against(preds, measured)]
