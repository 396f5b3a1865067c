"""Statistics over repeats, per configuration, and comparisons between configurations.

Every statistic here is a plain function of the records, documented with its source:

- median and min-max over repeats (the spread a reader can see without assuming a
  distribution);
- mean +/- 1.96 sd, the convention of Horovod's synthetic benchmark
  (``examples/tensorflow2/tensorflow2_synthetic_benchmark.py``: ``np.mean`` and
  ``1.96 * np.std``, i.e. the population standard deviation), which is the range
  holding ~95 % of single runs if they are normally distributed, *not* a confidence
  interval of the mean;
- time to target accuracy over repeats by MLPerf Training's scoring rule
  (:func:`mlperf_time_to_target`);
- speed-up versus the ``single`` configuration measured on the same hardware
  (:func:`distbench.results.provenance.hardware_key`) and scaling efficiency;
- Hermans' temporal efficiency between two accuracy-versus-time curves
  (:func:`temporal_efficiency`).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Callable, Sequence

from distbench.contracts import INPUTS_DIR
from distbench.results.provenance import hardware_key
from distbench.results.records import DIVERGED_LOSS, centre_updated_at_the_end, config_label, straggler_text

Z95 = 1.96  # two-sided 95 % quantile of the standard normal distribution


@dataclass
class Spread:
    """Median, range, mean and standard deviation of one metric over repeats.

    Attributes:
        median, min, max: of the ``n`` values (``None`` when ``n == 0``).
        n: number of values.
        mean: arithmetic mean (``None`` when ``n == 0``).
        sd: population standard deviation (``numpy.std`` with ``ddof=0``, as Horovod's
            benchmark uses; ``None`` when ``n == 0``).
        values: the values themselves (for :func:`separated`'s rank test).
    """

    median: float | None
    min: float | None
    max: float | None
    n: int
    mean: float | None = None
    sd: float | None = None
    values: tuple[float, ...] = field(default=(), repr=False, compare=False)

    @property
    def ci95(self) -> float | None:
        """Half-width ``1.96 * sd`` of Horovod's "mean +- 1.96 sd" convention, in the
        metric's unit; ``None`` with fewer than two values (one run has no spread)."""
        if self.sd is None or self.n < 2:
            return None
        return Z95 * self.sd

    @classmethod
    def of(cls, values: Sequence[float | None]) -> "Spread":
        """Spread of the non-``None`` values (``None`` marks a missing measurement)."""
        vals = [float(v) for v in values if v is not None]
        if not vals:
            return cls(None, None, None, 0)
        mean = statistics.fmean(vals)
        return cls(statistics.median(vals), min(vals), max(vals), len(vals), mean, statistics.pstdev(vals, mean),
                   tuple(vals))


@dataclass
class TimeToTarget:
    """Time to the target accuracy over repeats, scored with MLPerf's rule.

    Attributes:
        value: the score in seconds, or ``None`` when there is no run or the runs kept
            for the average include one that never reached the target ("not reached").
        runs: number of runs scored.
        reached: how many of them reached the target.
        kept: how many runs were averaged (``runs - 2`` when ``runs >= 5``).
    """

    value: float | None
    runs: int
    reached: int
    kept: int

    @property
    def not_reached(self) -> bool:
        """True when there were runs but the score is "not reached"."""
        return self.runs > 0 and self.value is None


def mlperf_time_to_target(times: Sequence[float | None]) -> TimeToTarget:
    """Score repeated time-to-target measurements with MLPerf Training's rule.

    MLPerf Training Rules (mlcommons/training_policies, ``training_rules.adoc``, section
    "Benchmark Results"): "Each benchmark result is computed by dropping the fastest and
    slowest runs, then taking the mean of the remaining times. For this purpose, a single
    non-converging run may be treated as the slowest run and dropped. A benchmark result
    is invalid if there is more than one non-converging run." MLPerf always has at least
    five runs; distbench applies the drop only then and, with fewer runs, averages them
    all. A run that never reaches the target counts as infinitely slow, so whenever one
    remains among the averaged runs the score is "not reached" (``None``).

    Args:
        times: seconds from training start to the target accuracy, one per run;
            ``None`` for a run that never reached it.

    Returns:
        :class:`TimeToTarget`. Examples: ``[4, 5, None]`` -> not reached;
        ``[1, 2, 3, 4, None]`` -> mean(2, 3, 4) = 3.0.
    """
    vals = sorted(math.inf if t is None else float(t) for t in times)
    n = len(vals)
    kept = vals[1:-1] if n >= 5 else vals
    reached = sum(1 for v in vals if math.isfinite(v))
    if not kept or any(math.isinf(v) for v in kept):
        return TimeToTarget(None, n, reached, len(kept))
    return TimeToTarget(statistics.fmean(kept), n, reached, len(kept))


def _points(curve: Sequence[dict[str, Any]], key: str = "test_accuracy") -> list[tuple[float, float]]:
    """``(elapsed_s, value)`` pairs of a record's curve, sorted by time, ``None`` values dropped."""
    pts = [(float(p["elapsed_s"]), float(p[key])) for p in curve
           if p.get("elapsed_s") is not None and p.get(key) is not None]
    return sorted(pts)


def area_under_curve(curve: Sequence[dict[str, Any]], t_end: float) -> float:
    """Area under a record's test-accuracy-versus-time curve from 0 to ``t_end`` seconds.

    Trapezoidal rule on the evaluated points, joined by straight lines, starting from
    accuracy 0 at ``t = 0``. The initial accuracy is not recorded; every strategy starts
    from the same initial weights, so one common starting value keeps the comparison
    fair, and 0 is the conservative choice. After the last point the curve holds its
    final value; between points that straddle ``t_end`` it is interpolated linearly.

    Args:
        curve: record curve points with ``elapsed_s`` (seconds since training start)
            and ``test_accuracy`` (fraction in [0, 1]).
        t_end: upper limit of the integral, seconds (>= 0).

    Returns:
        accuracy x seconds.
    """
    pts = [(0.0, 0.0)] + [p for p in _points(curve) if p[0] > 0]
    area = 0.0
    for (t0, a0), (t1, a1) in zip(pts, pts[1:]):
        if t0 >= t_end:
            return area
        if t1 > t_end:
            a_end = a0 + (a1 - a0) * (t_end - t0) / (t1 - t0)
            return area + (a0 + a_end) / 2 * (t_end - t0)
        area += (a0 + a1) / 2 * (t1 - t0)
    t_last, a_last = pts[-1]
    return area + a_last * max(0.0, t_end - t_last)


def curve_duration(curve: Sequence[dict[str, Any]]) -> float | None:
    """Time of the last evaluated point of a curve, seconds (``None`` for an empty curve)."""
    pts = _points(curve)
    return pts[-1][0] if pts else None


def temporal_efficiency(curve_a: Sequence[dict[str, Any]], curve_b: Sequence[dict[str, Any]]) -> float | None:
    """Hermans' temporal efficiency of run ``a`` relative to run ``b``.

    ``E(a, b) = integral_0^T acc_a(t) dt / integral_0^T acc_b(t) dt`` with
    ``T = min(duration_a, duration_b)``: the ratio of the areas under the two
    test-accuracy-versus-wall-clock curves, integrated over the shorter run's duration
    (a run's duration is the time of its last curve point). ``E > 1`` means ``a``
    delivered more accuracy sooner than ``b``; ``E = 1`` means equally efficient in time.
    Each area is computed by :func:`area_under_curve` (trapezoids from accuracy 0 at
    ``t = 0``).

    Source: J. Hermans, "On Scalable Deep Learning and Parallelizing Gradient Descent",
    MSc thesis, Maastricht University, 2017, chapter "Accumulated Gradient
    Normalization" (equation ``temporal_efficiency``, written there with integrals of the
    two accuracy curves over time), the metric behind the comparisons in J. Hermans,
    G. Spanakis, R. Moeckel, "Accumulated Gradient Normalization", ACML 2017. Limiting
    the integral to the shorter run keeps both areas over the same time span.

    Args:
        curve_a, curve_b: record curves (points with ``elapsed_s`` and ``test_accuracy``).

    Returns:
        the ratio, or ``None`` if either curve is empty or ``b``'s area over ``[0, T]`` is 0.
    """
    da, db = curve_duration(curve_a), curve_duration(curve_b)
    if da is None or db is None:
        return None
    t_end = min(da, db)
    den = area_under_curve(curve_b, t_end)
    if den <= 0:
        return None
    return area_under_curve(curve_a, t_end) / den


def median_curve(curves: Sequence[Sequence[dict[str, Any]]], key: str = "test_accuracy"
                 ) -> tuple[list[float], list[float], list[float], list[float]]:
    """Median and min-max band over repeats of several curves, for plotting.

    Repeats are aligned snapshot by snapshot: points are matched by ``epoch`` (by
    position in the curve when a point has no epoch). For each snapshot the x value is
    the median of its ``elapsed_s`` over the repeats that have it, the y value the median
    of ``key``, and the band the min and max of ``key``.

    Args:
        curves: one record curve per repeat.
        key: the curve value to aggregate (``test_accuracy`` or ``test_loss``).

    Returns:
        ``(times_s, median, low, high)`` lists of equal length, ordered by time (empty if
        no points).
    """
    by_snapshot: "OrderedDict[Any, list[tuple[float, float]]]" = OrderedDict()
    for c in curves:
        pts = sorted((p for p in c if p.get("elapsed_s") is not None and p.get(key) is not None),
                     key=lambda p: float(p["elapsed_s"]))
        for i, p in enumerate(pts):
            snap = ("epoch", p["epoch"]) if p.get("epoch") is not None else ("index", i)
            by_snapshot.setdefault(snap, []).append((float(p["elapsed_s"]), float(p[key])))
    rows = sorted((statistics.median(t for t, _ in v), statistics.median(a for _, a in v),
                   min(a for _, a in v), max(a for _, a in v)) for v in by_snapshot.values())
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]


@dataclass
class ConfigSummary:
    """One configuration's summary over its repeats, on one hardware.

    Attributes:
        config_id, strategy, workers, window: the configuration (``window``: swept
            communication window, ``None`` outside window sweeps).
        bandwidth: the emulated link rate of a bandwidth sweep (tc units, e.g. ``"100mbit"``,
            or ``"unlimited"``); ``None`` off an emulated cluster and for single-process strategies.
        repeats: number of records; ``ok``: how many are ``ok``.
        statuses: status of each record; ``reasons``: distinct reasons of non-ok ones.
        accuracy, loss: final test accuracy (fraction) and loss over ok repeats.
        train_s: training time (seconds) over ok repeats.
        startup_s: start-up seconds (process spawn to the first training step: launch,
            framework and cluster initialisation) over ok repeats; not in any speed-up.
        total_s: seconds from spawn to the end of training over ok repeats.
        samples_per_s: throughput (samples per second, all replicas) over ok repeats.
        time_to_target_s: spread of the time to target (seconds) of the repeats that
            reached it; ``reached_target``: how many did.
        ttt: the MLPerf score of the time to target over all ok repeats.
        speedup: median training time of ``single`` on the same hardware / this
            configuration's median training time (``None`` without such a baseline).
        scaling_efficiency: speedup / workers (1.0 for ``single``).
        temporal_efficiency: median over all (this repeat, ``single`` repeat) pairs of
            :func:`temporal_efficiency`, same hardware only.
        hardware: letter of the hardware (``A``, ``B``, ... in first-seen order).
        hardware_key: :func:`distbench.results.provenance.hardware_key` of the records.
        workload: number of the workload (``1``, ``2``, ... in first-seen order; merged
            runs with different data, model, epochs, batch or optimizer settings).
        workload_key: :func:`workload_key` of the records.
        staleness_median: parameter-server rows: median over ok repeats of each run's median
            commit staleness (server updates between a worker's pull and its commit);
            ``None`` for strategies without a parameter server.
        staleness_max: parameter-server rows: the largest staleness of any commit of any ok
            repeat (``None`` otherwise).
        scenario: the straggler scenario of a scenario sweep (the records' ``scenario``:
            ``worker``, ``slowdown``, ``jitter_cv``, ``jitter_seed``), ``None`` outside one.
        flags: warnings about the result itself, set by :func:`flag_collapses`:
            ``"diverged"`` (non-finite final loss; accuracy at most 1.5x chance with a loss no
            better than a uniform guess's, ln C; or a final loss above ln C and more than twice
            the run's lowest),
            ``"below target"`` (median accuracy under the target), ``"collapsed"`` (below
            the target and more than :data:`COLLAPSE_POINTS` below another configuration of
            the same strategy that reached it), ``"committed once"`` (a parameter-server
            row whose communication window is at least the steps each replica took in the
            whole run: each replica committed once, at its end,
            :func:`~distbench.results.records.centre_updated_at_the_end`).
        records: the records summarised (not serialised).
    """

    config_id: str
    strategy: str
    workers: int
    repeats: int
    ok: int
    statuses: list[str]
    reasons: list[str]
    accuracy: Spread
    loss: Spread
    train_s: Spread
    samples_per_s: Spread
    time_to_target_s: Spread
    reached_target: int
    window: int | None = None
    bandwidth: str | None = None
    speedup: float | None = None
    scaling_efficiency: float | None = None
    ttt: TimeToTarget = field(default_factory=lambda: TimeToTarget(None, 0, 0, 0))
    temporal_efficiency: float | None = None
    hardware: str = "A"
    hardware_key: str = ""
    workload: str = "1"
    workload_key: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    staleness_median: float | None = None
    staleness_max: int | None = None
    flags: list[str] = field(default_factory=list)
    startup_s: Spread = field(default_factory=lambda: Spread.of([]))
    total_s: Spread = field(default_factory=lambda: Spread.of([]))
    scenario: dict[str, Any] | None = None
    records: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def status(self) -> str:
        """``ok`` when every repeat is ok, ``k/n ok`` when some are, else the non-ok statuses."""
        if self.ok == self.repeats:
            return "ok"
        return f"{self.ok}/{self.repeats} ok" if self.ok else "/".join(sorted(set(self.statuses) - {"ok"}))

    @property
    def slowdown(self) -> float | None:
        """The scenario's slowdown of its slow worker (``None`` outside a scenario sweep)."""
        return None if self.scenario is None else float(self.scenario.get("slowdown", 1.0))

    @property
    def straggler(self) -> str:
        """The scenario in a few characters: ``1x`` (the sweep's baseline), ``w1 3x`` (worker 1
        three times slower), ``+ jit 0.3`` appended with jitter; ``""`` outside a sweep."""
        return straggler_text(self.scenario)

    @property
    def label(self) -> str:
        """Human name (:func:`config_label`): ``mirrored (2 workers)``, ``spark_ps:adag (2
        workers, window 5)``, ``horovod (2 workers, w1 3x)`` under a straggler scenario."""
        return config_label(self.strategy, self.workers, self.window, self.bandwidth, self.scenario)


def hardware_labels(records: Sequence[dict[str, Any]]) -> "OrderedDict[str, str]":
    """Map each distinct hardware key of ``records`` to a letter ``A``, ``B``, ... (first-seen order)."""
    out: "OrderedDict[str, str]" = OrderedDict()
    for r in records:
        k = hardware_key(r.get("provenance") or {})
        if k not in out:
            out[k] = _letter(len(out))
    return out


def _letter(i: int) -> str:
    s = ""
    i += 1
    while i:
        i, rem = divmod(i - 1, 26)
        s = chr(65 + rem) + s
    return s


def workload_key(record: dict[str, Any]) -> str | None:
    """What must match for two records' times to be comparable: dataset and its
    fingerprint, model and its parameter count, epochs, global batch, local optimizer, learning rate and its
    scaling, as a JSON string; ``None`` when the record carries none of them.

    The learning rate is the configured one (``workload.learning_rate``), not the one a
    strategy trained with: linear scaling (lr x replicas) and EAMSGD's own local rate are
    the strategy's rule on the same workload. Records written before that field existed
    fall back to their top-level ``learning_rate``."""
    vals = list(workload_fields(record).values())
    return None if all(v is None for v in vals) else json.dumps(vals)


def workload_fields(record: dict[str, Any]) -> dict[str, Any]:
    """The settings :func:`workload_key` compares, by the name a user knows them by:
    ``dataset``, ``data fingerprint``, ``model``, ``parameters`` (the model's size: two MLPs
    of other widths differ there only), ``epochs``, ``global batch``, ``optimizer``,
    ``learning rate``, ``lr scaling`` (``None`` where the record has none)."""
    w = record.get("workload") or {}
    model = w.get("model")
    if isinstance(model, str) and model.startswith("path:"):  # compare()'s model in RUN_DIR/inputs: the same
        where = PurePath(model[5:].removesuffix(" (reinit)"))  # model after the run directory moved (helper-37:
        if where.parent.name == INPUTS_DIR:  # a moved run's resume split into two workloads)
            model = f"path:{INPUTS_DIR}/{where.name}" + (" (reinit)" if model.endswith(" (reinit)") else "")
    return {"dataset": w.get("dataset"), "data fingerprint": w.get("data_sha256"), "model": model,
            "parameters": w.get("num_parameters"),
            "epochs": record.get("epochs"), "global batch": record.get("global_batch_size"),
            "optimizer": record.get("optimizer"), "learning rate": w.get("learning_rate", record.get("learning_rate")),
            "lr scaling": record.get("lr_scaling")}


def describe_workload(record: dict[str, Any]) -> str:
    """One line: ``digits, mlp, 5 epochs, global batch 64, sgd lr 0.1`` (unknown parts left out)."""
    w = record.get("workload") or {}
    get = record.get
    lr = w.get("learning_rate", get("learning_rate"))
    parts = [str(w["dataset"]) if w.get("dataset") else "", str(w["model"]) if w.get("model") else "",
             f"{get('epochs')} epochs" if get("epochs") is not None else "",
             f"global batch {get('global_batch_size')}" if get("global_batch_size") is not None else "",
             " ".join(x for x in (str(get("optimizer") or ""),
                                  f"lr {lr}" if lr is not None else "") if x),
             f"lr scaling {get('lr_scaling')}" if get("lr_scaling") not in (None, "none") else ""]
    return ", ".join(p for p in parts if p)


def record_groups(records: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(hardware key, workload key)`` of each record. A record without workload fields
    (e.g. hand-made) takes the workload of its run, else the first one seen, else ``""``."""
    wks = [workload_key(r) for r in records]
    by_run: dict[Any, str] = {}
    for r, k in zip(records, wks):
        if k is not None:
            by_run.setdefault(r.get("run_id"), k)
    first = next((k for k in wks if k is not None), "")
    return [(hardware_key(r.get("provenance") or {}), k if k is not None else by_run.get(r.get("run_id"), first))
            for r, k in zip(records, wks)]


def workload_labels(records: Sequence[dict[str, Any]]) -> "OrderedDict[str, str]":
    """Map each distinct workload key (as in :func:`record_groups`) to ``1``, ``2``, ... (first-seen order)."""
    out: "OrderedDict[str, str]" = OrderedDict()
    for _, wk in record_groups(records):
        out.setdefault(wk, str(len(out) + 1))
    return out


def summarize(records: list[dict[str, Any]]) -> list[ConfigSummary]:
    """Group records by (``config_id``, hardware, workload) and summarise each group;
    groups are ordered by hardware, then workload, then first appearance.

    Records of the same configuration from different hardware (or with a different
    workload: data, model, epochs, batch, optimizer) are kept apart. Speed-up, scaling
    efficiency and temporal efficiency compare a configuration only with the ``single``
    records of the same hardware key and workload; without an ok ``single`` record
    there they are ``None``.
    """
    hw_labels = hardware_labels(records)
    wl_labels = workload_labels(records)
    groups: "OrderedDict[tuple[str, str, str], list[dict[str, Any]]]" = OrderedDict()
    for r, (hw, wk) in zip(records, record_groups(records)):
        groups.setdefault((r["config_id"], hw, wk), []).append(r)
    out = []
    for (cid, hw, wk), rs in groups.items():
        ok = [r for r in rs if r.get("status") == "ok"]
        reasons = list(dict.fromkeys(r.get("reason", "") for r in rs if r.get("status") != "ok"))
        ttts = [r.get("time_to_target_s") for r in ok]
        stale = [((r.get("details") or {}).get("staleness") or {}) for r in ok]
        stale_med = [st["median"] for st in stale if st.get("median") is not None]
        stale_max = [st["max"] for st in stale if st.get("max") is not None]
        out.append(ConfigSummary(
            config_id=cid, strategy=rs[0]["strategy"], workers=rs[0]["workers"],
            repeats=len(rs), ok=len(ok), statuses=[r.get("status", "?") for r in rs], reasons=reasons,
            accuracy=Spread.of([r.get("final_test_accuracy") for r in ok]),
            loss=Spread.of([r.get("final_test_loss") for r in ok]),
            train_s=Spread.of([(r.get("timings") or {}).get("train_s") for r in ok]),
            samples_per_s=Spread.of([r.get("samples_per_s") for r in ok]),
            time_to_target_s=Spread.of(ttts),
            reached_target=sum(1 for t in ttts if t is not None),
            ttt=mlperf_time_to_target(ttts),
            window=rs[0].get("communication_window"), bandwidth=rs[0].get("bandwidth"),
            scenario=rs[0].get("scenario"),
            hardware=hw_labels[hw], hardware_key=hw, workload=wl_labels[wk], workload_key=wk, records=rs,
            staleness_median=statistics.median(stale_med) if stale_med else None,
            staleness_max=int(max(stale_max)) if stale_max else None,
            startup_s=Spread.of([(r.get("timings") or {}).get("startup_s") for r in ok]),
            total_s=Spread.of([(r.get("timings") or {}).get("total_s") for r in ok]),
        ))
    hw_order = {k: i for i, k in enumerate(hw_labels)}
    wl_order = {k: i for i, k in enumerate(wl_labels)}
    out.sort(key=lambda s: (hw_order[s.hardware_key], wl_order[s.workload_key]))  # stable: first-seen within
    _compare_with_single(out)
    flag_collapses(out)
    return out


COLLAPSE_POINTS = 0.15  # accuracy (fraction) a configuration must lose against its strategy's best to "collapse"
NOT_RANKED = ("collapsed", "diverged", "committed once")
"""Flags that keep a configuration out of the ranking by time to target (headline and
``advise``): it did not train, or, committed once, its curve has one point, at the end of a
run whose window the sweep set past it (user test, helper-43: ``advise`` named a window of
1000 against 60 steps as the contender, ``predict --target`` extrapolated its curve)."""


def ranked_out(s: "ConfigSummary") -> str | None:
    """The first of :data:`NOT_RANKED` flagged on ``s``, or ``None`` when it may be ranked."""
    return next((f for f in NOT_RANKED if f in s.flags), None)


def fits_training(s: ConfigSummary, classes: int) -> bool:
    """True when the median last training loss (``details.last_train_loss``, the last step's
    loss over its batch; recorded by the synchronous strategies) of the ok repeats is finite
    and under half a uniform guess's (``ln classes / 2``): the model learned its training
    data, whatever the test split says. False when no repeat recorded it."""
    got = [(r.get("details") or {}).get("last_train_loss") for r in s.records if r.get("status") == "ok"]
    vals = [float(v) for v in got if isinstance(v, (int, float)) and math.isfinite(v)]
    return bool(vals) and len(vals) == len(got) and statistics.median(vals) < math.log(classes) / 2


def _diverged(s: ConfigSummary, target: float | None = None) -> bool:
    """True when an ok repeat ended with a non-finite test loss (stored as ``null`` in the last
    curve point, as JSON has no NaN) or one over :data:`~distbench.results.records.DIVERGED_LOSS`,
    or a parameter-server replica of it stopped on non-finite
    weights (``details.diverged``), or when the median accuracy is at most 1.5x chance
    (``1 / workload.num_classes``, when recorded) *and* the median final test loss is no better
    than a uniform guess's (``ln num_classes``, the cross-entropy of predicting every class with
    probability 1 / C). The loss test keeps a slow but learning run (3 classes, accuracy 0.45
    after 2 epochs of ADAG, its loss falling below ln 3) from being called diverged; without a
    recorded final loss the accuracy test decides alone. Also diverged below the ``target``
    accuracy, whatever the accuracy: a median final test loss above ln C and more than twice
    the median of each run's lowest (training went backwards: alpha = 2.5 elastic runs whose
    loss rose from 3 to 25 while the accuracy stayed at 0.45 of 10 classes); an over-confident
    model at or above the target is not. The two test-loss rules do not apply when the last
    training loss shows the model fits its training data (:func:`fits_training`): then the
    test split disagrees with the training data (another source, a shift), which a note
    says, but training did not diverge."""
    ok = [r for r in s.records if r.get("status") == "ok"]
    if any(r.get("curve") and (r["curve"][-1].get("test_loss") is None or r["curve"][-1]["test_loss"] > DIVERGED_LOSS)
           for r in ok):  # over DIVERGED_LOSS too, as predict counts it (user test, helper-29: they disagreed)
        return True
    if any((r.get("details") or {}).get("diverged") for r in ok):  # a parameter-server replica stopped on NaN/inf
        return True
    classes = next(((r.get("workload") or {}).get("num_classes") for r in ok
                    if (r.get("workload") or {}).get("num_classes")), None)
    if not (classes and classes > 1):
        return False
    if fits_training(s, classes):  # the test rules below judge the test split, not the training (see there)
        return False
    losses = [r["curve"][-1]["test_loss"] for r in ok if r.get("curve")]
    lows = [min(p["test_loss"] for p in r["curve"] if p.get("test_loss") is not None) for r in ok if r.get("curve")]
    below = target is None or (s.accuracy.median is not None and s.accuracy.median < target)
    if below and losses and statistics.median(losses) >= max(math.log(classes), 2 * statistics.median(lows)):
        return True  # the loss rose to more than twice its best, past a uniform guess's: training went backwards
    if not (s.accuracy.median is not None and s.accuracy.median <= 1.5 / classes):
        return False
    return not losses or statistics.median(losses) >= math.log(classes)


def flag_collapses(summaries: Sequence[ConfigSummary]) -> None:
    """Set :attr:`ConfigSummary.flags` of each configuration (see there).

    A configuration is ``collapsed`` when its median accuracy is under the target and more
    than :data:`COLLAPSE_POINTS` below another configuration of the same strategy, on the
    same hardware and workload (other worker count or window), that reached the target:
    the strategy works here, this setting of it did not (e.g. DOWNPOUR with more workers
    and so more staleness). The target is each record's ``target_accuracy``. A diverged
    configuration (other than ``single``, the reference) loses its speed-up, scaling and
    temporal efficiency: a run that does not train, and may have stopped early, has none.
    """
    for s in summaries:
        s.flags = []
        target = next((r.get("target_accuracy") for r in s.records if r.get("target_accuracy")), None)
        if s.accuracy.median is None:
            continue
        if _diverged(s, target):
            s.flags.append("diverged")
            if s.strategy != "single":  # a run that does not train (and may have stopped early) has no speed-up
                s.speedup = s.scaling_efficiency = s.temporal_efficiency = None
        if target is not None and s.accuracy.median < target:
            s.flags.append("below target")
            if any(o is not s and o.strategy == s.strategy and (o.hardware_key, o.workload_key) ==
                   (s.hardware_key, s.workload_key) and o.accuracy.median is not None
                   and o.accuracy.median >= target and o.accuracy.median - s.accuracy.median > COLLAPSE_POINTS
                   for o in summaries):
                s.flags.append("collapsed")
        if any(centre_updated_at_the_end(r) for r in s.records if r.get("status") == "ok"):
            s.flags.append("committed once")


def _compare_with_single(summaries: list[ConfigSummary]) -> None:
    """Fill speed-up, scaling and temporal efficiency against ``single`` on the same
    hardware and workload."""
    for group in dict.fromkeys((s.hardware_key, s.workload_key) for s in summaries):
        same = [s for s in summaries if (s.hardware_key, s.workload_key) == group]
        base = [s for s in same if s.strategy == "single" and s.train_s.median]
        if not base:
            continue
        t1 = statistics.median([s.train_s.median for s in base])  # type: ignore[misc]
        base_curves = [r.get("curve") or [] for s in base for r in s.records if r.get("status") == "ok"]
        for s in same:
            if not s.train_s.median:
                continue
            s.speedup = t1 / s.train_s.median
            s.scaling_efficiency = 1.0 if s.strategy == "single" else s.speedup / s.workers
            if s.strategy == "single":
                s.temporal_efficiency = 1.0
                continue
            tes = [temporal_efficiency(r.get("curve") or [], c) for r in s.records if r.get("status") == "ok"
                   for c in base_curves]
            vals = [t for t in tes if t is not None]
            s.temporal_efficiency = statistics.median(vals) if vals else None


@dataclass
class Leader:
    """A configuration that leads on one criterion, with its margin over the runner-up.

    Attributes:
        summary: the leading configuration.
        value: its value (seconds for time to target, fraction for accuracy).
        runner_up: the second-best configuration (``None`` when alone).
        runner_up_value: the runner-up's value.
        overlaps: True when the two configurations' min-max ranges over repeats overlap,
            i.e. the margin is within the run-to-run spread.
        ties: the other configurations whose value equals the leader's within the
            criterion's tolerance, best first; ``runner_up`` is then the best one after them.
    """

    summary: ConfigSummary
    value: float
    runner_up: ConfigSummary | None = None
    runner_up_value: float | None = None
    overlaps: bool = False
    ties: list[ConfigSummary] = field(default_factory=list)


def _leader(ranked: Sequence[ConfigSummary], value: Callable[[ConfigSummary], float],
            spread: Callable[[ConfigSummary], Spread], tie: float = 0.0,
            shown: Callable[[float], str] | None = None) -> Leader | None:
    """The first of ``ranked`` (best first), the others within ``tie`` of its value or shown
    as the same text by ``shown`` (ties), the runner-up after them and whether the leader's
    and runner-up's spreads overlap."""
    if not ranked:
        return None
    best = ranked[0]
    lead = Leader(best, value(best))
    lead.ties = [s for s in ranked[1:] if abs(value(s) - lead.value) < tie
                 or (shown is not None and shown(value(s)) == shown(lead.value))]
    rest = [s for s in ranked[1:] if s not in lead.ties]
    if rest:
        nxt = rest[0]
        lead.runner_up, lead.runner_up_value = nxt, value(nxt)
        lead.overlaps = _overlap(spread(best), spread(nxt))
    return lead


def fastest_to_target(summaries: Sequence[ConfigSummary]) -> Leader | None:
    """The configuration with the smallest MLPerf time to target (see
    :func:`mlperf_time_to_target`), among those that reached it; ``None`` if none did."""
    ttt = lambda s: s.ttt.value  # noqa: E731
    return _leader(sorted((s for s in summaries if ttt(s) is not None), key=ttt), ttt, lambda s: s.time_to_target_s)


ACCURACY_TIE = 0.0005  # median accuracies closer than this tie, and so do those printed alike at three decimals


def most_accurate(summaries: Sequence[ConfigSummary]) -> Leader | None:
    """The configuration with the highest median final test accuracy, with its ties.

    Args:
        summaries: the configurations to compare (those without an ok run are left out).

    Returns:
        the :class:`Leader`; its ties are the configurations within :data:`ACCURACY_TIE` of
        it or printed as the same accuracy at three decimals (0.9504 and 0.9496 both read
        0.950: no sentence says one is "+0.0 points" over the other). ``runner_up`` is
        ``None`` when every configuration ties. ``None`` if no ok run.
    """
    acc = lambda s: s.accuracy.median  # noqa: E731
    return _leader(sorted((s for s in summaries if acc(s) is not None), key=lambda s: -acc(s)), acc,
                   lambda s: s.accuracy, tie=ACCURACY_TIE, shown=lambda v: f"{v:.3f}")


def fastest_training(summaries: Sequence[ConfigSummary]) -> Leader | None:
    """The configuration with the shortest median training time (whatever accuracy it
    reached); ``None`` if no ok run has one."""
    t = lambda s: s.train_s.median  # noqa: E731
    return _leader(sorted((s for s in summaries if t(s)), key=t), t, lambda s: s.train_s)


RANK_TEST_MIN_RUNS = 5
"""Runs of each configuration before :func:`separated` tells overlapping ranges apart by rank."""
RANK_TEST_P = 0.05
"""Two-sided p-value under which the rank test separates two configurations."""


def rank_test_p(a: Spread, b: Spread) -> float | None:
    """The two-sided p-value of the Mann-Whitney U test (Mann & Whitney 1947; ``scipy.stats.mannwhitneyu``)
    that ``a``'s and ``b``'s values come from one distribution, with :data:`RANK_TEST_MIN_RUNS`
    or more values each; ``None`` with fewer (3 against 3 can reach only p = 0.1)."""
    if min(len(a.values), len(b.values)) < RANK_TEST_MIN_RUNS:
        return None
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(a.values, b.values, alternative="two-sided").pvalue)


def separated(a: Spread, b: Spread) -> bool:
    """True when two configurations' values can be told apart: their min-max ranges over
    repeats do not overlap, or, with :data:`RANK_TEST_MIN_RUNS` or more runs each, the rank
    test (:func:`rank_test_p`) gives p < :data:`RANK_TEST_P`. Min-max ranges only widen with
    more runs, so ranges alone could never separate two configurations once they overlapped
    (user test, helper-32: advise asked for 2 more repeats each round, for ever); the rank
    test's power grows with the runs."""
    if None in (a.min, a.max, b.min, b.max):
        return True
    if not (a.min <= b.max and b.min <= a.max):  # type: ignore[operator]
        return True
    p = rank_test_p(a, b)
    return p is not None and p < RANK_TEST_P


def _overlap(a: Spread, b: Spread) -> bool:
    """Within run-to-run noise: not :func:`separated` (both measured)."""
    return None not in (a.min, a.max, b.min, b.max) and not separated(a, b)

