"""Notes under a report's headline about whether its numbers can be read as they stand:
first-epoch warm-up that dominates a short run (:func:`warmup_note`), parameter-server
rows that trail the synchronous strategies or whose replicas barely overlapped
(:func:`ps_notes`), a start-up that includes a shared (Spark or MPI) engine's start
(:func:`engine_start_notes`), synchronous rows whose BatchNormalization layers use
per-replica batch moments (:func:`batchnorm_note`), rows that fit their training data
but not the test split (:func:`test_split_note`), and speed-ups above what the hardware the
workers shared can give (:func:`superlinear_note`)."""

from __future__ import annotations

import math
import re
import shlex
import statistics
from typing import Any, Sequence

from distbench.contracts import PlacementKind
from distbench.results.records import centre_updated_at_the_end, model_points
from distbench.results.stats import ConfigSummary, fits_training
from distbench.text import join_and, seconds_text


WARMUP_SHARE = 0.2  # share of the training time above which the first-epoch warm-up is reported
MAX_SUGGESTED_EPOCHS = 100  # a warm-up note suggests this many epochs whatever they take,
MAX_SUGGESTED_TRAIN_S = 600.0  # and more where their training takes at most this (seconds; helper-32: 115 epochs
# of 0.08 s, 9 s in all, were called too many)


def warmup_share(record: dict[str, Any]) -> tuple[float, float, float] | None:
    """How much of a record's training time is first-epoch warm-up.

    The first epoch carries one-off costs (graph tracing, the first collective's set-up,
    connecting to a parameter server); later epochs do not. The warm-up is the first
    epoch's time minus the median time of the later epochs, read from the record's curve
    (one point per epoch, ``elapsed_s`` since training start; of points holding the same
    model only the last, :func:`~distbench.results.records.model_points`).

    Args:
        record: an ok record with a curve of at least two epochs.

    Returns:
        ``(share, first_s, later_s)``: warm-up / training time (fraction), the first
        epoch's seconds and the median later epoch's seconds; ``None`` with fewer than two
        points, no training time, or a curve with no epoch ends (a parameter server whose
        replicas commit only at their end, :func:`~distbench.results.records.centre_updated_at_the_end`).
    """
    pts = [(p["epoch"], p["elapsed_s"]) for p in model_points(record.get("curve") or [])]
    train = (record.get("timings") or {}).get("train_s") or (pts[-1][1] if pts else None)
    if len(pts) < 2 or not train or centre_updated_at_the_end(record):
        return None
    later = statistics.median((b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(pts, pts[1:]))
    first = pts[0][1] - (pts[0][0] - 1) * later  # the first point may be a later epoch's (records.model_points)
    return max(0.0, first - later) / train, first, later


def steady_epoch(c: ConfigSummary) -> tuple[float, float] | None:
    """``(median later-epoch seconds, median warm-up share)`` of a configuration's ok runs
    (:func:`warmup_share`), or None."""
    found = [w for r in c.records if r.get("status") == "ok" for w in [warmup_share(r)] if w is not None]
    if not found:
        return None
    return statistics.median(w[2] for w in found), statistics.median(w[0] for w in found)


def warmup_lead(lead: ConfigSummary, second: ConfigSummary | None) -> tuple[float, float, float] | None:
    """Whether ``lead`` is ahead of ``second`` only through ``second``'s first-epoch warm-up:
    ``lead`` slower per epoch in steady state (by over 10%) and ``second``'s warm-up at least
    :data:`WARMUP_SHARE` of its training time (e.g. ``keras_jax`` compiles before the clock,
    ``single`` traces in its epoch 1).

    Returns:
        ``(second's warm-up share, second's steady epoch s, lead's steady epoch s)``, or None.
    """
    if second is None:
        return None
    a, b = steady_epoch(lead), steady_epoch(second)
    if a is None or b is None or not a[0] > 1.1 * b[0] or b[1] < WARMUP_SHARE:
        return None
    return b[1], b[0], a[0]


def warmup_note(records: Sequence[dict[str, Any]], epochs_share: float = 0.1,
                run_dir: Any = None) -> str | None:
    """A sentence when the epochs are too few for the first-epoch warm-up to wash out.

    Args:
        records: the records of one report.
        epochs_share: warm-up share the suggested epoch count would bring it under.
        run_dir: the run directory, named in the ``distbench predict`` command it suggests
            (``RUN_DIR`` when unknown, e.g. a merged report).

    Returns:
        ``None`` when every configuration's median warm-up share over its ok runs is under
        :data:`WARMUP_SHARE` of its training time; else a sentence naming the configuration
        with the largest, its median first and later epoch times and an epoch count that
        would bring the warm-up under ``epochs_share``, or, when that count is over
        :data:`MAX_SUGGESTED_EPOCHS` and would train for over :data:`MAX_SUGGESTED_TRAIN_S`,
        a bigger workload instead (with that count and time).
        Runs of one epoch cannot separate warm-up and get their own sentence.
    """
    ok = [r for r in records if r.get("status") == "ok"]
    if ok and all(r.get("epochs") == 1 for r in ok):
        return ("Each run trained one epoch, so its time includes the one-off warm-up (graph tracing, first "
                "collective set-up) that later epochs do not pay: speed-ups may compare warm-up, not training; "
                "run more epochs (--epochs 5 or more).")
    by_config: dict[Any, list[tuple[tuple[float, float, float], dict[str, Any]]]] = {}
    for r in ok:
        if (w := warmup_share(r)) is not None:
            by_config.setdefault(r.get("config_id") or (r.get("strategy"), r.get("workers")), []).append((w, r))
    # each configuration's medians over its runs, as the table and advise's headline read them (helper-33: the
    # slowest run's 69% beside a median train s, and 64% here against the headline's 62%)
    medians = [(tuple(statistics.median(w[i] for w, _ in runs) for i in range(3)), runs[0][1])
               for runs in by_config.values()]
    worst = max(medians, key=lambda x: x[0][0], default=None)
    if worst is None or worst[0][0] < WARMUP_SHARE:
        return None
    (share, first, later), r = worst
    excess = first - later
    need = (math.ceil(1 + (excess / epochs_share - first) / later) if later > 0 else None)
    who = f"{r.get('strategy')} ({r.get('workers')} worker{'s' if r.get('workers') != 1 else ''})"
    d = 3 if first < 1 else 2  # enough digits that first - later reads as the extra shown
    text = (f"Warm-up: the first epoch of {who} took {first:.{d}f} s against {later:.{d}f} s for "
            f"each later one: the extra {excess:.{d}f} s is {share:.0%} of its training time; with "
            f"{r.get('epochs')} epochs the speed-ups "
            f"compare {'mostly' if share >= 0.5 else 'partly'} this one-off cost (graph tracing, first collective "
            "or server connection), not "
            f"steady-state training: ")
    if need is not None and (need <= MAX_SUGGESTED_EPOCHS or need * later <= MAX_SUGGESTED_TRAIN_S):
        return text + f"run more epochs (about --epochs {need} would bring it under {epochs_share:.0%})."
    where = shlex.quote(str(run_dir or "RUN_DIR"))
    took = f"about {need:,} epochs, {seconds_text(need * later)} of training" if need else "more epochs than any"
    return text + (f"later epochs are too short for more epochs to wash it out (under {epochs_share:.0%} would take "
                   f"{took}), so compare on a bigger workload (more data, a larger model or "
                   f"batch) or read the steady-state epoch times (distbench predict {where}).")


#: The shared engines: detail key in a record that ran in one, log-name prefix, its family,
#: what its start is, and the config switch that gives each configuration its own.
ENGINES = {
    "Spark": ("spark_session", "spark-engine-", "spark_ps", "JVM, SparkSession, Python workers",
              "[spark] share_session = false"),
    "MPI": ("mpi_engine", "mpi-engine-", "mpi_ps", "mpirun, its ranks' Python and TensorFlow imports",
            "[mpi] share_engine = false"),
}


def _engine_of(record: dict[str, Any]) -> str | None:
    """The shared engine (a key of :data:`ENGINES`) ``record`` ran in: it says so, or (a
    failed one, whose details may be empty) its log is an engine's
    (``logs/spark-engine-*.log``, ``logs/mpi-engine-*.log``); ``None`` otherwise."""
    log = str(record.get("log") or "")
    if not log:
        return None
    for kind, (key, prefix, *_) in ENGINES.items():
        if (record.get("details") or {}).get(key) == "shared" or log.rsplit("/", 1)[-1].startswith(prefix):
            return kind
    return None


def engine_starters(summaries: Sequence[ConfigSummary]) -> dict[str, dict[str, Any]]:
    """The ok records whose start-up includes starting a shared engine.

    ``distbench run`` starts one Spark engine for a sweep's ``spark_ps`` configurations
    (``[spark] share_session``, the default; records say ``details.spark_session =
    "shared"``) and one ``mpirun`` job for its ``mpi_ps`` configurations (``[mpi]
    share_engine``; ``details.mpi_engine = "shared"``); the configurations run in it one
    after another, so the first configuration of each engine (each engine writes its own
    log, named in the records' ``log``) pays the engine's start in its start-up; the others
    reuse it.

    Args:
        summaries: the report's configurations.

    Returns:
        ``{config_id: record}`` of the records that started an engine (empty without one).
    """
    first: dict[tuple[Any, Any], tuple[float, str, dict[str, Any]]] = {}
    for s in summaries:
        for r in s.records:
            if not _engine_of(r):
                continue
            key, when = (r.get("run_id"), r["log"]), float(r.get("finished_unix") or 0.0)
            if key not in first or when < first[key][0]:
                first[key] = (when, s.config_id, r)
    return {cid: r for _, cid, r in first.values() if r.get("status") == "ok"}


def engine_start_notes(summaries: Sequence[ConfigSummary]) -> list[str]:
    """The footnotes of the start-up cells marked ``*``, one per kind of shared engine:
    which row's start-up includes the engine's start (:func:`engine_starters`), and what
    the rows reusing it took; empty when no row does."""
    starters = engine_starters(summaries)
    labels = {s.config_id: s.label for s in summaries}
    notes = []
    for kind, (_, _, family, what, switch) in ENGINES.items():
        mine = {cid: r for cid, r in starters.items() if _engine_of(r) == kind}
        if not mine:
            continue
        reused = [s.startup_s.median for s in summaries if s.config_id not in starters
                  and s.startup_s.median is not None and any(_engine_of(r) == kind for r in s.records)]
        who = "; ".join(f"{labels[cid]}, {(r.get('timings') or {}).get('startup_s') or 0:.1f} s"
                        for cid, r in mine.items())
        lo, hi = (min(reused), max(reused)) if reused else (0.0, 0.0)
        rest = (f"; the {family} configurations that reused it started in {lo:.1f}"
                + (f"-{hi:.1f}" if f"{hi:.1f}" != f"{lo:.1f}" else "") + " s" if reused else "")
        if reused:
            notes.append(f"Shared {kind} engine: the start-up marked * ({who}) includes starting the engine ({what}) "
                         f"that the sweep's {family} configurations share{rest}. {switch} gives each configuration "
                         "its own start.")
        else:  # nothing shared it: no other configuration of the family in these records
            notes.append(f"Shared {kind} engine: the start-up marked * ({who}) includes starting the engine ({what}), "
                         f"which later {family} configurations of a sweep reuse; these records have no other.")
    return notes


#: Why a parameter-server optimizer may trail the synchronous strategies after few epochs.
PS_LAG_WHY = {
    "adag": "ADAG divides each commit by its window (the centre moves by the accumulated delta / window, about "
            "one local step per window of samples)",
    "downpour": "DOWNPOUR folds every worker's whole delta into the centre, each stale by the others' commits",
    "dynsgd": "DynSGD scales each commit down by 1 / (staleness + 1)",
    "aeasgd": "the elastic force moves the centre only a fraction alpha towards each worker per window",
    "eamsgd": "the elastic force moves the centre only a fraction alpha towards each worker per window",
    "easgd": "the elastic force moves the centre only a fraction alpha towards the workers per round",
    "averaging": "the centre is the workers' mean once per window, so each replica trains on its shard alone "
                 "in between",
}
PS_LAG_POINTS = 0.10  # accuracy (fraction) a PS row must trail the best synchronous one by to get a hint
ASYNC_OPTIMIZERS = ("downpour", "adag", "dynsgd", "aeasgd", "eamsgd")


def ps_notes(summaries: Sequence[ConfigSummary]) -> list[str]:
    """Hints on parameter-server rows: why one trails the synchronous strategies of the same
    hardware and workload by more than :data:`PS_LAG_POINTS` (:data:`PS_LAG_WHY`), and that
    an asynchronous one whose commits all had staleness 0 ran its replicas barely
    overlapping (so its speed is not parallelism)."""
    notes, unlapped = [], []
    for s in summaries:
        family, _, opt = s.strategy.partition(":")
        if family not in ("spark_ps", "mpi_ps") or s.accuracy.median is None:
            continue
        sync = [o for o in summaries if (o.hardware_key, o.workload_key) == (s.hardware_key, s.workload_key)
                and o.accuracy.median is not None and ":" not in o.strategy and o.strategy != "tf_ps"]
        best = max(sync, key=lambda o: o.accuracy.median, default=None)  # type: ignore[arg-type,return-value]
        if best is not None and best.accuracy.median - s.accuracy.median > PS_LAG_POINTS and opt in PS_LAG_WHY \
                and "diverged" not in s.flags:  # (a diverged row has its own caution: it is not just slow)
            epochs = next((r.get("epochs") for r in s.records if r.get("epochs")), None)
            peak = _peak(s)
            if peak is not None and peak - s.accuracy.median > PS_LAG_POINTS:  # helper-44: "more epochs" on a fall
                notes.append(f"{s.label} fell to {s.accuracy.median:.3f} from {peak:.3f} at its best (median over its "
                             f"runs), against {best.accuracy.median:.3f} for {best.label}: {PS_LAG_WHY[opt]}; a curve "
                             "going down does not catch up with more epochs: try a smaller window, a lower "
                             "training.learning_rate or no local momentum (training.momentum = 0).")
            else:
                notes.append(f"{s.label} reached {s.accuracy.median:.3f} against {best.accuracy.median:.3f} for "
                             f"{best.label}: {PS_LAG_WHY[opt]}; " + (f"after {epochs} epochs " if epochs else "") +
                             "it may need more epochs (or a smaller window) to catch up.")
        if opt in ASYNC_OPTIMIZERS and s.workers > 1 and s.staleness_max == 0:
            unlapped.append(s.label)
    if unlapped:  # one sentence for all of them
        whose = ("its replicas", "its speed is") if len(unlapped) == 1 else ("their replicas", "their speed is")
        notes.append(f"Every commit of {join_and(unlapped)} had staleness 0: no other worker committed between a "
                     f"worker's pull and its commit, so {whose[0]} barely overlapped in time and {whose[1]} "
                     "not parallelism.")
    return notes


def _peak(s: ConfigSummary) -> float | None:
    """The median over ``s``'s ok runs of the best test accuracy on each run's curve (``None``
    when no run has a curve)."""
    best = [max(p["test_accuracy"] for p in c) for r in s.records if r.get("status") == "ok"
            for c in [[p for p in r.get("curve") or [] if p.get("test_accuracy") is not None]] if c]
    return statistics.median(best) if best else None


def batchnorm_note(summaries: Sequence[ConfigSummary]) -> str | None:
    """A note naming the synchronous rows with more than one replica whose model has
    per-replica BatchNormalization layers (``details.batchnorm``, e.g. ``"2 layers: 0
    synchronized (...), 2 per-replica (...)"``): they normalise each replica's slice of the
    global batch with its own moments, so their accuracy differs from ``single``'s by that
    and not only by the strategy. None when no row has such layers."""
    rows, layers = [], set()
    for s in summaries:
        ok = [r for r in s.records if r.get("status") == "ok" and (r.get("replicas") or s.workers) > 1]
        if not ok:  # (one replica, e.g. mirrored on one GPU, normalises over the global batch like single)
            continue
        text = str((ok[0].get("details") or {}).get("batchnorm") or "")
        m = re.search(r"^(\d+) layers?: .*?(\d+) per-replica", text)
        if m and int(m.group(2)) > 0:
            rows.append(s.label)
            layers.add(f"{m.group(2)} of {m.group(1)}")
    if not rows:
        return None
    return (f"BatchNormalization: {join_and(rows)} normalise{'s' if len(rows) == 1 else ''} with per-replica batch "
            f"moments ({join_and(sorted(layers))} layers: each replica's own slice of the global batch, where "
            "single uses the whole batch), so accuracy differences from single come partly from that, not only "
            "from the strategy; build the model with BatchNormalization(synchronized=True) for the same arithmetic "
            "as single.")


def test_split_note(summaries: Sequence[ConfigSummary]) -> str | None:
    """A note naming the rows whose model fits its training data (:func:`fits_training`)
    while the test split says it learned nothing: median accuracy at most 1.5x chance or a
    median final test loss no better than a uniform guess's (``ln C``). Such rows are not
    called diverged; the test data probably come from another distribution (or the model
    over-fits). None when no row is so."""
    rows = []
    for s in summaries:
        ok = [r for r in s.records if r.get("status") == "ok" and r.get("curve")]
        classes = next(((r.get("workload") or {}).get("num_classes") for r in ok
                        if (r.get("workload") or {}).get("num_classes")), None)
        if not (ok and classes and classes > 1 and s.accuracy.median is not None) or not fits_training(s, classes):
            continue
        losses = [r["curve"][-1].get("test_loss") for r in ok]
        loss = statistics.median(v for v in losses if v is not None) if any(v is not None for v in losses) else None
        if s.accuracy.median <= 1.5 / classes or (loss is not None and loss >= math.log(classes)):
            train = statistics.median(float((r.get("details") or {})["last_train_loss"]) for r in ok)
            rows.append((s.label, train, loss, s.accuracy.median, classes))
    if not rows:
        return None
    what = "; ".join(f"{lab}: training loss {tr:.3f}, test loss " + (f"{lo:.3f}" if lo is not None else "?")
                     + f", test accuracy {acc:.3f}" for lab, tr, lo, acc, _ in rows)
    c = rows[0][4]
    return (f"Training fits, the test split does not: {what} (a uniform guess has loss ln {c} = {math.log(c):.3f} "
            f"and accuracy {1 / c:.3f}). The model learned its training data, so this is not divergence: the test "
            "split disagrees with the training data (another source or distribution, or over-fitting); check it "
            "before comparing strategies on it.")


def speedup_bound(s: ConfigSummary) -> tuple[int, str]:
    """The largest speed-up over ``single`` that parallelism can give a configuration, read
    from its records, and where its workers ran.

    ``single`` trains with every core of its machine (``training.threads`` = cores), so each
    of N workers can at best match it: N workers are at most N times faster. Workers that
    share one machine's C cores (this machine, or an emulated cluster, whose hosts are
    network namespaces on it: records say ``details.cluster_kind = "emulated"``) are also at
    most C times faster. The bound is min(workers, cores of ``provenance.cpu_count``);
    workers on real hosts (``cluster_kind = "ssh"``), on GPUs, or with no recorded core
    count are bounded by their number alone (the records hold no other host's cores).

    Args:
        s: a configuration.

    Returns:
        ``(bound, where)``: the bound (a speed-up, x ``single``) and a phrase saying what
        set it, e.g. ``"its 2 workers shared this machine's 2 cores"``.
    """
    ok = [r for r in s.records if r.get("status") == "ok"] or s.records
    prov = (ok[0].get("provenance") or {}) if ok else {}
    kind = next(((r.get("details") or {}).get("cluster_kind") for r in ok
                 if (r.get("details") or {}).get("cluster_kind")), PlacementKind.LOCAL)
    cores = prov.get("cpu_count")
    workers = f"its {s.workers} worker{'s' if s.workers != 1 else ''}"
    if kind == PlacementKind.SSH or prov.get("gpus") or not isinstance(cores, int) or cores < 1:
        return s.workers, f"{workers} can each at best match single"
    where = "ran on emulated hosts that share" if kind == PlacementKind.EMULATED else "shared"
    return min(s.workers, cores), f"{workers} {where} this machine's {cores} core{'s' if cores != 1 else ''}"


def steady_samples_per_s(records: Sequence[dict[str, Any]]) -> float | None:
    """Median steady-state throughput of the ok ``records``: samples per epoch (``samples /
    epochs``, all replicas) over the median time of epochs 2..E (:func:`warmup_share`: the
    first epoch's one-off warm-up left out); None when no record has two epochs."""
    vals = []
    for r in records:
        w = warmup_share(r) if r.get("status") == "ok" else None
        if w is not None and w[2] > 0 and r.get("samples") and r.get("epochs"):
            vals.append(r["samples"] / r["epochs"] / w[2])
    return statistics.median(vals) if vals else None


def superlinear_note(summaries: Sequence[ConfigSummary]) -> str | None:
    """A note naming every speed-up above what the hardware its workers shared can give
    (:func:`speedup_bound`), with the likely causes: one run (noise), a baseline weaker than
    the row (in steady state each of its workers, or each core they shared, processed more
    samples per second than ``single`` did with the whole machine), or ``single``'s
    first-epoch warm-up (the steady-state speed-up is within the bound).

    Args:
        summaries: the report's configurations.

    Returns:
        one note, or None when no speed-up exceeds its bound (as printed, two decimals).
    """
    rows, noise, weak, warm, unknown = [], [], [], [], []
    for s in summaries:
        if s.strategy == "single" or s.speedup is None:
            continue
        bound, where = speedup_bound(s)
        if round(s.speedup, 2) <= bound:
            continue
        rows.append(f"{s.label} {s.speedup:.2f}x ({where}: at most {bound}x)")
        singles = [o for o in summaries if o.strategy == "single"
                   and (o.hardware_key, o.workload_key) == (s.hardware_key, s.workload_key)]
        if s.ok < 2 or any(o.ok < 2 for o in singles):
            noise.append(s.label)
        mine = steady_samples_per_s(s.records)
        theirs = steady_samples_per_s([r for o in singles for r in o.records])
        if mine and theirs and mine / bound > theirs:
            unit = "worker" if bound == s.workers else "core"
            weak.append(f"{s.label} {mine / bound:,.0f} samples/s per {unit} against single's {theirs:,.0f}")
        elif mine and theirs and mine / theirs <= bound:
            warm.append(f"{s.label} {mine / theirs:.2f}x")
        elif s.label not in noise:
            unknown.append(s.label)
    if not rows:
        return None
    text = f"Speed-up above what the hardware can give (the excess is not parallelism): {'; '.join(rows)}."
    if noise:
        text += f" Noise is likely: one run of it or of single (use --repeats 3 or more): {join_and(noise)}."
    if weak:
        text += (" A weaker baseline is likely: in steady state (epochs 2..E) each worker, or each core the workers "
                 "shared, processed more samples per second than single did with the whole machine, so a sample costs "
                 f"the row less than single (another step implementation), not parallelism: {'; '.join(weak)}.")
    if warm:
        text += (" Single's one-off first-epoch warm-up is likely: in steady state (epochs 2..E) the speed-up is "
                 f"within the bound: {'; '.join(warm)}.")
    if unknown:
        text += f" The records show no cause for {join_and(unknown)}."
    return text
