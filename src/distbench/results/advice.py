"""Which strategy to use, and why: the report's recommendation and ``distbench advise``.

From the measured rows (time to the target accuracy with its spread over repeats, final
accuracy, availability, straggler sweeps) and, for a described target cluster, the
first-order scaling model of :mod:`distbench.predict`, :func:`advise` names the
recommended strategy and the runner-up with the reasons as numbers, says when the data
cannot separate them, and lists what each candidate needs installed and running. It gives
no advice from fewer rows than it needs; it prints the exact ``distbench run`` command that
would measure them instead.

The verdicts (:attr:`Advice.verdict`):

- ``clear``: the fastest strategy to the target and the runner-up (the fastest other
  strategy) each have :data:`MIN_REPEATS` ok runs and their min-max ranges of time to
  target do not overlap;
- ``single``: as ``clear``, but the fastest is ``single``: the workload is too small for
  any distributed strategy to beat one device here; with ``runner_up`` ``None``, no
  distributed row was compared with it on time (each was unavailable, failed, timed out or
  stayed below the target), which is no measured win;
- ``overlap``: their ranges overlap: the margin is within run-to-run noise;
- ``too_few``: the leader or the runner-up has fewer than :data:`MIN_REPEATS` ok runs, or
  no ok ``single`` to compare the only strategy that reached the target with;
- ``warmup``: the leader trains slower than the runner-up in steady state and leads only
  because the runner-up's first epoch carries a one-off warm-up (:data:`WARMUP_SHARE` or
  more of its training time): more runs would not change that, more epochs would;
- ``no_target``: no configuration reached the target accuracy;
- ``unavailable``: no configuration ran (every row unavailable, failed or timed out).
"""

from __future__ import annotations

import math
import os
import re
import shlex
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from distbench.results.headline import accuracy_sentence, committed_once_sentence, fewer_passes_note, times_faster
from distbench.results.notes import warmup_lead, warmup_note, warmup_share
from distbench.results.stats import (RANK_TEST_MIN_RUNS, RANK_TEST_P, ConfigSummary, most_accurate, rank_test_p,
                                     ranked_out, separated, summarize)
from distbench.results.stragglers import straggler_lines
from distbench.text import duration_text, link_text, rate_text, seconds_text

MIN_REPEATS = 3  # ok runs of each candidate before advising (3 v 3 disjoint ranges: p = 0.1 by chance)
TF_ONLY = "single,mirrored,multi_worker_mirrored"  # strategies that need nothing but TensorFlow

_PREFIXES = {"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
LATENCY_UNLIKELY_S = 0.01
"""A target's per-message latency over this (10 ms, a wide-area network's; a datacentre's is
tens of microseconds) is warned about as likely a wrong unit."""
_TARGET_EXAMPLE = '"8 nodes x 4 GPUs, 25 Gbit/s" (or "16 workers, 10 GbE"; optional ", 50 us latency")'


@dataclass(frozen=True)
class Target:
    """The cluster the user means to train on (``--target``).

    Attributes:
        nodes: machines; per_node: workers (GPUs, devices) per machine.
        bandwidth_Bps: each link's bandwidth, bytes per second each way.
        latency_s: per-message latency, seconds.
        gpus: the text named GPUs (the measured compute here may be a CPU's).
        text: the description as given.
        emulated: the text said ``emulated``: the nodes are this machine's emulated hosts
            (``[cluster] emulate``), sharing its cores (latency 0 unless given: the emulation
            shapes the rate only).
        node_step_s: ``single``'s step at the run's global batch measured on one target node,
            seconds (``--node-step``); ``None``: a node computes like this machine.
    """

    nodes: int
    per_node: int
    bandwidth_Bps: float
    latency_s: float
    gpus: bool
    text: str
    emulated: bool = False
    node_step_s: float | None = None

    @property
    def devices(self) -> str:
        """What the text named its workers as, for sentences: ``TPUs`` or ``GPUs``
        (meaningful where :attr:`gpus`)."""
        return "TPUs" if re.search(r"\btpus?\b", self.text, re.IGNORECASE) else "GPUs"

    def warnings(self) -> list[str]:
        """Sentences about parts of the target that are legal but unlikely to be meant: a rate
        under 1 Mbit/s or over 1 Tbit/s, a latency over :data:`LATENCY_UNLIKELY_S`, a latency on an emulated
        cluster (which shapes the rate only), one emulated node, the ``--emulate`` form
        (``4x2@10gbit``) without ``emulated``. Empty when none applies."""
        bits, out = self.bandwidth_Bps * 8, []
        if self.gpus and self.devices == "TPUs":  # user test (helper-21)
            out.append("TPUs are predicted as GPUs: a device per worker, computing its share of the batch as "
                       "single did here; the model has no TPU interconnect")
        if self.emulated and self.gpus:  # user test (helper-17): dropped without a word
            out.append(f"an emulated cluster's hosts are this machine's CPUs: the {self.devices} named are not "
                       "emulated")
        if self.emulated and self.nodes == 1 and not self.gpus:  # user test (helper-24): dropped without a word
            out.append("one emulated host is this machine itself: 'emulated' changes nothing for one node")
        if math.isinf(bits):
            pass
        elif self.nodes == 1:  # user test (helper-20): "our 4-GPU cluster at 10gbit" dropped the rate silently
            out.append(f"one node has no network link between its workers: the {bits / 1e9:g} Gbit/s given is "
                       f"unused; for several nodes write \"N nodes x {self.per_node}\" with the rate")
        elif bits < 1e6:
            out.append(f"a link of {rate_text(bits)} is slower than any datacentre's: did you mean Mbit/s or "
                       "Gbit/s?")  # helper-24: 1 bit/s read "0.001 kbit/s"
        elif bits > 1e12:
            out.append(f"a link of {bits / 1e12:g} Tbit/s is faster than today's NICs (up to 0.8 Tbit/s): did you "
                       "mean Gbit/s?")
        if not self.emulated and re.match(r"\s*\d+\s*x\s*\d+\s*@\s*\d", self.text, re.IGNORECASE):
            out.append(f"{self.text.strip()!r} is the form of --emulate; read as a real cluster of dedicated nodes: "
                       f"to predict this machine's emulated cluster write \"{self.text.strip()}, emulated\"")
        if self.latency_s > LATENCY_UNLIKELY_S:  # user test (helper-43): 50 ms passed without a word
            out.append(f"a latency of {self.latency_s * 1e3:g} ms per message is a wide-area network's, over "
                       f"{self.latency_s / 50e-6:.0f}x a datacentre's (tens of microseconds): check its unit "
                       "(us, ms or s)")
        if self.emulated and self.latency_s > 0:
            out.append("an emulated cluster shapes the rate only (its latency is 0): the latency given is "
                       "predicted, but a run on the emulated cluster will not have it")
        return out

    def data(self) -> dict[str, Any]:
        """The target as read, as plain JSON: ``text``, ``nodes``, ``per_node``, ``workers``,
        ``bandwidth_Bps`` (bytes/s; ``null`` for one node, whose workers share no link),
        ``latency_s``, ``emulated``, ``gpus``."""
        return {"text": self.text, "nodes": self.nodes, "per_node": self.per_node, "workers": self.workers,
                "bandwidth_Bps": self.bandwidth_Bps if math.isfinite(self.bandwidth_Bps) and self.nodes > 1 else None,
                "latency_s": self.latency_s, "emulated": self.emulated,
                "gpus": self.gpus}

    def cluster(self, node_step_s: float | None = None) -> Any:
        """This target as the cost model's :class:`distbench.costmodel.Cluster` (``node_step_s``:
        instead of :attr:`node_step_s`)."""
        from distbench.costmodel import Cluster

        return Cluster(self.nodes, self.per_node, self.bandwidth_Bps, self.latency_s, self.emulated,
                       node_step_s if node_step_s is not None else self.node_step_s, self.gpus)

    @property
    def workers(self) -> int:
        """Workers in all: nodes x per node."""
        return self.nodes * self.per_node


_MACHINE = r"(?:(?:gpu|cpu|tpu)\s+)?(?:nodes?|machines?|hosts?|servers?|box(?:es)?)"
_COUNT_UNIT = r"(" + _MACHINE + r"|workers?|gpus?|devices?|replicas?|tpus?|cpus?|process(?:es)?|ranks?)"
_BANDWIDTH = (r"(\d+(?:\.\d+)?(?:e[+-]?\d+)?)\s*(?:(kilo|mega|giga|gig|tera|[kmgt])"
              r"(bits?/sec|bits?/s|bits?|bps|b/sec|b/s|bytes?/sec|bytes?/s|bytes?|be|ige|b)?"
              r"|(bits?/sec|bits?/s|bps|b/sec|b/s|bytes?/sec|bytes?/s))(?![a-z])")
_TARGET_PATTERNS = (  # (kind, pattern), scanned in this order over the whole text
    ("bandwidth", _BANDWIDTH),
    ("latency", r"(?:latency\s*(?:of|=|:)?\s*)?(\d+(?:\.\d+)?)\s*(us|µs|usecs?|microseconds?|ms|msecs?|"
                r"milliseconds?|s|secs?|seconds?)(?![a-z])"
                r"(?:\s+latency)?"),
    ("grid", r"(\d+)\s*(?:(?:nodes?|machines?|hosts?)\s*)?[x×*]\s*(\d+)(?:\s*-?\s*" + _COUNT_UNIT + r")?(?![a-z])"),
    ("count", r"(\d+)\s*-?\s*" + _COUNT_UNIT + r"(?![a-z])"),
)
_TARGET_FILLER = (r"[\s,;@/()]|\b(?:at|with|of|and|over|links?|network|each|per|node|machine|host|emulated|ethernet|"
                  r"connected|by|via|through|interconnect(?:ed)?|"
                  r"our|the|an?|cluster|in|total|nvlink|nvswitch|pcie|"
                  r"infiniband|ib|roce|rdma|[hfenq]dr|rtt|ping|second)\b")


def _bandwidth_Bps(m: re.Match[str]) -> float:
    """Bytes per second of a :data:`_BANDWIDTH` match. Bytes: ``byte``, or a capital B in
    ``GB/s``, ``MBps``, ``GB``; bits: ``bit``, ``Gb/s``, ``Gbps``, ``GbE``, ``10Gb``, ``25G``."""
    unit = m[3] or m[4] or "bit"
    in_bytes = "byte" in unit.lower() or (unit.lower() in ("bps", "b/s", "b") and unit[0] == "B")
    return float(m[1]) * (_PREFIXES[m[2][0].lower()] if m[2] else 1.0) / (1 if in_bytes else 8)


def parse_bandwidth(text: str) -> float | None:
    """A link rate with a unit as :func:`parse_target` reads it (``10gbit``, ``10 Gbit/s``,
    ``10Gbps``, ``10Gb``, ``10GbE``, ``25G``; ``1.25GB/s``, ``1.25 GByte/s``: a capital B is
    a byte), in bytes per second; ``None`` when ``text`` is not one of these forms."""
    m = re.fullmatch(_BANDWIDTH, text.strip(), re.IGNORECASE)
    return _bandwidth_Bps(m) if m else None


def parse_target(text: str, label: str = "--target ") -> Target:
    """Parse ``--target`` as people write it: ``"8 nodes x 4 GPUs, 25 Gbit/s"``,
    ``"4x8 GPUs @ 25 Gbit/s"``, ``"4 nodes 10gbit"``, ``"2 nodes x 1, 100 Mbit/s"``,
    ``"16 workers, 10 GbE"``, ``"2 nodes, 1 Gbit/s, 200 us latency"``. The size is
    ``N nodes x M`` (``M`` workers, GPUs or devices per node; ``NxM``; ``N nodes with M
    GPUs each``; ``M GPUs x N nodes``; ``T GPUs on N nodes``: ``T`` in all) or one count
    (``N nodes``/``N workers``: one worker per machine; ``N GPUs``/``N devices``: one
    machine; ``N GPU nodes``/``N servers``: one worker per machine), 2 workers or more.
    Bandwidth: a whole unit (``1e10 bit/s``, ``bps``, ``B/s``) or k, M, G or T, then
    bits (``bit/s``, ``bit``, ``b/s``, ``bps``, ``b``, ``bE``,
    ``igE`` or nothing: Gbit/s, 10gbit, Gb/s, Gbps, 10Gb, GbE, GigE, 25G) or bytes (``byte/s``,
    ``B/s``, ``Bps``, ``B``: GByte/s, GB/s, MBps, 10GB; a capital B is a byte, as in SI
    usage); ``/sec`` for ``/s``, ``gig`` for G. No bandwidth is needed for one node (its
    workers share no network link: ``inf``). Latency in us, ms or s (also ``usec``,
    ``microseconds``, ``msec``, ``milliseconds``), before or after the word ``latency``
    (default :data:`distbench.predict.DEFAULT_LATENCY_S`); a round-trip time (``RTT``,
    ``ping``) is halved into the one-way latency per message. A GPU's model before the word
    (``2 V100 GPUs``) is ignored. Commas, ``@``, ``at``, ``with`` and
    ``links`` between the parts are ignored. The word ``emulated`` marks a cluster emulated
    on this machine (``[cluster] emulate``; the hosts share its cores, latency 0 unless given).

    ``label`` starts the error message (``"target="`` from the Python API).

    Raises:
        ConfigError: naming the text, what was not understood and an example.
    """
    from distbench.config import ConfigError
    from distbench.predict import DEFAULT_LATENCY_S

    def bad(why: str) -> ConfigError:
        return ConfigError(f"{label}{text!r}: {why}; expected e.g. {_TARGET_EXAMPLE}")

    found, rest = _scan_target(text, bad)
    nodes, per_node, gpus = _target_size(found, rest, text, bad)
    for kind in ("bandwidth", "latency"):
        if len(found[kind]) > 1:
            raise bad(f"more than one {kind} given ({' and '.join(repr(m[0].strip()) for m in found[kind])})")
    if nodes < 1 or per_node < 1:  # helper-20: which part is wrong (helper-35: before a missing bandwidth)
        raise bad(f"read {nodes} node(s) x {per_node}: counts of nodes and workers are 1 or more")
    if not found["bandwidth"] and nodes != 1:
        raise bad("no bandwidth given")
    bandwidth = _bandwidth_Bps(found["bandwidth"][0]) if found["bandwidth"] else math.inf  # one node: no link
    emulated = re.search(r"\bemulated\b", text, re.IGNORECASE) is not None
    latency = 0.0 if emulated else DEFAULT_LATENCY_S
    if found["latency"]:
        lat = found["latency"][0]
        unit = lat[2].lower()
        latency = float(lat[1]) * (1e-6 if unit.startswith(("u", "µ", "mic")) else 1e-3 if unit.startswith("m")
                                   else 1.0)
        if re.search(r"\b(?:rtt|ping|round[- ]?trip)\b", text, re.IGNORECASE):  # helper-17: a round trip
            latency /= 2
    if found["bandwidth"] and not (math.isfinite(bandwidth) and bandwidth > 0):  # helper-20: 1e400 bit/s was inf
        raise bad(f"{found['bandwidth'][0][0].strip()!r}: a bandwidth is a finite number above 0")
    if nodes * per_node < 2:
        raise bad("one worker has nothing to distribute: give 2 or more workers (e.g. \"1 node x 4\" or "
                  "\"2 nodes, 10gbit\")")
    return Target(nodes, per_node, bandwidth, latency, gpus, text, emulated)


_GPU_MODEL = r"(?:[avhlbtpk]\d{1,4}[a-z]?|mi\d{3}x?|rtx\s*a?\d{4}|g[hb]\d{3})"
"""A GPU's model (A100, H100, V100, T4, L40S, MI300X, RTX 4090, GH200)."""

_GPU_MEMORY = r"(?:[\s-]*\d+\s*gb\b)?"
"""A GPU's memory after its model (``A100 80GB``): not a link rate (user test, helper-19: read as 80 GB/s)."""

_TARGET_REWRITES = (  # as people write them -> the forms the patterns read (user tests, helper-17/18/19)
    (r"\b(\d+)\s*[x×*]\s*" + _GPU_MODEL + r"s?\b" + _GPU_MEMORY + r"(?:\s+gpus?\b)?", r"\1 GPUs"),  # "8 x A100"
    (r"\b" + _GPU_MODEL + r"s?\b" + _GPU_MEMORY + r"(?:\s+gpus?\b)?", " GPUs"),  # "2 A100s", "2 V100 GPUs"
    (r"\b(\d+)\s+(\d+)\s*-\s*gpus?\s+(?:nodes?|servers?|machines?|hosts?|box(?:es)?)\b", r"\1 nodes x \2 GPUs"),
    (r"\b(?:(?:one|an?|1|single)\s+)?(\d+)\s*-\s*gpus?\s+(?:node|server|machine|host|box)\b",
     r"1 node x \1 GPUs"),  # "one 8-GPU server"; "our 4-GPU cluster" stays 4 GPUs on one machine
    (r"\b(?:one|a single|single)\s+(node|server|machine|host|box)\b", r"1 \1"),  # "a single node with 8 GPUs"
    (r"\b(two|three|four|five|six|seven|eight|nine|ten|twelve|sixteen)\b",  # "two nodes" (helper-20)
     lambda m: str(_NUMBER_WORDS[m[1].lower()])),
)
_NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
                 "twelve": 12, "sixteen": 16}


def _scan_target(text: str, bad: Any) -> tuple[dict[str, list[re.Match[str]]], str]:
    """The matches of each of :data:`_TARGET_PATTERNS` in ``text``, and the text left with
    them blanked out (``bad(why)`` makes the error to raise)."""
    if frac := re.search(r"\d+\.\d+\s*" + _COUNT_UNIT + r"(?![a-z])", text, re.IGNORECASE):
        raise bad(f"{frac[0]!r}: counts of nodes and workers are whole numbers")
    if frac := re.search(r"[\d\s][x×*]\s*(\d*\.\d+)(?!\d*\s*[a-zµ/])", text, re.IGNORECASE):  # helper-22: "'.5'"
        raise bad(f"{frac[1]!r} after x: counts of nodes and workers are whole numbers")
    if neg := re.search(r"(?<![\w.])-\s*\d+\s*" + _COUNT_UNIT + r"(?![a-z])", text, re.IGNORECASE):
        raise bad(f"{neg[0]!r}: counts of nodes and workers are 1 or more")  # user test (helper-18): "'-' is neither"
    rest = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)  # "1,000 Mbit/s"
    for pattern, to in _TARGET_REWRITES:
        rest = re.sub(pattern, to, rest, flags=re.IGNORECASE)
    found: dict[str, list[re.Match[str]]] = {}
    for kind, pattern in _TARGET_PATTERNS:
        found[kind] = list(re.finditer(pattern, rest, re.IGNORECASE))
        for m in found[kind]:  # blanked so that a later pattern cannot read it again
            if kind in ("bandwidth", "latency") and re.search(r"(?:^|[\s,;@:(])-\s*$", rest[:m.start()]):
                least = "above 0" if kind == "bandwidth" else "0 or more"  # helper-20: "'-' is neither"
                raise bad(f"'-{m[0].strip()}': a {kind} is {least}")
            rest = rest[:m.start()] + " " * (m.end() - m.start()) + rest[m.end():]
    return found, rest


_LEFTOVER_HINTS = (  # (a word left unread, what to write instead), first match wins (user tests, helper-21/22/23)
    (r"eleven|(?:thir|four|fif|six|seven|eigh|nine)teen|(?:twen|thir|for|fif|six|seven|eigh|nine)ty\w*",
     "; numbers in words go up to ten (and twelve, sixteen): write others in digits"),
    (r"ns|nsec|nanoseconds", "; a latency is in us, ms or s (1 us = 1000 ns)"),  # "5 ns" was told it had no unit
    (r"[\d.e+-]+", "; a rate or a latency needs its unit (10 Gbit/s, 50 us)"),
    (r"cores?|threads?|v?cpu-?cores?", "; count workers (processes), not cores: e.g. \"2 nodes x 4 workers\""),
    (r"emulat\w*|simulat\w*", "; for this machine's emulated cluster write the word 'emulated': \"4 nodes x 2, 10gbit, "
                              "emulated\""),  # helper-25: "emulate" got the generic reply
)


def _target_size(found: dict[str, list[re.Match[str]]], rest: str, text: str, bad: Any) -> tuple[int, int, bool]:
    """(nodes, workers per node, whether they are GPUs or TPUs) of a scanned target; raises
    ``bad(why)`` for text left over, no size, or more than one."""
    machines = [c for c in found["count"] if re.fullmatch(_MACHINE, c[2], re.IGNORECASE)]
    devices = [c for c in found["count"] if c not in machines]
    each = re.search(r"\b(?:each|per (?:node|machine|host)|of|with)\b", text, re.IGNORECASE) or (
        len(machines) == 1 and int(machines[0][1]) == 1)  # "1 server, 8 GPUs": one machine holds them
    spread = None  # "8 GPUs on 4 nodes": the devices in all, over the machines
    if len(machines) == 1 and len(devices) == 1 and devices[0].end() <= machines[0].start():
        between = re.fullmatch(r"\s*([x×*]|on|across|in|over)\s*", rest[devices[0].end():machines[0].start()],
                               re.IGNORECASE)  # "2 GPUs x 4 nodes": per node
        if between:
            each, rest = between, rest[:devices[0].end()] + " " * len(between[0]) + rest[machines[0].start():]
            spread = between[1].lower() not in "x×*"
    blanked = re.sub(_TARGET_FILLER, lambda f: " " * len(f[0]), rest, flags=re.IGNORECASE)  # same positions
    if left := blanked.split():  # user test (helper-21): a bare number or a number word, said what to change
        hint = next((h for pattern, h in _LEFTOVER_HINTS if any(re.fullmatch(pattern, w, re.IGNORECASE)
                                                                   for w in left)), "")
        words = list(re.finditer(r"\S+", blanked))  # quoted as written ('10 Gibit/s', not '10 Gibit s')
        said = " ".join(rest[words[0].start():words[-1].end()].split())
        raise bad(f"{said!r} is neither a size (N nodes x M GPUs), a bandwidth nor a latency{hint}")
    sizes = found["grid"] + found["count"]
    if not found["grid"] and len(machines) == 1 and len(devices) == 1 and each:  # "2 nodes ... with 4 GPUs each"
        sizes = [machines[0]]
    if len(sizes) > 1:  # user test (helper-15): say what was read, and how to write nodes with GPUs
        raise bad(f"more than one size given ({' and '.join(repr(m[0].strip()) for m in sizes)}); for nodes with "
                  "GPUs write \"N nodes x M GPUs\"")
    if not sizes:
        raise bad("no size given")
    (m,) = sizes
    accel = ("gpu", "tpu")
    if found["grid"]:
        if re.fullmatch(_MACHINE, m[3] or "", re.IGNORECASE):  # helper-17: "4 nodes x 2 nodes" was 4 x 2
            raise bad(f"{m[0].strip()!r}: the count after x is per node (workers, GPUs or devices), not machines")
        return int(m[1]), int(m[2]), (m[3] or "").lower().startswith(accel)
    if machines and devices and sizes == [machines[0]]:
        nodes, per_node = int(m[1]), int(devices[0][1])
        if spread:
            if nodes < 1 or per_node % nodes:
                raise bad(f"{devices[0][0].strip()!r} do not split evenly over {m[0].strip()!r}; write "
                          "\"N nodes x M GPUs\" with M per node")
            per_node //= nodes
        return nodes, per_node, devices[0][2].lower().startswith(accel)
    # "4 nodes", "16 workers": one worker per machine; "4 GPUs": one machine
    one_machine = m in devices and m[2].lower().startswith(("gpu", "device", "tpu"))
    nodes, per_node = (1, int(m[1])) if one_machine else (int(m[1]), 1)
    return nodes, per_node, m[2].lower().startswith(accel)


@dataclass
class Advice:
    """What :func:`advise` concluded (see the module docstring for the verdicts).

    Attributes:
        verdict: ``clear``, ``single``, ``overlap``, ``too_few``, ``no_target`` or ``unavailable``.
        recommended, runner_up: the two candidates' labels (``None`` where there is none,
            and no ``recommended`` unless the verdict is ``clear`` or ``single``).
        headline: one sentence stating the verdict.
        reasons: the evidence, as sentences with numbers.
        target: sentences about the ``--target`` cluster (predictions), if one was given.
        target_recommended: the strategy predicted fastest to the target accuracy on the
            ``--target`` cluster, with its window where the run swept windows
            (``mpi_ps:adag (window 8)``; ``None`` without one or without a prediction).
        target_predictions: the ``target`` block as data: ``target`` (the cluster as read,
            :meth:`Target.data`), ``strategies`` (per strategy its
            ``rank``, ``epoch_s``, ``time_to_target_s``, ``terms_s``, ``notes``, ``missing``, as
            ``distbench predict --target --json``), ``inputs`` (measured, assumed, the error
            band) and ``tied`` (the two leaders, where their predicted times to target are within
            :data:`PREDICTED_TIE` of each other; absent otherwise); empty without a prediction
            (serialised as ``null`` when a target was given, absent without one).
        target_refused: why the ``--target`` prediction was refused (the run has no
            distributed row, no ok ``single``, a calibration of another run, ...), else
            ``None``; ``distbench advise --target`` then exits 2 after printing the advice
            (serialised when a target was given).
        target_warnings: :meth:`Target.warnings` of the ``--target`` (parts of it legal but
            unlikely to be meant), said on stderr by the CLI and as ``UserWarning`` by
            :meth:`distbench.api.Results.advise` (serialised when a target was given).
        costs: ``(strategy, what it needs installed and running)`` for each candidate.
        unavailable: ``(strategy, reason)`` for each strategy that never ran here.
        next_command: the ``distbench run`` command that would measure what is missing.
        scope: which rows the advice used (hardware and workload), one sentence.
        compared: the leader and the runner-up (the rows the verdict compares; empty
            when no row reached the target); serialised as ``compared``, a list of
            ``{"strategy", "workers"}`` (for the ``overlap`` verdict, the two it cannot separate).
        short: those of them with fewer ok runs than advice needs (the verdict
            ``too_few``); not serialised.
    """

    verdict: str
    headline: str
    recommended: str | None = None
    runner_up: str | None = None
    reasons: list[str] = field(default_factory=list)
    target: list[str] = field(default_factory=list)
    costs: list[tuple[str, str]] = field(default_factory=list)
    unavailable: list[tuple[str, str]] = field(default_factory=list)
    next_command: str | None = None
    scope: str = ""
    target_recommended: str | None = None
    target_predictions: dict[str, Any] = field(default_factory=dict)
    target_refused: str | None = None
    target_warnings: list[str] = field(default_factory=list)
    compared: list[ConfigSummary] = field(default_factory=list, repr=False)
    short: list[ConfigSummary] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The advice as plain JSON (``summary.json``'s ``recommendation``)."""
        return {"verdict": self.verdict, "headline": self.headline, "recommended": self.recommended,
                "runner_up": self.runner_up, "reasons": self.reasons, "target": self.target,
                "costs": dict(self.costs), "unavailable": dict(self.unavailable), "next_command": self.next_command,
                "scope": self.scope, "target_recommended": self.target_recommended,
                "compared": [{"strategy": c.strategy, "workers": c.workers} for c in self.compared],
                **({"target_predictions": self.target_predictions or None, "target_refused": self.target_refused,
                    "target_warnings": self.target_warnings} if self.target else {})}

    def lines(self) -> list[tuple[str, list[str]]]:
        """``(heading, items)`` blocks in reading order (empty blocks left out)."""
        blocks = [("Why", self.reasons), ("Target", self.target),
                  ("Operational cost", [f"{s}: {n}" for s, n in self.costs]),
                  ("Not available here", [f"{s}: {r}" for s, r in self.unavailable]),
                  ("Run next", [self.next_command] if self.next_command else [])]
        return [(h, items) for h, items in blocks if items]

    def __str__(self) -> str:
        """:meth:`to_text` (``print(advice)``)."""
        return self.to_text()

    def to_text(self) -> str:
        """Plain text for the terminal (``distbench advise``)."""
        out = [self.headline] + ([self.scope] if self.scope else [])
        for head, items in self.lines():
            out.append(f"{head}:")
            out += [f"  {i}" if head == "Run next" else f"  - {i}" for i in items]
        return "\n".join(out)

    def to_markdown(self) -> list[str]:
        """Markdown lines for ``report.md``'s "Recommendation" section."""
        out = [f"**{self.headline}**", ""] + ([self.scope, ""] if self.scope else [])
        for head, items in self.lines():
            out += [f"{head}:", ""]
            out += (["```", *items, "```"] if head == "Run next" else [f"- {i}" for i in items]) + [""]
        return out


# ---------------------------------------------------------------------------- helpers

def _needs(strategy: str) -> str:
    from distbench.strategies import registry

    try:
        return registry.strategy_class(strategy).needs or "(not stated by the strategy)"
    except Exception:  # a record of a strategy not registered here
        return "(strategy not registered here)"


def _range(s: ConfigSummary, d: int = 2) -> str:
    t = s.time_to_target_s
    rng = f" [{t.min:.{d}f}-{t.max:.{d}f}]" if t.n > 1 and t.min != t.max else ""
    return f"{s.ttt.value:.{d}f} s{rng}"


def _ranges(a: ConfigSummary, b: ConfigSummary) -> str:
    """``a``'s and ``b``'s times to target, with the decimals (2 to 4) at which their values
    print apart: never "0.31 s vs 0.31 s" between two different times."""
    d = 2
    while d < 4 and f"{a.ttt.value:.{d}f}" == f"{b.ttt.value:.{d}f}":
        d += 1
    return f"{_range(a, d)} vs {_range(b, d)}"


def _runs(n: int) -> str:
    return f"{n} run{'s' if n != 1 else ''}"


def _overlap(a: ConfigSummary, b: ConfigSummary) -> bool:
    """``a`` and ``b`` cannot be told apart on time to target (:func:`~distbench.results.stats.separated`)."""
    x, y = a.time_to_target_s, b.time_to_target_s
    return None not in (x.min, x.max, y.min, y.max) and not separated(x, y)


def _baseline(s: ConfigSummary) -> bool:
    """A configuration without a straggler (outside a scenario sweep, or its 1x point)."""
    return s.straggler in ("", "1x")


def with_target(command: str, run_dir: str, target_accuracy: float, cluster: str | None = None) -> str:
    """``command`` (an advice's next ``distbench run``) for advice asked with another target
    accuracy than the recorded one: a new run takes it as a flag; a resumed run keeps its
    recorded target (``run`` refuses to change it), so ``distbench advise`` is asked again
    with this one afterwards.

    Args:
        command: the ``distbench run ...`` command.
        run_dir: the run directory the advice is about.
        target_accuracy: the test accuracy the advice was asked with, in (0, 1].
        cluster: the ``--target`` cluster text the advice was asked with, kept in that call.
    """
    if "--resume" in command:
        again = f" --target {shlex.quote(cluster)}" if cluster else ""
        return (f"{command} && distbench advise {shlex.quote(str(run_dir))} --target-accuracy "
                f"{target_accuracy:g}{again}")
    run, sep, rest = command.partition(" && ")  # "distbench run ... && distbench calibrate NEW": the run's flag
    return f"{run} --target-accuracy {target_accuracy:g}{sep}{rest}"


def keep_accuracy(adv: Advice, run_dir: str, target_accuracy: float | None, cluster: str | None = None) -> Advice:
    """``adv`` with its Run next (and ``target_predictions.run_next``'s command, where it is
    that command) keeping ``target_accuracy`` (:func:`with_target`), as ``distbench advise
    --target-accuracy`` and ``Results.advise(target_accuracy=)`` both print it (user test,
    helper-24: the API's lacked it). Unchanged when ``target_accuracy`` is None."""
    if target_accuracy is None:
        return adv
    # the advise and predict commands the Target lines name read the run at that accuracy too (helper-32: without
    # it, predict --against compared the emulated run at the recorded 0.97 and called it another workload)
    adv.target = [re.sub(r"(distbench (?:advise|predict) \S+(?: --target (?:'[^']*'|\S+))?(?: --against \S+)?)",
                         lambda m: f"{m[1]} --target-accuracy {target_accuracy:g}", line) for line in adv.target]
    if not adv.next_command:
        return adv
    run_next = (adv.target_predictions or {}).get("run_next") or {}
    same = run_next.get("command") == adv.next_command and run_next.get("command") is not None
    adv.next_command = with_target(adv.next_command, str(run_dir), target_accuracy, cluster)
    if same:
        run_next["command"] = adv.next_command
    return adv


def run_command(run_dir: str | None, *, out: str | None = None, resume: bool = False, **flags: Any) -> str:
    """The ``distbench run`` command continuing (or re-running) ``run_dir`` from its own
    ``config.json`` (``RUN_DIR`` when the directory is unknown), with ``flags`` as options."""
    d = run_dir or "RUN_DIR"
    argv = ["distbench", "run", str(Path(d) / "config.json"), "--out", out or d] + (["--resume"] if resume else [])
    for k, v in flags.items():
        if v is not None:
            argv += [f"--{k.replace('_', '-')}", str(v)]
    return shlex.join(argv)


def _group(summaries: Sequence[ConfigSummary]) -> tuple[list[ConfigSummary], str]:
    """The (hardware, workload) group with the most records, and a sentence naming it when
    there are several."""
    counts = Counter((s.hardware_key, s.workload_key) for s in summaries for _ in s.records)
    if not counts:
        return [], ""
    key = counts.most_common(1)[0][0]
    rows = [s for s in summaries if (s.hardware_key, s.workload_key) == key]
    scope = ""
    if len(counts) > 1:
        scope = (f"Advice from hardware {rows[0].hardware}, workload {rows[0].workload} ({counts[key]} records); "
                 f"{sum(counts.values()) - counts[key]} records of other hardware or workloads are left out.")
    return rows, scope


# ---------------------------------------------------------------------------- advice

CONTENDER_RATIO = 1.5
"""A row whose time to target is within this factor of the leader's is a contender while
runs are too few: single runs of the same configuration varied by more than that here."""
MAX_CONTENDERS = 5
"""At most this many contenders are asked to repeat (the leader's first)."""


def advise(records: list[dict[str, Any]], run_dir: str | Path | None = None, target: Target | None = None,
           min_repeats: int = MIN_REPEATS) -> Advice:
    """Advise which strategy to use from ``records`` (see the module docstring), and predict
    every strategy on ``target`` whatever the verdict (:func:`_advise` gives the verdict).
    Arguments, return value: as :func:`_advise`."""
    adv = _advise(records, run_dir, target, min_repeats)
    baseline = _baseline_missing(records)
    if run_dir is not None:
        baseline = baseline.replace("--out RUN_DIR", f"--out {shlex.quote(str(run_dir))}")
    if baseline and "single" not in dict(adv.unavailable):  # user test (helper-26): a failed single went unsaid
        adv.reasons.append(baseline)
    resumed = re.search(r"--resume .*--strategies (\S+)", adv.next_command or "")
    if baseline.startswith("This run has no single") and resumed and "single" not in resumed[1].split(","):
        # helper-32: the Why line asked for single, and Run next, followed, never measured it
        old = f"--strategies {resumed[1]}"
        adv.next_command = adv.next_command.replace(old, old + ",single", 1)
        cut = adv.reasons[-1].index("; distbench run --resume")
        adv.reasons[-1] = adv.reasons[-1][:cut] + "; Run next measures it."
    if baseline.startswith("The baseline single did not end ok here (") and "single" not in dict(adv.unavailable):
        _name_the_baseline_run(adv, baseline, None if run_dir is None else str(run_dir))
    if adv.verdict == "single":
        _only_single_ended_ok(adv, records, None if run_dir is None else str(run_dir))
    lead = adv.compared[0] if adv.compared and adv.verdict in ("clear", "single") else None
    if lead is not None and lead.ok < lead.repeats:  # helper-32: 4 of 7 runs crashed, said only in a Why line
        said = next((p for p in (f"Recommended: {lead.label}", f"Recommended: {lead.strategy}")
                     if adv.headline.startswith(p)), None)  # helper-33: after the runner-up, it read as the runner-up's
        if said:
            adv.headline = (f"{said} ({lead.repeats - lead.ok} of its {lead.repeats} runs did not end ok: see Why)"
                            + adv.headline[len(said):])
    if adv.verdict == "clear" and adv.runner_up is None and not any(
            r.get("strategy") == "single" and r.get("status") == "ok" for r in records):
        lead = adv.recommended  # user test (helper-29): a "clear winner" compared with nothing (no single)
        adv.verdict, adv.recommended = "too_few", None
        adv.headline = (f"No advice yet: {lead} is the only configuration that reached the target here, and there is "
                        "no ok single to compare it with.")
        if not any(r.get("strategy") == "single" for r in records):
            adv.next_command = (f"distbench run --resume --out {shlex.quote(str(run_dir or 'RUN_DIR'))} "
                                "--strategies single")
    adv.target_warnings = target.warnings() if target is not None else []  # helper-27: not in --json
    if target is not None and not adv.target:  # a verdict that returned early (no target reached, ...)
        _add_target(adv, target, None if run_dir is None else str(run_dir), records)
    _untaken_next(adv)
    if run_dir is not None and adv.next_command and "/config.json" in adv.next_command and Path(run_dir).is_dir() \
            and not (Path(run_dir) / "config.json").exists():  # helper-34: Run next named a file that is not there
        adv.reasons.append(f"{run_dir} has no config.json (the run's settings, which Run next reads): put the sweep's "
                           "own config file in its place in the command.")
    return adv


def _untaken_next(adv: Advice) -> None:
    """Where Run next writes a new run directory that already holds a run (an earlier Run
    next, followed; ``distbench run`` refuses it), write the next free one instead
    (:func:`~distbench.results.store.untaken`) and say which directory holds a run and the
    ``advise`` that reads it (user test, helper-29)."""
    from distbench.results.store import untaken

    argv = shlex.split(adv.next_command) if adv.next_command and "&&" not in adv.next_command else []
    if "--out" not in argv or "--resume" in argv:
        return
    i = argv.index("--out") + 1
    out = argv[i]
    argv[i] = untaken(out)
    if argv[i] != out:
        adv.next_command = shlex.join(argv)
        adv.reasons.append(f"{out} already holds a run (a Run next followed earlier?): distbench advise "
                           f"{shlex.quote(out)} reads it; Run next writes to {shlex.quote(argv[i])}.")


def _only_single_ended_ok(adv: Advice, records: list[dict[str, Any]], rd: str | None) -> None:
    """Where ``single`` leads because no distributed row ended ok (each failed or timed out),
    say so instead of "no distributed strategy beats one device" (user test, helper-28: every
    distributed row crashed, and the workload was called too small), and name the sweep of
    those strategies again into a new directory (a ``--resume`` keeps them as recorded); where
    the run has no distributed row at all, the ``--resume`` that adds some
    (:data:`~distbench.costmodel.CLUSTER_EXAMPLES`)."""
    multi = [r for r in records if r.get("strategy") != "single"]
    if any(r.get("status") == "ok" for r in multi):
        return
    bad = [r for r in multi if r.get("status") in ("failed", "timeout")]
    adv.reasons = [r for r in adv.reasons if "too small for extra workers" not in r
                   and not r.startswith("No distributed configuration reached")]
    if not multi:  # user test (helper-30): "no distributed strategy beats one device", and no Run next
        from distbench.costmodel import CLUSTER_EXAMPLES

        adv.headline = ("Recommended: single, the only strategy this run measured: no distributed strategy ran, so "
                        "none was compared with it.")
        adv.next_command = run_command(rd, resume=True, strategies=",".join(CLUSTER_EXAMPLES),
                                       repeats=_fewer_repeats(records))
        return
    if not bad:  # only unavailable ones (helper-29: "the workload is too small" though none ran)
        adv.headline = ("Recommended: single, the only configuration that ran here: every distributed strategy is "
                        "unavailable (Not available here), so none was compared with it.")
        return
    kinds = "/".join(sorted({r["status"] for r in bad}))
    adv.headline = ("Recommended: single, the only configuration that ended ok here: every distributed row "
                    f"{'failed' if kinds == 'failed' else 'timed out' if kinds == 'timeout' else 'failed or timed out'}"
                    ", so no distributed strategy was compared with it.")
    first = {}
    for r in bad:
        first.setdefault(r.get("strategy"), f"{r.get('status')}: {(r.get('reason') or '').split('; ')[0]}")
    adv.reasons.append("Not compared: " + "; ".join(f"{s} ({why})" for s, why in first.items()) + ". Fix what the "
                       "reasons name (`distbench env` shows what is found), then measure them again in a new run "
                       "directory (Run next; a --resume keeps recorded configurations as they are).")
    from distbench.predict import longer_timeout

    timeout = longer_timeout(rd).split()[-1] if "timeout" in kinds else None
    adv.next_command = run_command(rd, out=f"{rd or 'RUN_DIR'}-2", strategies=",".join(["single", *first]),
                                   timeout=timeout, repeats=_fewer_repeats(records))


def _fewer_repeats(records: list[dict[str, Any]]) -> int | None:
    """:data:`MIN_REPEATS` where the run had more repeats (a Run next that measures strategies
    for a first comparison needs no more: helper-32, 5 repeats of 21 configurations were
    inherited), else ``None`` (the run's own)."""
    had = max((int(r.get("repeat") or 0) + 1 for r in records), default=0)
    return MIN_REPEATS if had > MIN_REPEATS else None


def _name_the_baseline_run(adv: Advice, baseline: str, run_dir: str | None) -> None:
    """End the Why line of a ``single`` with no ok run (``baseline``, the last reason) with the
    run that measures it: the sweep again into a new directory (``advise`` compares the rows of
    one run directory, and a ``--resume`` keeps the failed ``single`` as recorded; helper-30:
    it said only "see report.md"), with 4x the ``--timeout`` where it timed out (helper-27:
    Run next gave it the same time again), or Run next itself where that runs ``single``."""
    from distbench.predict import longer_timeout
    from distbench.results.store import untaken

    timed_out = baseline.startswith("The baseline single did not end ok here (timeout")
    longer = longer_timeout(run_dir) if timed_out else ""
    runs_single = re.search(r"--strategies (?:\S+,)?single(?:,|\s|$)", adv.next_command or "")
    if longer and runs_single and "--timeout" not in adv.next_command:  # helper-28: not into a command without it
        adv.next_command = re.sub(r"(distbench run \S+)", lambda m: m[1] + longer, adv.next_command, count=1)
    rd = shlex.quote(run_dir) if run_dir is not None else "RUN_DIR"
    again = shlex.quote(untaken(run_dir + "-again")) if run_dir is not None else "RUN_DIR-again"
    adv.reasons[-1] = baseline[:-1] + ("; give it longer: " if timed_out else "; once that is fixed, ") + (
        f"Run next does ({longer.strip()})." if longer and adv.next_command and longer in adv.next_command else
        f"distbench run {rd}/config.json{longer} --out {again} measures it with the rest of the sweep (advise compares "
        "the rows of one run directory, and a --resume keeps this single as recorded).")


def _baseline_missing(records: list[dict[str, Any]]) -> str:
    """A sentence when ``single`` was run but never ended ok (its last status and reason):
    no speed-up or scaling efficiency can be computed, and ``--target`` cannot predict;
    ``""`` otherwise."""
    singles = [r for r in records if r.get("strategy") == "single"]
    if not singles and records:  # user test (helper-28): a run without single said nothing of it
        return ("This run has no single, the baseline: no speed-up or scaling efficiency is computed, and --target "
                "cannot predict; distbench run --resume --out RUN_DIR --strategies single measures it.")
    if not singles or any(r.get("status") == "ok" for r in singles):
        return ""
    last = singles[-1]
    why = (last.get("reason") or "").split("; ")[0]
    return (f"The baseline single did not end ok here ({last.get('status')}{': ' + why if why else ''}): no speed-up "
            "or scaling efficiency is computed, and --target cannot predict (report.md's \"Not run or failed\" has "
            "each reason).")


def _advise(records: list[dict[str, Any]], run_dir: str | Path | None = None, target: Target | None = None,
            min_repeats: int = MIN_REPEATS) -> Advice:
    """Advise which strategy to use from ``records`` (see the module docstring).

    Args:
        records: the records of a run (``results.jsonl``), possibly merged.
        run_dir: the run directory (for the commands it prints and for ``target``'s
            prediction, which reads ``single``'s step time there); ``None``: unknown.
        target: the cluster to extrapolate to (:func:`parse_target`), or ``None``.
        min_repeats: ok runs each candidate needs before advice is given.

    Returns:
        the :class:`Advice`.
    """
    rd = str(run_dir) if run_dir is not None else None
    rows, scope = _group(summarize(records))
    if not rows:
        return Advice("unavailable", "No records: nothing to advise from.",
                      next_command=run_command(rd, resume=True) if rd else "distbench run")
    unavailable = [(s.strategy, s.reasons[0] if s.reasons else "") for s in rows
                   if not s.ok and set(s.statuses) == {"unavailable"}]
    unavailable = list(dict((k, v) for k, v in unavailable).items())
    ok = [s for s in rows if s.ok]
    if not ok:
        return _nothing_ran(rows, unavailable, scope, rd)
    target_acc = next((r.get("target_accuracy") for s in ok for r in s.records if r.get("target_accuracy")), None)
    base = [s for s in ok if _baseline(s) and ranked_out(s) is None]
    reached = sorted((s for s in base if s.ttt.value is not None), key=lambda s: s.ttt.value)  # type: ignore[arg-type]
    best: dict[str, ConfigSummary] = {}
    for s in reached:
        best.setdefault(s.strategy, s)
    ranked = list(best.values())
    if not ranked:
        return _not_ranked(ok, unavailable, scope, rd, target_acc)
    lead = ranked[0]
    second = ranked[1] if len(ranked) > 1 else None
    adv = Advice("clear", "", unavailable=unavailable, scope=scope)
    names = [lead.strategy] + ([second.strategy] if second else [])
    single = next((s for s in base if s.strategy == "single"), None)
    adv.compared = [lead, second] if second else [lead]
    _evidence(adv, ok, lead, second, single, target_acc, rd)
    _verdict(adv, ranked, single, target_acc, rd, min_repeats, target is not None)
    baseline = ["single"] if any(s.strategy == "single" for s in rows) else []  # helper-30: a run without it
    adv.costs = [(n, _needs(n)) for n in dict.fromkeys(names + baseline)]
    if target is not None:
        _add_target(adv, target, rd, records)  # adds the target's leaders to the costs
    return adv


def _nothing_ran(rows: list[ConfigSummary], unavailable: list[tuple[str, str]], scope: str,
                 rd: str | None) -> Advice:
    """The advice when no configuration ran ok: the reasons, and the strategies that need only TensorFlow."""
    statuses = {st for s in rows for st in s.statuses}
    kinds = "/".join(sorted(statuses))
    ran = "ran" if statuses == {"unavailable"} else "ended ok"  # user test (helper-28): they ran, and timed out
    adv = Advice("unavailable", f"No advice: no configuration {ran} here (every row is {kinds}).",
                 unavailable=unavailable, scope=scope)
    failed = [s for s in rows if set(s.statuses) - {"unavailable"}]
    adv.reasons = [f"{s.label}: {', '.join(sorted(set(s.statuses)))}: {s.reasons[0] if s.reasons else ''}"
                   for s in failed]
    swept = ",".join(dict.fromkeys(s.strategy for s in rows))
    if statuses == {"timeout"}:  # user test (helper-28): the sweep was swapped for TF_ONLY, at the same limit
        from distbench.predict import longer_timeout

        adv.reasons.append("Every row ran past the run's per-configuration time limit: measure again with 4x the "
                           "limit in a new run directory (Run next; a --resume keeps recorded configurations as "
                           "they are), or with fewer --epochs.")
        adv.next_command = run_command(rd, out=f"{rd or 'RUN_DIR'}-2", strategies=swept,
                                       timeout=longer_timeout(rd).split()[-1])
        return adv
    if statuses & {"failed", "timeout"} and not all("--device cpu" in r for s in rows for r in s.reasons):
        from distbench.predict import longer_timeout  # helper-29: what ran is measured again as swept, not TF-only

        adv.reasons.append("Fix what the reasons name (`distbench env` shows what is found), then measure the same "
                           "strategies again in a new run directory (Run next: a --resume keeps recorded "
                           "configurations as they are" + ("; 4x the time limit for those that timed out)."
                                                           if "timeout" in statuses else ")."))
        adv.next_command = run_command(rd, out=f"{rd or 'RUN_DIR'}-2", strategies=swept,
                                       timeout=longer_timeout(rd).split()[-1] if "timeout" in statuses else None)
        return adv
    adv.costs = [(n, _needs(n)) for n in TF_ONLY.split(",")]
    if all("--device cpu" in r for s in rows for r in s.reasons):  # GPUs its frameworks cannot use
        adv.reasons.append("Every row was refused for GPUs its framework cannot use: install what the reason names, "
                           "or measure on the CPU in a new run directory (Run next).")
        adv.next_command = run_command(rd, out=f"{rd or 'RUN_DIR'}-cpu", device="cpu",
                                       strategies=",".join(dict.fromkeys(s.strategy for s in rows)))
        return adv
    if {s.strategy for s in rows} & set(TF_ONLY.split(",")):  # a --resume keeps them as recorded
        adv.reasons.append("Fix what the reasons name (`distbench env` shows what is found), then measure again "
                           "in a new run directory (Run next): a --resume keeps recorded configurations as they are.")
        adv.next_command = run_command(rd, out=f"{rd or 'RUN_DIR'}-2", strategies=TF_ONLY)
    else:
        adv.reasons.append("Install what the reasons name (`distbench env` lists what is found), or measure the "
                           "strategies that need nothing but TensorFlow first.")
        adv.next_command = run_command(rd, resume=True, strategies=TF_ONLY)
    return adv


def _not_ranked(ok: list[ConfigSummary], unavailable: list[tuple[str, str]], scope: str, rd: str | None,
                target_acc: float | None) -> Advice:
    """The advice when no usable configuration reached the target: every one collapsed or
    diverged (the settings must change), only rows that committed once did (the window must
    change), or none reached it (train longer, or a lower target)."""
    if not [s for s in ok if not {"collapsed", "diverged"} & set(s.flags)]:
        # more epochs will not help a workload that does not train: its settings must change
        adv = Advice("no_target", "No advice: every configuration that ran collapsed or diverged, so the "
                     "workload's settings do not train this model here.", unavailable=unavailable, scope=scope)
        adv.reasons = [f"{s.label}: {'diverged' if 'diverged' in s.flags else 'collapsed'}, median test accuracy "
                       f"{s.accuracy.median:.3f}." for s in ok if s.accuracy.median is not None]
        adv.reasons.append("Lower training.learning_rate (or check the data and the model) and run again; "
                           "comparing strategies needs a workload that trains.")
        return adv
    once = [s for s in ok if "committed once" in s.flags and s.ttt.value is not None]
    if once:  # user test (helper-43): it reached the target, but not through anything an epoch can show
        adv = Advice("no_target", f"No advice: the only configurations that reached the target test accuracy "
                     f"{target_acc} committed once, at the end of the run, so there is no curve to compare.",
                     unavailable=unavailable, scope=scope)
        adv.reasons = [committed_once_sentence(s) for s in once]
        adv.reasons.append("Set [ps] communication_window (or windows) in the run's config.json to the window "
                           "named above and run again.")
        return adv
    epochs = next((r.get("epochs") for s in ok for r in s.records if r.get("epochs")), None)
    top = most_accurate([s for s in ok if ranked_out(s) is None] or ok)  # (its ties: when all tie, none is named)
    # (helper-44: a row that committed once set the --target-accuracy suggested, which advise then refused)
    some = [s.label for s in ok if any(r.get("time_to_target_s") is not None for r in s.records)]
    partly = (f" in every run (some runs of {', '.join(some)} did; a time to accuracy needs all of a "
              "configuration's runs to reach it)") if some else ""  # user test (helper-18): "no configuration"
    adv = Advice("no_target", f"No advice: no configuration reached the target test accuracy {target_acc}{partly}, "
                 "so there is no time to accuracy to compare.", unavailable=unavailable, scope=scope)
    adv.reasons = [accuracy_sentence(top, False)] if top else []
    reach = _reached_by_all(top.summary, float(target_acc)) if top and target_acc else 0.0
    flat = _flattened(top.summary, float(target_acc)) if top and target_acc else None
    if reach > 0 and flat:  # helper-34: twice the epochs, then twice again, on a curve flat at 0.969
        adv.reasons.append(f"Its curve has flattened (best test accuracy, median over its runs, {flat[0]:.3f} in the "
                           f"first half of the epochs and {flat[1]:.3f} in the second): twice the epochs would not "
                           f"reach {target_acc}, so there is no Run next; compare at a target the runs reach: "
                           f"distbench advise {shlex.quote(rd or 'RUN_DIR')} --target-accuracy {reach:.2f}.")
        return adv
    if reach > 0 and (epochs or 0) > 1:  # more epochs do not help a model that has plateaued below the target
        # (helper-45: after 1 epoch, "its curve has flattened" cannot be judged; Run next trains longer)
        adv.reasons.append(f"If that is what this model and data reach (its curve has flattened), compare at a "
                           f"target the runs reach: distbench advise {shlex.quote(rd or 'RUN_DIR')} "
                           f"--target-accuracy {reach:.2f}; else train longer (Run next).")
    more = (2 * epochs if epochs > 1 else ONE_EPOCH_NEXT) if epochs else None  # helper-46: 2 after 1
    law = _power_law_epochs(top.summary, float(target_acc)) if top and target_acc and more else None
    if law is not None and more is not None:  # helper-35: twice 3 epochs at 0.911 did not reach 0.97 either
        t1, e1, t2, e2, need = law
        more = max(more, min(MAX_EPOCH_FACTOR * (epochs or 0), math.ceil(1.25 * need)))
        adv.reasons.append(f"Its test error, read as a power law in the epochs ({e1:.3f} after {t1}, {e2:.3f} after "
                           f"{t2}, median over its runs), falls to {1 - float(target_acc):.3f} after about "
                           f"{need:.0f} epochs: Run next trains {more}"
                           + (f" (at most {MAX_EPOCH_FACTOR}x this run's)" if more < 1.25 * need else "") + ".")
    adv.next_command = (run_command(rd, out=f"{rd or 'RUN_DIR'}-e{more}", epochs=more) if more else None)
    return adv


MAX_EPOCH_FACTOR = 8
ONE_EPOCH_NEXT = 5
"""The epochs a ``no_target`` Run next trains after a 1-epoch run: as the warm-up note asks
(``--epochs 5 or more``; user test, helper-46: 2 reached the target neither)."""
"""The most a ``no_target`` Run next multiplies the run's epochs by."""


def _reached_by_all(c: ConfigSummary, target: float) -> float:
    """The highest accuracy of two decimals, under ``target``, that every ok run of ``c``
    reached at some epoch (0.0 when none): the target a ``no_target`` advice suggests (user
    test, helper-39: the median final accuracy rounded suggested 0.80 for a run whose target
    was 0.8, which advise then refused again)."""
    best = [max((p["test_accuracy"] for p in r.get("curve") or [] if p.get("test_accuracy") is not None),
                default=r.get("final_test_accuracy") or 0.0) for r in c.records if r.get("status") == "ok"]
    under = math.ceil(100 * target - 1e-9) / 100 - 0.01  # the largest two-decimal value under the target
    return min(math.floor(100 * min(best)) / 100, under) if best else 0.0


def _power_law_epochs(c: ConfigSummary, target: float) -> tuple[int, float, int, float, float] | None:
    """Epochs for ``c`` to reach ``target``, extrapolating its test error as a power law in the
    epochs, ``err(t) = err(t2) (t / t2)^-a``, through the best error by epoch ``t1`` (half the
    epochs) and by ``t2`` (all of them), medians over ``c``'s ok runs of 2 or more epochs.

    Source: learning curves in the number of samples seen follow a power law (J. Hestness et
    al., "Deep Learning Scaling is Predictable, Empirically", arXiv:1712.00409, 2017, eq. 1,
    ``eps(m) = alpha m^beta_g``); at a fixed data set an epoch count is that ``m``.

    Returns:
        ``(t1, err1, t2, err2, epochs)``, or None where the error did not fall (``a`` under
        0.05) or the runs are too short.
    """
    pairs = []
    for r in c.records:
        accs = [p["test_accuracy"] for p in r.get("curve") or [] if p.get("test_accuracy") is not None]
        if r.get("status") == "ok" and len(accs) >= 2:
            pairs.append((len(accs) // 2, 1 - max(accs[:len(accs) // 2]), len(accs), 1 - max(accs)))
    if not pairs:
        return None
    t1, t2 = statistics.median_low(p[0] for p in pairs), statistics.median_low(p[2] for p in pairs)
    e1, e2 = statistics.median(p[1] for p in pairs), statistics.median(p[3] for p in pairs)
    if not (0 < e2 < e1 and t2 > t1 and 0 < 1 - target < e2):
        return None
    a = math.log(e1 / e2) / math.log(t2 / t1)
    if a < 0.05:
        return None
    return t1, e1, t2, e2, t2 * (e2 / (1 - target)) ** (1 / a)


def _flattened(c: ConfigSummary, target: float) -> tuple[float, float] | None:
    """``(best test accuracy in the first half of the epochs, in the second)``, medians over
    ``c``'s ok runs of 4 or more epochs, where twice the epochs will not reach ``target``: the
    second half gained ``g`` on the first, and a curve that flattens gains at most ``2 g`` over
    as many epochs again as the whole run, under the gap left to ``target``; else None."""
    halves = []
    for r in c.records:
        accs = [p["test_accuracy"] for p in r.get("curve") or [] if p.get("test_accuracy") is not None]
        if r.get("status") == "ok" and len(accs) >= 4:
            halves.append((max(accs[:len(accs) // 2]), max(accs[len(accs) // 2:])))
    if not halves:
        return None
    first, second = statistics.median(h[0] for h in halves), statistics.median(h[1] for h in halves)
    return (first, second) if target - second > 2 * max(0.0, second - first) else None


def _evidence(adv: Advice, ok: list[ConfigSummary], lead: ConfigSummary, second: ConfigSummary | None,
              single: ConfigSummary | None, target_acc: float | None, rd: str | None) -> None:
    """Append the reasons behind the verdict to ``adv.reasons``: the leader against the
    runner-up and against ``single``, stragglers, warm-up, rows left out."""
    names = [lead.strategy] + ([second.strategy] if second else [])
    if second is None:
        adv.reasons.append(f"Only {lead.label} reached the target test accuracy {target_acc} "
                           f"({_range(lead)}, {_runs(lead.ok)}).")
    else:
        faster = times_faster(second.ttt.value / lead.ttt.value, second.label, f" to {target_acc}")  # type: ignore
        adv.reasons.append(f"{lead.label}: {faster} "
                           f"({_ranges(lead, second)}; {_runs(lead.ok)} and {_runs(second.ok)}).")
        x, y = lead.time_to_target_s, second.time_to_target_s
        p = rank_test_p(x, y) if x.min <= y.max and y.min <= x.max else None  # type: ignore[operator]
        if p is not None and p < RANK_TEST_P:  # ranges that overlap, told apart by rank (helper-32)
            adv.reasons.append(f"Their ranges overlap, but over {_runs(x.n)} and {_runs(y.n)} the Mann-Whitney U test "
                               f"tells them apart (two-sided p = {p:.3f}).")
        acc_l, acc_s = lead.accuracy.median, second.accuracy.median
        if acc_l is not None and acc_s is not None:  # the difference of the figures shown (helper-16: 0.956
            acc_l, acc_s = round(acc_l, 3), round(acc_s, 3)  # against 0.958 was -0.3 points)
            adv.reasons.append(f"Final test accuracy: {lead.strategy} {acc_l:.3f}, {second.strategy} {acc_s:.3f} "
                               f"({100 * (acc_l - acc_s):+.1f} points).")
    if single is not None and "single" not in names and single.ttt.value:  # (else said above)
        noise = "; their ranges overlap: within run-to-run noise" if _overlap(lead, single) else ""
        adv.reasons.append(f"Against one device: {lead.strategy} reaches {target_acc} "
                           f"{single.ttt.value / lead.ttt.value:.2f}x as fast as single ({_range(single)})"
                           f"{noise}{fewer_passes_note(lead)}.")
    adv.reasons += _straggler_reasons(ok, names, target_acc)
    warm = warmup_note([r for c in ([lead, second] if second else [lead]) + ([single] if single else [])
                        for r in c.records], run_dir=rd)
    if warm:  # the report's caveat, kept with the verdict it qualifies
        adv.reasons.append(warm)
    for c in [lead] + ([second] if second else []):  # helper-33: "5 runs" quoted, 4 reached, and it fell back
        fell = c.accuracy.median is not None and target_acc is not None and c.accuracy.median < target_acc
        if c.ttt.reached < c.ttt.runs or fell:
            adv.reasons.append(
                f"{c.label} reached {target_acc} in {c.ttt.reached} of its {c.ttt.runs} ok runs"
                + (" (MLPerf's rule drops one run that did not)" if c.ttt.reached < c.ttt.runs else "")
                + (f"; its final test accuracy, median {c.accuracy.median:.3f}, is under the target: it reached it "
                   "and fell back (the report flags it below target)" if fell else "") + ".")
    shaky = [c for i, c in enumerate([lead, second, single]) if c is not None and c.ok < c.repeats
             and all(c is not d for d in [lead, second][:i])]
    if shaky:  # user test (helper-29): a candidate's failed repeats went unsaid (only counted by --repeats)
        adv.reasons.append("Not every run ended ok: " + "; ".join(
            f"{c.label}: {c.repeats - c.ok} of {c.repeats} runs "
            f"{' or '.join(_ENDED.get(x, x) for x in sorted(set(c.statuses) - {'ok'}))}"
            f" ({(c.reasons[0] if c.reasons else '').split('; ')[0]})"
            for c in shaky) + " (report.md's \"Not run or failed\" has each); the figures above are from the ok "
            "runs.")
    left_out = [s for s in ok if _baseline(s) and s.ttt.value is not None and ranked_out(s)]
    if left_out:  # reached the target, but a run that diverged, collapsed or committed once is no candidate
        adv.reasons.append("Left out although they reached the target: " + "; ".join(
            f"{s.label} ({ranked_out(s)}, the report's Caution says why)" for s in left_out) + ".")


_ENDED = {"failed": "failed", "timeout": "timed out", "unavailable": "were unavailable"}
"""A non-ok status as the runs' verb (``3 of 5 runs failed``)."""


def _warmup_next(adv: Advice, lead: ConfigSummary, second: ConfigSummary, rd: str | None) -> None:
    """The ``warmup`` verdict's Why line and Run next: from how many epochs ``second`` finishes
    training first counting each one's warm-up (:func:`_crossover`), and a run of 1.5 times
    that (at least 4x the run's epochs, at most :data:`MAX_RUN_NEXT_EPOCHS`; user test,
    helper-31: it ran 4x the epochs while the warm-up note beside it said more epochs would not
    wash the warm-up out)."""
    epochs = next((r.get("epochs") for r in lead.records if r.get("epochs")), None)
    cross = _crossover(lead, second)
    more = max(4 * epochs, math.ceil(1.5 * cross)) if epochs and cross else 4 * epochs if epochs else None
    if cross:
        adv.reasons = [r for r in adv.reasons if not r.startswith("Warm-up:")]
        adv.reasons.append(f"Counting each one's one-off warm-up, {second.label} finishes training first from about "
                           f"{math.ceil(cross)} epochs on (a training that long, or a target reached after that many "
                           f"epochs); below that, {lead.label}.")
    if more and more > MAX_RUN_NEXT_EPOCHS:
        adv.reasons.append(f"No Run next: measuring past that point takes over {MAX_RUN_NEXT_EPOCHS} epochs; the "
                           "steady-state epochs above decide for a long training.")
        more = None
    # the two compared (and single, the baseline), not the whole sweep at that length (helper-34: 110 configurations)
    names = ",".join(dict.fromkeys([lead.strategy, second.strategy, "single"]))
    counts = ",".join(str(w) for w in sorted({c.workers for c in (lead, second) if c.workers > 1}))
    adv.next_command = run_command(rd, out=f"{rd or 'RUN_DIR'}-e{more}", epochs=more, strategies=names,
                                   workers=counts or None) if more else None


MAX_RUN_NEXT_EPOCHS = 1000
"""The most epochs the ``warmup`` verdict's Run next trains."""


def _crossover(lead: ConfigSummary, second: ConfigSummary) -> float | None:
    """Epochs of training from which ``second`` (faster per epoch in steady state) finishes
    first although ``lead`` carries less first-epoch warm-up: ``(w2 - w1) / (e1 - e2)`` from
    the medians of each one's warm-up ``w`` (first epoch minus a later one, seconds) and
    later epoch ``e`` (seconds); ``None`` where ``second`` has no more warm-up."""
    def medians(c: ConfigSummary) -> tuple[float, float] | None:
        found = [w for r in c.records if r.get("status") == "ok" for w in [warmup_share(r)] if w is not None]
        if not found:
            return None
        return statistics.median(max(0.0, w[1] - w[2]) for w in found), statistics.median(w[2] for w in found)

    a, b = medians(lead), medians(second)
    if a is None or b is None or not (b[0] > a[0] and a[1] > b[1]):
        return None
    return (b[0] - a[0]) / (a[1] - b[1])


OVERLAP_MAX_RUNS = 15
"""Ok runs of each of two configurations that still cannot be told apart, after which advise
asks for no more: they are equally fast within noise there."""


def _warmup_lead(lead: ConfigSummary, second: ConfigSummary | None) -> str | None:
    """The ``warmup`` verdict's headline when ``lead`` leads only through ``second``'s
    first-epoch warm-up (:func:`~distbench.results.notes.warmup_lead`); else None."""
    w = warmup_lead(lead, second)
    if w is None or second is None:
        return None
    return (f"No advice yet: {lead.label} reaches the target first only because the first epoch of "
            f"{second.label} carries a one-off warm-up ({w[0]:.0%} of its training time); in steady state "
            f"{second.label} trains an epoch in {w[1]:.3g} s against {w[2]:.3g} s. Compare on a run where "
            "training outweighs start-up costs: more epochs (Run next), a larger model or more data.")


def _verdict(adv: Advice, ranked: list[ConfigSummary], single: ConfigSummary | None, target_acc: float | None,
             rd: str | None, min_repeats: int, has_target: bool) -> None:
    """Set ``adv``'s verdict, headline, recommendation and next command: too few runs,
    overlapping leaders, ``single``, or a clear winner."""
    lead, second = ranked[0], ranked[1] if len(ranked) > 1 else None
    names = [lead.strategy] + ([second.strategy] if second else [])
    few = adv.short = [s for s in adv.compared if s.ok < min_repeats]
    warm = _warmup_lead(lead, second)
    if warm:
        adv.verdict, adv.short = "warmup", []
        adv.headline = warm
        _warmup_next(adv, lead, second, rd)  # type: ignore[arg-type]
    elif few:
        adv.verdict = "too_few"
        adv.headline = (f"No advice yet: {', '.join(f'{s.label} has {_runs(s.ok)}' for s in few)}; distbench "
                        f"advises from at least {min_repeats} runs of each candidate.")
        # every row that one more run could put in the lead (within CONTENDER_RATIO of it), so one round answers
        contenders = [s for s in ranked[:MAX_CONTENDERS]
                      if s.ttt.value <= CONTENDER_RATIO * lead.ttt.value]  # type: ignore[operator]
        strategies = ",".join(dict.fromkeys([s.strategy for s in contenders] + names + ["single"]))
        workers = ",".join(str(w) for w in sorted({s.workers for s in contenders + [lead] + ([second] if second else [])
                                                   if s.workers > 1}))
        # --repeats counts recorded repeats, failed ones too (a --resume keeps them): enough for min_repeats ok
        # runs of each (user test, helper-28: 'ok 1, failed 4' was told --repeats 3, which ran nothing)
        repeats = max(s.repeats + min_repeats - s.ok for s in few)
        adv.next_command = run_command(rd, resume=True, repeats=repeats, strategies=strategies,
                                       workers=workers or None)
    elif second is not None and _overlap(lead, second):
        adv.verdict = "overlap"
        adv.runner_up = None
        adv.headline = (f"No clear winner: {lead.label} and {second.label} cannot be told apart; their times to "
                        f"{target_acc} overlap over {_runs(min(lead.ok, second.ok))} or more.")
        if min(lead.ok, second.ok) >= OVERLAP_MAX_RUNS:  # helper-32: more runs were asked for, round after round
            adv.reasons.append(f"Over {OVERLAP_MAX_RUNS} or more runs each they are equally fast within run-to-run "
                               "noise on this workload here: choose between them on the other evidence below "
                               "(accuracy, stragglers, what each needs); more runs will not decide it.")
            return
        adv.reasons.append("Choose between them on the other evidence below (accuracy, stragglers, what each needs), "
                           "or measure more runs" + (f" (with {RANK_TEST_MIN_RUNS} or more each, a rank test can tell "
                                                     "overlapping ranges apart)." if min(lead.ok, second.ok)
                                                     < RANK_TEST_MIN_RUNS else "."))  # helper-33: they had 5
        also = ["single"] if single is not None and "single" not in names and _overlap(lead, single) else []
        counts = ",".join(str(w) for w in sorted({s.workers for s in (lead, second) if s.workers > 1}))
        adv.next_command = run_command(rd, resume=True, repeats=max(5, max(lead.repeats, second.repeats) + 2),
                                       strategies=",".join(names + also),
                                       workers=counts or None)  # helper-29: every recorded count ran again
    else:
        adv.verdict = "single" if lead.strategy == "single" else "clear"
        adv.recommended, adv.runner_up = lead.label, second.label if second else None
        if adv.verdict == "single":
            wl = next((r.get("workload") or {} for r in lead.records), {})
            adv.headline = (f"Recommended: single. No distributed strategy beats one device on this workload here; "
                            f"the runner-up is {second.label if second else 'none'}.")
            from distbench.calibrate import distributed_rows

            rows = distributed_rows(lead.records + (second.records if second else []))
            one_host = "ONE_HOST_RUN" if rows == "cluster" else shlex.quote(rd or "RUN_DIR")  # helper-17: a cluster
            # run cannot calibrate it
            predict = ("see Target" if has_target else  # the Target block exists only with --target
                       f"distbench advise {one_host} --target '8 nodes x 4 GPUs, 25 Gbit/s' predicts one"
                       + (" from a one-host run of this workload" if one_host == "ONE_HOST_RUN" else ""))
            adv.reasons.append(f"The workload ({wl.get('num_parameters', '?')} parameters, "
                               f"{(wl.get('sizes') or {}).get('train', '?')} training samples) is too small for "
                               "extra workers to pay for their communication on this hardware; a larger model, "
                               f"more data or faster devices change that ({predict})." if second is not None else
                               f"No distributed configuration reached {target_acc} in the epochs run, so none was "
                               "compared on time; more epochs, or a lower --target-accuracy, compare them.")
            # (user test, helper-29: below the target, they were called too small for their communication)
        else:
            adv.headline = f"Recommended: {lead.label}; runner-up: {second.label if second else 'none'}."


AUTO_MAX_RUNS = MIN_REPEATS
"""The most runs of one configuration under ``[run] repeats = "auto"``: as many as advice needs."""


@dataclass
class MoreRuns:
    """What :func:`more_runs` decided for the next round of ``repeats = "auto"``.

    Attributes:
        rerun: the configurations to run once more, the leader first; empty: no more rounds.
        advice: the advice on the records the decision saw (its ``compared`` and ``short``).
        max_runs: the most runs of one configuration.
    """

    rerun: list[ConfigSummary]
    advice: Advice
    max_runs: int = AUTO_MAX_RUNS

    def line(self) -> str | None:
        """One console line: why the next round runs and what it runs, or why the rounds
        stop short of advice (the candidates already ran ``max_runs`` times); ``None``
        when advice needs no more runs (a recommendation, no clear winner after enough
        runs, no target reached, nothing ran)."""
        adv = self.advice
        if not adv.short:
            return None
        lead, second = adv.compared[0], (adv.compared[1] if len(adv.compared) > 1 else None)
        target = next((r.get("target_accuracy") for s in adv.compared for r in s.records
                       if r.get("target_accuracy")), None)
        def runs(n: int) -> str:  # ok runs, as advice counts them: said so when some runs were not ok
            ok = " ok" if any(s.ok < s.repeats for s in adv.compared) else ""
            return f"{n}{ok} run{'s' if n != 1 else ''}"

        if second is None:
            state = (f"{lead.label} is the only configuration that reached {target} ({_range(lead)}), after "
                     f"{runs(lead.ok)}; distbench advises from {MIN_REPEATS} runs")
        else:
            both = f"{runs(lead.ok)} each" if lead.ok == second.ok else f"{runs(lead.ok)} and {runs(second.ok)}"
            how = f"{lead.label} and {second.label} overlap" if _overlap(lead, second) else \
                f"{lead.label} leads {second.label}"
            state = (f"{how} to {target} ({_ranges(lead, second)}) after {both}; distbench advises "
                     f"from {MIN_REPEATS} runs of each")
        if not self.rerun:
            done = " and ".join(s.label for s in adv.short)
            return (f"repeats auto: {state}, but {done} already ran {self.max_runs} times, the most \"auto\" runs: "
                    "no more rounds (the recommendation says what to run next)")
        who = ("each" if len(self.rerun) > 1 else "it" if second is None else self.rerun[0].label)
        nth = sorted({s.repeats + 1 for s in self.rerun})
        ordinal = " and ".join(str(n) for n in nth)
        return (f"repeats auto: {state}: running {who} once more (run{'s' if len(nth) > 1 else ''} {ordinal} of "
                f"at most {self.max_runs})")


def more_runs(records: list[dict[str, Any]], max_runs: int = AUTO_MAX_RUNS) -> MoreRuns:
    """Which configurations ``repeats = "auto"`` runs once more: those that :func:`advise`
    names as short of runs (the leader and the runner-up with fewer than
    :data:`MIN_REPEATS` ok runs: the verdict ``too_few``) and that have fewer than
    ``max_runs`` records. None once advice is given, or says "no clear winner" (both have
    enough runs and their ranges overlap), or has nothing to compare: its rule decides,
    unchanged.

    Args:
        records: the records so far (of the sweep's configurations).
        max_runs: the most runs of one configuration (a failing one stops there).
    """
    adv = advise(records)
    return MoreRuns([s for s in adv.short if s.repeats < max_runs], adv, max_runs)


def _straggler_reasons(ok: Sequence[ConfigSummary], names: Sequence[str], target_acc: Any) -> list[str]:
    """Sentences on straggler tolerance: each candidate's time to target at its sweep's
    largest slowdown against 1x, and the fastest configuration under that slowdown."""
    lines = [ln for ln in straggler_lines(ok) if ln.baseline is not None]
    if not lines:
        return []
    out = []
    top = max(p.slowdown for ln in lines for p in ln.points)
    parts = []
    for ln in lines:
        if ln.strategy not in names:
            continue
        p, b = ln.points[-1], ln.baseline
        if p.slowdown != top or b is None:
            continue
        if p.summary.ttt.value is not None and b.ttt.value:
            grow = f"time to {target_acc} {100 * (p.summary.ttt.value / b.ttt.value - 1):+.0f}%"
        else:
            grow = f"time to {target_acc}: " + ("not reached" if b.ttt.value else "not reached at 1x")
        acc = (f", accuracy {p.summary.accuracy.median:.3f} vs {b.accuracy.median:.3f}"
               if None not in (p.summary.accuracy.median, b.accuracy.median) else "")
        parts.append(f"{ln.label} {grow}{acc}")
    if parts:
        out.append(f"With one worker {top:g}x slower: " + "; ".join(parts) + ".")
    slowed = [p.summary for ln in lines for p in ln.points if p.slowdown == top and p.summary.ttt.value is not None]
    if slowed:
        fast = min(slowed, key=lambda s: s.ttt.value)  # type: ignore[arg-type, return-value]
        msg = f"Fastest to {target_acc} with that straggler: {fast.label} ({_range(fast)})"
        lead_slowed = any(s.strategy == names[0] for s in slowed)
        if fast.strategy != names[0] and (lead_slowed or names[0] != "single"):
            msg += f"; if a worker can be {top:g}x slower, prefer {fast.strategy} to {names[0]}"
        elif names[0] == "single":
            msg += "; single has no other worker to wait for"
        out.append(msg + ".")
    return out


NETWORK_MATTERS = 0.05
"""Below this share of communication in every candidate's predicted epoch, advice says the
network does not decide between them on the target."""

RUN_COST_ORDER = ("single", "mirrored", "multi_worker_mirrored", "horovod_mpi", "horovod", "mpi_ps:", "tf_ps",
                  "spark_ps:")
"""Strategies from the least to the most to install and operate: one process; one machine's
devices; TensorFlow alone with ``TF_CONFIG``; Horovod (a build against TensorFlow) under
``mpirun`` (Open MPI and ssh), or under ``horovodrun`` (also Gloo); MPI plus a parameter
server rank; TensorFlow's ps and coordinator tasks to keep alive; a Spark cluster (JVM)."""


def _target_sentences(target: Target, run_dir: str | None, records: list[dict[str, Any]]
                      ) -> tuple[list[str], list[Any], dict[str, Any]]:
    """Sentences predicting every strategy the run measured on ``target`` with the
    per-strategy model (:func:`distbench.costmodel.predict_strategies`), the predictions
    (:class:`~distbench.costmodel.StrategyPrediction`, one per window of a window sweep)
    that reach the target accuracy there, fastest first, and the same as data
    (``strategies``: one dict per prediction; ``inputs``: what it rests on); both empty
    without a prediction."""
    from distbench import costmodel

    head = (f"{target.text}: {target.nodes} node(s) x {target.per_node} = {target.workers} workers, "
            f"{link_text(target.bandwidth_Bps if target.nodes > 1 else math.inf, target.latency_s)}"
            + (", emulated on this machine." if target.emulated else "."))
    if run_dir is None:
        return [head, "No prediction: the run directory is unknown."], [], {"refused": "the run directory is unknown"}
    try:
        acc = next((r.get("target_accuracy") for r in records if r.get("target_accuracy")), None)
        preds, inputs = costmodel.predict_strategies(run_dir, target.cluster(), acc)  # as the records are scored
    except ValueError as e:
        return [head, f"No prediction: {e}."], [], {"refused": str(e)}
    acc = inputs["target_accuracy"]
    ranked = [p for p in preds if p.rank]
    reached = [p for p in ranked if p.time_to_target_s is not None]
    data = {"target": target.data(), "inputs": inputs, "strategies": [p.data() for p in preds]}
    nothing = costmodel.nothing_distributed(preds, inputs)  # user test (helper-17): "fastest: single", alone
    if nothing:
        return [head, nothing + "."], [], {**data, "refused": nothing}
    out = [head]
    best = reached[0] if reached else None
    if best is not None:
        nxt = f", then {reached[1].label} ({seconds_text(reached[1].time_to_target_s)})" if len(reached) > 1 else ""
        if len(reached) > 1 and reached[1].time_to_target_s < PREDICTED_TIE * best.time_to_target_s:  # helper-18
            nxt += f", within the model's {PREDICTED_TIE - 1:.0%} median error of each other: a tie"
            data["tied"] = [best.label, reached[1].label]  # user test (helper-20): in --json too
        out.append(f"Predicted fastest to {acc:g} there: {best.label} ({seconds_text(best.time_to_target_s)}, "
                   f"{seconds_text(best.epoch_s)} per epoch){nxt}.")
    else:
        out.append(f"No strategy reached {acc:g} in this run, so none is predicted to reach it there; by epoch time:")
    multi = [p for p in ranked if p.strategy != "single"]
    notes: dict[str, list[str]] = {}  # a note shared by several strategies is said once, naming them
    for p in multi:
        for n in p.notes:
            notes.setdefault(n, []).append(p.label)
    shared = [(n, who) for n, who in notes.items() if len(who) > 1]
    out.append("Predicted: " + "; ".join(
        f"{p.rank}. {p.label} " + (f"{seconds_text(p.time_to_target_s)} to {acc:g}, " if p.time_to_target_s else "")
        + f"{seconds_text(p.epoch_s)}/epoch (link {seconds_text(p.terms_s['link'])})"
        + "".join(f" [{n}]" for n in p.notes if len(notes.get(n, [p.label])) == 1) for p in ranked) + "."
        + "".join(f" {n[0].upper() + n[1:]} ({_who(who, multi)})." for n, who in shared))
    out += [f"No prediction for {p.label}: {p.missing}." for p in preds if p.missing]
    if costmodel.not_predicted_text(inputs):  # user test: mirrored was a candidate here and silently absent there
        out.append(costmodel.not_predicted_text(inputs))
    out.append(f"Measured in this run: {'; '.join(inputs['measured'])}. Assumed: {'; '.join(inputs['assumed'])}. "
               f"Error band: {inputs['validated']} (benchmarks/predict_validation.py).")
    share = {p.label: p.terms_s["link"] / p.epoch_s for p in multi}
    if share and max(share.values()) < NETWORK_MATTERS:
        simplest = min(share, key=lambda n: next((i for i, p in enumerate(RUN_COST_ORDER) if n.startswith(p)),
                                                 len(RUN_COST_ORDER)))
        if ranked and ranked[0].strategy == "single":  # user test: it named horovod_mpi while single led
            simplest = "single, which is also predicted fastest: distributing does not pay here"
        most = max(share.values())
        most_text = "under 1%" if most < 0.005 else f"at most {most:.0%}"
        over = (f"Communication is {most_text} of any strategy's predicted epoch on this target"
                f" ({inputs['model_bytes']:,} bytes of weights over {rate_text(target.bandwidth_Bps * 8)}"
                "): the network does not decide") if target.nodes > 1 else (
            "One node: its workers share no network link, and the network does not decide")
        out.append(f"{over} between them here, so the choice rests on what each costs "
                   f"to run (Operational cost); the simplest of them to run is {simplest}.")
    gpus_here = any((r.get("provenance") or {}).get("gpus") for r in records)
    if target.gpus and not gpus_here and target.node_step_s is None and target.nodes > 1:
        out.append(f"The compute per step was measured here on CPUs; a {target.devices[:-1]}'s is shorter, so "
                   "communication weighs more "
                   "on the target than predicted here (--node-step S takes a step "
                   "time measured on one of its nodes).")
    return out, reached, data


def _add_target(adv: Advice, target: Target, rd: str | None, records: list[dict[str, Any]]) -> None:
    """Fill ``adv``'s Target block and ``target_recommended``; where no other run is needed
    first, its Run next measures the predicted leaders at the target's size (emulated), and
    ``target_predictions["run_next"]`` says it as data (``command``, ``predicted_train_s``,
    ``why``; ``command`` null with the reason where there is none)."""
    adv.target, reached, adv.target_predictions = _target_sentences(target, rd, records)
    adv.target_refused = adv.target_predictions.pop("refused", None)
    adv.target_recommended = reached[0].label if reached else None  # with its window where the run swept them
    leaders = list(dict.fromkeys(p.strategy for p in reached))
    for name in leaders[:2]:  # user test (helper-16): the costs named this host's runner-up, not the target's
        if name not in dict(adv.costs):
            adv.costs.append((name, _needs(name)))
    batch = int(next((r.get("global_batch_size") for r in records if r.get("global_batch_size")), 0))
    unsplit = bool(adv.target_refused and rd and not adv.next_command and batch and batch % target.workers)
    if not (leaders and rd and not adv.next_command) and not unsplit:  # unsplit: the rebatched run (helper-27)
        if adv.target_predictions:  # user test (helper-23): the key was absent, a KeyError in the user's script
            adv.target_predictions["run_next"] = {"command": None, "predicted_train_s": None, "why": (
                "next_command measures what this run lacks first" if adv.next_command else
                f"no strategy is predicted to reach {adv.target_predictions['inputs']['target_accuracy']:g} there")}
        return
    adv.next_command, why = _emulated_next(target, rd, leaders[:3], records)
    done = re.search(r"--out (\S+)", adv.next_command or "")
    if done and (Path(shlex.split(done[1])[0]) / "workload").exists():  # helper-28: refused there (as run checks)
        out = done[1]
        adv.next_command = None
        em = _emulated_text(target) if "-emulated-" in out else target.text  # helper-32: ', emulated' was dropped
        why = (f"No Run next: {out} already holds its run (distbench run refuses a directory that holds one): "
               + (f"distbench advise {out} --target {shlex.quote(target.text)} predicts from it." if "-batch-" in out
                  else f"distbench advise {out} advises from it, and distbench predict {shlex.quote(rd)} --target "
                       f"{shlex.quote(em)} --against {out} compares it with this prediction."))
    run_next: dict[str, Any] = {"command": adv.next_command, "predicted_train_s": None, "why": why or None}
    if why:
        adv.target.append(why)  # user test (helper-20/21): no Run next, and nothing said why
    elif adv.next_command and (long := _run_next_duration(target, rd, leaders[:3], records)):
        flags, sentence, run_next["predicted_train_s"] = long
        if run_next["predicted_train_s"] > RUN_NEXT_MAX_S:  # user test (helper-23): 100 days were offered
            why = sentence = (f"No Run next on this machine: measuring the leaders at the target's size would train "
                              f"for about {duration_text(run_next['predicted_train_s'])} with one repeat, over "
                              f"{duration_text(RUN_NEXT_MAX_S)}; measure on the target itself, or ask about a "
                              "faster link.")
            adv.next_command = None
        for old, new in flags.items() if adv.next_command else ():
            adv.next_command = adv.next_command.replace(old, new, 1)
        adv.target.append(sentence)
        run_next.update(command=adv.next_command, why=sentence)
    if adv.target_predictions:  # user test (helper-22): the duration and the reason were prose only
        adv.target_predictions["run_next"] = run_next
    if adv.next_command and not why and not target.emulated and target.nodes > 1:  # helper-15: what it leaves out
        adv.target.append(_emulated_caveat(target, rd, adv.next_command))
    elif adv.next_command and not why and target.emulated and target.nodes > 1:  # helper-33: no compare command
        adv.target.append(f"Run next measures these on the emulated cluster the target names; distbench predict "
                          f"{shlex.quote(rd)} --target {shlex.quote(target.text)} --against "
                          f"{adv.next_command.rsplit('--out ', 1)[1].split()[0]} compares it with this prediction.")


def _emulated_caveat(target: Target, rd: str, command: str) -> str:
    """What an emulated Run next leaves out of a real target (helper-15): its hosts share this
    machine's cores, its links shape the rate only (no latency), and a rate above what the
    emulated bridge carries (helper-18: 25 Gbit/s) is not reached; with the ``predict
    --against`` that compares it with the prediction."""
    from distbench.cluster.emulated import EMULATED_VETH_BPS

    lat = f" (not the {duration_text(target.latency_s)} of latency)" if target.latency_s > 0 else ""
    out_dir = command.rsplit("--out ", 1)[1]
    em = _emulated_text(target)
    checks = "the framework costs and the link rate at the target's size, not the target's compute"
    if target.bandwidth_Bps > EMULATED_VETH_BPS:
        lat += (f"; and the unshaped emulated bridge carried one TCP stream at about "
                f"{rate_text(EMULATED_VETH_BPS * 8)} where it was measured (docs/cluster.md), below the "
                f"target's {rate_text(target.bandwidth_Bps * 8)}")
        checks = "the framework costs at the target's size, not its link rate or compute"  # helper-23: said both
    return (f"Run next measures these on an emulated cluster of this machine: its hosts share this machine's cores "
            f"and its links shape the rate only{lat}, so it checks {checks}; compare it "
            f"with distbench predict {shlex.quote(rd)} --target {shlex.quote(em)} --against {out_dir}.")


def _emulated_text(target: Target) -> str:
    """The ``--target`` of the emulated cluster an emulated Run next measures ``target`` on."""
    return target.text if target.emulated else (
        f"{target.nodes} nodes x {target.per_node}, {rate_text(target.bandwidth_Bps * 8)}, emulated")


def _who(names: list[str], multi: Sequence[Any]) -> str:
    """The strategies a shared note is about: "every distributed strategy" or their names."""
    return "every distributed strategy" if len(names) == len(multi) else ", ".join(names)


def _emulated_next(target: Target, run_dir: str, names: Sequence[str], records: Sequence[dict[str, Any]]
                   ) -> tuple[str | None, str]:
    """The ``distbench run`` that measures ``names`` at the target's size on an emulated
    cluster of this machine (on this machine itself for one node), and ''; or ``None`` and
    one sentence saying why there is none (user test, helper-21: it vanished without a
    word): more workers than :data:`EMULATE_MAX_WORKERS`, a global batch (in ``records``)
    they cannot split, no root, ``ip`` or ``tc`` (one node needs none), or
    :func:`_one_node_not_next`."""
    from distbench.cluster import netns

    batch = int(next((r.get("global_batch_size") for r in records if r.get("global_batch_size")), 0))
    rd = run_dir.rstrip("/")
    if os.path.basename(rd) in ("", ".", ".."):  # user test (helper-22): "." made --out .-emulated-..., inside the run
        rd = os.path.abspath(run_dir)
    if batch and batch % target.workers:  # distbench run refuses it (helper-17); helper-22: say the command too
        return _rebatched_next(target, rd, batch, records)  # a one-host run: for any size (helper-24)
    if target.workers > EMULATE_MAX_WORKERS:
        what = "emulates" if target.nodes > 1 else "runs"  # helper-24: one node is not emulated
        return None, (f"No Run next on this machine: it {what} {EMULATE_MAX_WORKERS} workers at most (all of them "
                      f"share its cores), and the target has {target.workers}.")
    if target.nodes == 1:  # one node: this machine itself, no emulated link (helper-17: --emulate 1x8@10gbit)
        if why := _one_node_not_next(target, rd, names, records):
            return None, why
        return (f"distbench run {shlex.quote(rd + '/config.json')} --workers {target.workers} --strategies "
                f"{','.join(names)} --repeats 3 --out {shlex.quote(rd + f'-{target.workers}-workers')}"), ""
    ok, why = netns.available()
    if not ok:
        return None, f"No Run next on this machine: an emulated cluster needs root, ip and tc ({why})."
    bits = target.bandwidth_Bps * 8
    if not 1e3 <= bits <= 1e12:  # user test (helper-22): "@1e+07gbit", "@3e-06mbit", which run --emulate refuses
        return None, f"No Run next on this machine: it emulates links of 1 kbit/s to 1 Tbit/s, not {rate_text(bits)}."
    rate = (f"{bits / 1e9:g}gbit" if bits >= 1e9 and bits % 1e9 == 0 else f"{bits / 1e6:g}mbit" if bits >= 1e6
            else f"{bits / 1e3:g}kbit")
    sudo = "sudo " if os.geteuid() != 0 else ""  # user test (helper-17): root without sudo installed
    shape = f"{target.nodes}x{target.per_node}"  # the rate in the directory too (helper-21: 3 rates, one directory)
    return (f"{sudo}distbench run {shlex.quote(rd + '/config.json')} --emulate {shape}@{rate} "
            f"--workers {target.workers} --strategies {','.join(names)} --repeats 3 "
            f"--out {shlex.quote(rd + f'-emulated-{shape}-{rate}')}"), ""


def _rebatched_next(target: Target, rd: str, batch: int, records: Sequence[dict[str, Any]]) -> tuple[str | None, str]:
    """Where the target's workers cannot split the run's global batch: the one-host run (and
    its calibration) at a global batch they and the run's worker counts split
    (:func:`distbench.costmodel.one_host_batch`; helper-23: a batch only the target split was
    refused by ``distbench run`` for the run's own counts) and the sentence saying so, or
    ``None`` and why there is none."""
    from distbench.costmodel import one_host_batch

    counts = sorted({int(r["workers"]) for r in records if int(r.get("workers") or 1) > 1 and not r.get("bandwidth")})
    n_train = next((int(((r.get("workload") or {}).get("sizes") or {}).get("train") or 0) for r in records
                    if r.get("workload")), 0)
    found = one_host_batch(batch, target.workers, counts, n_train)
    if found is None:
        return None, (f"No Run next at the target's size from this run: its global batch of {batch} does not split "
                      f"over {target.workers} workers, and no global batch within its {n_train} training samples "
                      "splits over them and over the run's worker counts.")
    nb, keep = found
    new = shlex.quote(rd + f"-batch-{nb}")
    workers = f" --workers {','.join(map(str, keep))}" if keep != counts else ""
    # helper-30: it ran the whole sweep again, 5 repeats of 22 configurations (~30 min), without a word: 3 repeats
    # are enough for the medians the model takes, and the line says how long this run's took
    here = [r for r in records if not r.get("bandwidth")]
    had = max((int(r.get("repeat") or 0) + 1 for r in here), default=1)
    repeats = f" --repeats {MIN_REPEATS}" if had > MIN_REPEATS else ""
    took = sum(float((r.get("timings") or {}).get("total_s") or 0.0) for r in here) * min(had, MIN_REPEATS) / had
    return (f"distbench run {shlex.quote(rd + '/config.json')} --batch-size {nb}{workers}{repeats} --out {new} && "
            f"distbench calibrate {new}"), (
        f"Run next is a one-host run at a global batch of {nb}, which the target's {target.workers} workers and the "
        f"run's worker counts ({', '.join(map(str, keep))}) split (this run's {batch} does not split over "
        f"{target.workers}), and its calibration; then distbench advise {new} --target {shlex.quote(target.text)} "
        "predicts from it." + (f" It runs this run's configurations again ({_runs(min(had, MIN_REPEATS))} of each): "
                               f"about {duration_text(took)}, as this run's took." if took >= 60 else ""))


RUN_NEXT_LONG_S = 600.0
"""A Run next predicted to take longer than this (seconds, all its configurations) says so."""

RUN_NEXT_MAX_S = 24 * 3600.0
"""A Run next predicted to train longer than this (seconds), even with one repeat, is not offered."""

RUN_NEXT_ONE_REPEAT_S = 3 * 3600.0
"""A Run next predicted to train longer than this (seconds) with 3 repeats gets one repeat,
and, where that is still longer, only the epochs its strategies need to reach the target."""


def _run_next_duration(target: Target, run_dir: str, names: Sequence[str], records: Sequence[dict[str, Any]]
                       ) -> tuple[dict[str, str], str, float] | None:
    """Where Run next is predicted to be long (over :data:`RUN_NEXT_LONG_S`) or to pass the
    run's per-configuration ``timeout_s``: (the replacements to make in its command, the
    sentence saying how long, the predicted training seconds of all its configurations),
    from the model on the emulated cluster Run next runs on; ``None`` where it is short.

    Replacements: ``--timeout S`` (1.5x the slowest configuration's prediction) where a
    configuration would pass the run's limit (user test, helper-21: 4 x 2 at 2 Mbit/s,
    2,061 s per configuration against a timeout of 1,800 s, would have ended as timeouts
    after 3.5 hours); past :data:`RUN_NEXT_ONE_REPEAT_S`, ``--repeats 1``, and then
    ``--epochs E`` where every strategy reached the target by epoch E - 1 in the one-host
    run (user test, helper-22: a Run next of 72 hours was offered with 3 repeats).
    """
    import json

    from distbench import costmodel

    try:  # a run directory without its config.json (made by hand) has no limit to pass
        cfg = json.loads((Path(run_dir) / "config.json").read_text())
    except (OSError, ValueError):
        cfg = {}
    timeout = float((cfg.get("run") or {}).get("timeout_s") or math.inf)
    try:
        em = costmodel.Cluster(target.nodes, target.per_node, target.bandwidth_Bps, 0.0, target.nodes > 1)
        preds = [p for p in costmodel.predict_strategies(run_dir, em)[0] if p.strategy in names and p.epoch_s]
    except (OSError, ValueError):
        return None
    epochs = int(next((r.get("epochs") for r in records if r.get("epochs")), 0))
    reach = [p.epochs_to_target for p in preds]
    cut = math.ceil(max(reach)) + 1 if reach and None not in reach else epochs
    full = sum((p.warmup_s or 0.0) + epochs * p.epoch_s for p in preds)  # one repeat as the run was made
    repeats = 3 if 3 * full <= RUN_NEXT_ONE_REPEAT_S else 1
    epochs_next = cut if repeats == 1 and cut < epochs and full > RUN_NEXT_ONE_REPEAT_S else epochs
    each = [(p.warmup_s or 0.0) + epochs_next * p.epoch_s for p in preds]
    if not each or repeats * sum(each) <= RUN_NEXT_LONG_S and max(each) <= timeout:
        return None
    flags = {" --repeats 3 ": f" --repeats {repeats} "} if repeats != 3 else {}
    if epochs_next != epochs:
        flags[" --repeats "] = f" --epochs {epochs_next} --repeats "
    shorter = (f"; it has {repeats} repeat" + (f" of {epochs_next} epochs (each strategy reached the target by "
                                                 f"epoch {epochs_next - 1} in the one-host run)"
                                                 if epochs_next != epochs else "")
               + f", where 3 repeats of {epochs} epochs would take {duration_text(3 * full)}") if flags else ""
    if max(each) > timeout / 1.5:
        flags[" --out "] = f" --timeout {math.ceil(1.5 * max(each) / 60) * 60} --out "
        shorter += (f"; the run's limit of {duration_text(timeout)} per configuration is raised with "
                    f"{flags[' --out '].split(' --out')[0].strip()}")
    total = repeats * sum(each)
    return flags, (f"Run next is predicted to train for about {duration_text(total)} ({len(each)} configurations x "
                   f"{repeats} repeat(s), the slowest {duration_text(max(each))} each, start-up not counted){shorter}"
                   + (f"; --epochs fewer than {epochs_next} shortens it, with epochs to target read from the "
                      "one-host run." if epochs_next == epochs else ".")), total


def _one_node_not_next(target: Target, run_dir: str, names: Sequence[str], records: Sequence[dict[str, Any]]
                       ) -> str:
    """Why a one-node target gets no Run next on this machine ('' where it does): GPUs that
    this machine lacks (N CPU processes here would measure oversubscription, not N GPUs:
    helper-19), or a run that already has 3 ok runs of each of ``names`` at that many
    workers (helper-20: it proposed measuring them again)."""
    if target.gpus and not any((r.get("provenance") or {}).get("gpus") for r in records):
        return (f"No Run next on this machine: it has no {target.devices}, and {target.workers} CPU processes on its "
                f"cores would measure their time slicing, not {target.workers} {target.devices}.")
    have = [n for n in names if n != "single" and sum(
        1 for r in records if r.get("strategy") == n and r.get("workers") == target.workers
        and r.get("status") == "ok" and not r.get("bandwidth")) >= 3]
    if have and len(have) == len([n for n in names if n != "single"]):
        q = shlex.quote(run_dir)
        if not target.node_step_s:  # helper-30: --against itself compared the rows with themselves
            return (f"No Run next: this run already measured {', '.join(have)} at {target.workers} workers on this "
                    "machine, and one node like this machine is predicted from those rows (their median epoch and "
                    "epochs to target; distbench advise ranks their measured times to target, MLPerf's score).")
        return (f"This run already measured {', '.join(have)} at {target.workers} workers on this machine: distbench "
                f"predict {q} --target {shlex.quote(target.text)} --against {q} compares them with the prediction.")
    return ""


PREDICTED_TIE = 1.1
"""Two predicted times to target closer than this ratio are a tie: the model's median error
of epoch time (BENCHMARKS.md, predict_validation: 10%)."""

EMULATE_MAX_WORKERS = 8
"""The largest target this machine emulates for advice's Run next (every emulated host shares its cores)."""
