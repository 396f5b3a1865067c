"""The headline under a report's table: which configuration leads, on which criterion.

One criterion ranks the configurations, the one :func:`distbench.results.advice.advise`
recommends by: the time to the target accuracy (MLPerf's rule), because it counts speed and
accuracy together. The most accurate configuration and the shortest training time follow
as facts, the training time labelled as secondary (it ignores accuracy, so a row far below
the target can have it). When no configuration reached the target nothing is ranked, as
``advise`` gives no advice then. In a straggler sweep the leaders are picked among the rows
without a slowed worker, and the sentences say so.

:func:`legend` and :func:`terminal_lines` are what ``distbench run`` and ``distbench report``
print after the terminal table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from distbench.results.notes import warmup_lead
from distbench.results.stats import (ConfigSummary, Leader, fastest_to_target, fastest_training, most_accurate,
                                    ranked_out)
from distbench.text import join_and, window_fix


@dataclass
class HardwareInfo:
    """One hardware key: its letter, key and a one-line description."""

    letter: str
    key: str
    description: str


@dataclass
class WorkloadInfo:
    """One workload key: its number, key and a one-line description."""

    label: str
    key: str
    description: str


@dataclass
class Headline:
    """The summary for one comparable group (hardware x workload): fastest configuration to
    the target, most accurate one (with its ties) and shortest training time."""

    hardware: HardwareInfo
    workload: WorkloadInfo
    fastest: Leader | None
    accurate: Leader | None
    sentences: list[str] = field(default_factory=list)
    quickest: Leader | None = None  # shortest training time, whatever the accuracy


def unslowed(s: ConfigSummary) -> bool:
    """True for a configuration without a slowed worker (outside a straggler sweep, or its 1x point)."""
    return s.straggler in ("", "1x")


def rankable(s: ConfigSummary) -> bool:
    """True for a configuration the ranking by time to target considers: unslowed, and
    without a flag of :data:`~distbench.results.stats.NOT_RANKED` (the rows
    :func:`~distbench.results.advice.advise` ranks)."""
    return unslowed(s) and ranked_out(s) is None


def make_headline(hw: HardwareInfo, wl: WorkloadInfo, subset: list[ConfigSummary], target: float | None,
                  data_multi: tuple[bool, bool]) -> Headline:
    """The headline of one (hardware, workload) group (see the module docstring).

    Args:
        hw, wl: the group's hardware and workload.
        subset: the group's configurations.
        target: the target test accuracy (fraction), or None.
        data_multi: whether the report merges several hardware keys and several workloads
            (then each sentence names the group).

    Returns:
        the :class:`Headline` with its sentences in reading order.
    """
    base = [s for s in subset if unslowed(s)]
    slowed = len(subset) - len(base)
    trained = [s for s in base if rankable(s)]  # helper-43/44: a collapsed row, one that committed once, named
    fast, acc = fastest_to_target(trained), most_accurate(trained)
    quick = fastest_training(trained)  # a diverged run may have stopped early; a collapsed one did not train
    h = Headline(hw, wl, fast, acc, quickest=quick)
    parts = ([f"hardware {hw.letter}"] if data_multi[0] else []) + ([f"workload {wl.label}"] if data_multi[1] else [])
    prefix = (", ".join(parts) + ": ") if parts else ""
    prefix = prefix[:1].upper() + prefix[1:]
    if slowed and base:
        h.sentences.append(f"{prefix}Leaders among the {len(base)} configuration{'s' if len(base) != 1 else ''} "
                           f"without a slowed worker; the {slowed} with one are judged against their 1x runs "
                           "(Stragglers).")
    if fast is not None:
        d = _distinct_digits(fast.value, fast.runner_up_value if fast.runner_up is not None else None)
        text = (f"{prefix}Fastest to {target} test accuracy (the ranking criterion, as in the recommendation): "
                f"{fast.summary.label}, {fast.value:.{d}f} s (MLPerf score over "
                f"{fast.summary.ttt.runs} run{'s' if fast.summary.ttt.runs != 1 else ''})")
        if fast.runner_up is not None and fast.runner_up_value:
            text += (f", {times_faster(fast.runner_up_value / fast.value, fast.runner_up.label)} "
                     f"({fast.runner_up_value:.{d}f} s)")
            warm = warmup_lead(fast.summary, fast.runner_up)  # user test (helper-35): keras_jax's "2.75x faster"
            if warm is not None:
                text += (f", but only through the one-off warm-up in the first epoch of {fast.runner_up.label} "
                         f"({warm[0]:.0%} of its training time): in steady state it trains an epoch in {warm[1]:.3g} s "
                         f"against {warm[2]:.3g} s, so this lead is start-up, not training (distbench advise)")
            text += _noise_note(fast)
        text += fewer_passes_note(fast.summary)
        h.sentences.append(text + ".")
    elif target is not None and any(s.ok for s in subset):
        h.sentences.append(f"{prefix}No configuration reached the target test accuracy {target}, so none is ranked "
                           "by time to target (distbench advise prints the run to make next).")
    if acc is not None:
        h.sentences.append(prefix + accuracy_sentence(acc, slowed > 0))
    if quick is not None and quick.runner_up is not None:
        h.sentences.append(prefix + _training_sentence(quick))
    once = _SINGLE_RUN_NOTE  # said once per group, after the first sentence that needs it
    for i, text in enumerate(h.sentences):
        if once in text and any(once in t for t in h.sentences[:i]):
            h.sentences[i] = text.replace(once, "")
    if quick is not None and quick.runner_up is not None and quick.summary.strategy == "single":
        # No distributed configuration trained faster than single: the first thing a reader
        # needs (the ranking by time to target can still name one that got there in fewer passes).
        h.sentences.insert(1 if slowed and base else 0, h.sentences.pop())
    named = {lead.summary.strategy for lead in (fast, acc) if lead is not None}
    ran = [s for s in subset if s.accuracy.median is not None]
    if ran and all({"collapsed", "diverged"} & set(s.flags) for s in ran):
        # comparisons among runs that do not train say nothing: only the cautions remain
        h.sentences = [f"{prefix}Caution: every configuration that ran collapsed or diverged: the workload's "
                       "settings do not train this model here (lower training.learning_rate, and [ps] learning_rate "
                       "or rho for the elastic optimizers; standardise features of large magnitude; or check the "
                       "data and the model), so no strategy is compared."]
    for s in subset:
        if "collapsed" in s.flags or "diverged" in s.flags:
            h.sentences.append(prefix + _collapse_sentence(s, subset, target, s.strategy in named))
        elif "committed once" in s.flags:
            h.sentences.append(prefix + committed_once_sentence(s))
    return h


def committed_once_sentence(s: ConfigSummary) -> str:
    """The caution on a row flagged ``committed once``: its window, the steps each replica
    took, and the window that commits every epoch."""
    d = next((r.get("details") or {} for r in s.records if r.get("status") == "ok"), {})
    steps, epochs = max(d.get("per_worker_steps") or [0]), next((r.get("epochs") for r in s.records), None)
    window = d.get("communication_window")
    acc = f" (median test accuracy {s.accuracy.median:.3f})" if s.accuracy.median is not None else ""
    return (f"Caution: {s.label} committed once{acc}: its communication window ({window} steps) is at "
            f"least the {steps} steps each replica took in the whole run, so each replica's only commit was at its "
            f"end and its curve has no epochs; it is not ranked, nor named most accurate or quickest ("
            + window_fix(steps, epochs) + ").")


def _names(summaries: Sequence[ConfigSummary]) -> str:
    """``a``, ``a and b``, ``a, b and c`` of the summaries' labels."""
    return join_and([s.label for s in summaries])


def accuracy_sentence(acc: Leader, among_unslowed: bool) -> str:
    """The accuracy sentence of a headline (and of advice that ranks nothing).

    Args:
        acc: :func:`~distbench.results.stats.most_accurate` of the configurations compared.
        among_unslowed: a straggler sweep, whose slowed rows are not counted (said so).

    Returns:
        when every configuration ties, that they tie (no configuration is named most
        accurate); else the most accurate one, every configuration tied with it and its
        margin over the next one, with the run-to-run noise caveat.
    """
    if acc.ties and acc.runner_up is None:
        which = "without a slowed worker" if among_unslowed else "that ran"
        count = "both" if len(acc.ties) == 1 else f"all {len(acc.ties) + 1}"
        low = f"{min(t.accuracy.median for t in acc.ties):.3f}"  # type: ignore[type-var]
        at = f"{acc.value:.3f}" if low == f"{acc.value:.3f}" else f"{low}-{acc.value:.3f}"
        return f"Accuracy: {count} configurations {which} tie at median test accuracy {at}."
    text = f"Most accurate: {acc.summary.label}, median test accuracy {acc.value:.3f}"
    s, n = acc.summary, acc.summary.workers
    if n > 1 and (s.strategy == "tf_ps" or s.strategy.startswith(("spark_ps:", "mpi_ps:"))):
        text += f" (from {n}x the optimizer steps of a synchronous run, each on 1/{n} of the global batch)"
    if acc.ties:
        text += f", tied with {_names(acc.ties)}"
    if acc.runner_up is not None and acc.runner_up_value is not None:
        points = 100 * (round(acc.value, 3) - round(acc.runner_up_value, 3))  # of the accuracies as printed
        text += f", {points:+.1f} points over {acc.runner_up.label} ({acc.runner_up_value:.3f})"
        text += _noise_note(acc)
    return text + "."


def _training_sentence(quick: Leader) -> str:
    """Shortest training time, labelled as secondary (it ignores accuracy); when ``single``
    has it, the sentence says that no distributed configuration trained faster (it then
    comes first in the headline)."""
    s = quick.summary
    below = ", below target" if "below target" in s.flags else ""
    label = "it ignores accuracy, so it ranks nothing" if s.strategy == "single" else "secondary: it ignores accuracy"
    d = _distinct_digits(quick.value, quick.runner_up_value)
    head = f"Training time alone ({label}): shortest {s.label}{below}, {quick.value:.{d}f} s"
    if s.strategy == "single" and quick.runner_up is not None:
        other = quick.runner_up
        versus = f" ({other.speedup:.2f}x single)" if other.speedup is not None else ""
        return (f"{head}; no distributed configuration trained faster here: the quickest, {other.label}, took "
                f"{quick.runner_up_value:.{d}f} s{versus}{_noise_note(quick)}.")
    warm = (f", made of {quick.runner_up.label}'s first-epoch warm-up" if warmup_lead(s, quick.runner_up) is not None
            else "")  # helper-35: a speed-up that is the other's warm-up, not training
    versus = f" ({s.speedup:.2f}x single{warm})" if s.speedup is not None else warm
    return f"{head}{versus}, then {quick.runner_up.label} at {quick.runner_up_value:.{d}f} s{_noise_note(quick)}."


def _collapse_sentence(s: ConfigSummary, subset: Sequence[ConfigSummary], target: float | None,
                       named: bool) -> str:
    """One sentence warning that ``s`` collapsed or diverged, with its staleness and the
    best configuration of the same strategy (``named``: that strategy leads a sentence above)."""
    how = "diverged" if "diverged" in s.flags else "collapsed"
    text = f"Caution: {s.label} {how}, median test accuracy {s.accuracy.median:.3f}"
    if target is not None:
        text += f" (target {target})"
    if s.staleness_median is not None:
        text += f", commit staleness median {s.staleness_median:g}, max {s.staleness_max}"
    if any((r.get("details") or {}).get("diverged") for r in s.records if r.get("status") == "ok"):
        text += (" (a replica's weights became NaN or inf, and the parameter server accepts only finite updates, "
                 "so training stopped there: the record's details.diverged)")
    others = sorted((o for o in subset if o is not s and o.strategy == s.strategy and o.accuracy.median is not None),
                    key=lambda o: -o.accuracy.median)  # type: ignore[operator]
    if others:
        text += f", while {others[0].label} reached {others[0].accuracy.median:.3f}"
    if named and others:
        text += f"; {s.strategy} leads above only in its other settings"
    return text + "."


_SINGLE_RUN_NOTE = "; from a single run, so run-to-run noise is unknown: use --repeats 3 or more before choosing"


def _distinct_digits(a: float, b: float | None, least: int = 2, most: int = 4) -> int:
    """Decimals (``least`` to ``most``) at which seconds ``a`` and ``b`` print differently, so a
    sentence never says "1.09x faster" between two times shown as the same 0.07 s."""
    d = least
    while b is not None and d < most and f"{a:.{d}f}" == f"{b:.{d}f}":
        d += 1
    return d


def times_faster(ratio: float, than: str, what: str = "") -> str:
    """``"1.23x faster{what} than {than}"``, or ``"level (within 0.5%){what} with {than}"``
    where the ratio would print as 1.00x."""
    if f"{ratio:.2f}" == "1.00":
        return f"level (within 0.5%){what} with {than}"
    return f"{ratio:.2f}x faster{what} than {than}"


def fewer_passes_note(s: ConfigSummary) -> str:
    """Why a configuration that trains slower than ``single`` can still reach the target
    first: it needs fewer passes over the data (e.g. a parameter-server optimizer whose
    replicas each train on their own shard), not faster training. Empty when it trains
    at least as fast as ``single`` or is ``single``."""
    if s.strategy == "single" or s.speedup is None or s.speedup >= 1:
        return ""
    return (f"; it gets there in fewer passes over the data, not by training faster: its whole training took "
            f"{1 / s.speedup:.2f}x single's time (speed-up {s.speedup:.2f}x)")


def _noise_note(lead: Any) -> str:
    """The caveat after a leader sentence: one run gives no spread; overlapping ranges mean noise."""
    if lead.summary.ok < 2:
        return _SINGLE_RUN_NOTE
    if lead.runner_up.ok < 2:
        return (f"; {lead.runner_up.label} has a single run, so run-to-run noise is unknown: use --repeats 3 or "
                "more before choosing")
    if lead.overlaps:
        return "; their ranges over repeats overlap, so the margin is within run-to-run noise"
    return ""


#: What each terminal-table column means, by its short header (the spread columns aside).
LEGEND = (("to target s", "to target: MLPerf rule"),
          ("speed-up", "speed-up: single's train s / the row's, same hardware"),
          ("eff.", "eff.: scaling efficiency (speed-up / workers)"),
          ("temporal", "temporal: Hermans' temporal efficiency (> 1: more accuracy sooner than single)"),
          ("stale", "stale: commit staleness median/max"))
SPREAD_COLUMNS = ("test acc", "train s", "samples/s")  # median [min-max] over repeats
TIMED = (("start-up s", "start-up s (spawn to the first training step: processes, framework, cluster)"),
         ("total s", "total s (spawn to the end of training)"))


def legend(headers: Sequence[str]) -> str:
    """The legend of a terminal table showing ``headers`` (short headers, see
    :data:`~distbench.results.report.SHORT_COLUMNS`): only the columns it shows.

    Args:
        headers: the headers printed (a table's columns, or every header in block layout).

    Returns:
        one paragraph; ``""`` when no column needs explaining.
    """
    spread = [h for h in SPREAD_COLUMNS if h in headers]
    parts = ([", ".join(spread) + ": median [min-max] over repeats"] if spread else []) + \
        [text for h, text in LEGEND if h in headers]
    text = "; ".join(parts) + ("." if parts else "")
    timed = [desc for h, desc in TIMED if h in headers]
    if timed:
        cols = " and ".join(timed)
        text += ((" " if text else "") + cols[:1].upper() + cols[1:] + (" are" if len(timed) > 1 else " is") +
                 " kept out of speed-up and time to target: a fixed cost per run that does not grow with the epochs.")
    return text


def terminal_lines(data: Any, run_dir: Any = None) -> list[str]:
    """The sentences printed under the terminal table, in order: the headline, the
    recommendation of :func:`~distbench.results.advice.advise` (one line, the same
    criterion), the straggler verdict, then the notes.

    Args:
        data: the :class:`~distbench.results.report.ReportData`.
        run_dir: the run directory, named in the ``distbench advise`` command (None: a merged
            report, whose runs advise reads one at a time).

    Returns:
        sentences, without bullets.
    """
    from distbench.results.stragglers import straggler_verdict

    out = [t for h in data.headlines for t in h.sentences]
    if data.advice is not None and data.advice.verdict != "unavailable":
        how = f"distbench advise {run_dir}" if run_dir else "distbench advise on one of the run directories"
        out.append(f"Recommendation ({how} for the reasons): "
                   f"{data.advice.headline}")
    verdict = straggler_verdict(data.stragglers, data.target)
    return out + ([verdict] if verdict else []) + list(data.notes)
