"""Helpers shared by the benchmark scripts written for issue 8 (harness_overhead,
elephas_peer, step_time, run_all): machine line, median/spread cells, BENCHMARKS.md
sections, and running ``distbench`` in a subprocess.

A BENCHMARKS.md *section* is the text between ``<!-- NAME:start -->`` and
``<!-- NAME:end -->``; each script replaces only its own section (ps_throughput.py and
allreduce.py do the same with theirs), so scripts can be rerun one at a time.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata as _md
import importlib.util
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("distbench") is None:  # a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT / "src"))  # (find_spec does not import it: plain workers stay distbench-free)


def version(pkg: str) -> str:
    """Installed version of distribution ``pkg``, or ``-``."""
    try:
        return _md.version(pkg)
    except _md.PackageNotFoundError:
        return "-"


def machine_info() -> str:
    """One line: OS, CPU model and count, memory, Python, TensorFlow and Keras versions."""
    from distbench.results.provenance import cpu_model  # here: plain workers import this module

    mem = "?"
    try:
        kb = int(next(ln for ln in Path("/proc/meminfo").read_text().splitlines()
                      if ln.startswith("MemTotal")).split()[1])
        mem = f"{kb / 2**20:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return (f"{platform.platform()}, {cpu_model()}, {os.cpu_count()} logical CPUs, {mem} RAM, "
            f"Python {platform.python_version()}, TensorFlow {version('tensorflow')}, "
            f"Keras {version('keras')}")


def utc_now() -> str:
    """The current time as ``YYYY-MM-DD HH:MM UTC``."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, e.g. ``1.2 0.9 0.7``."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def command_line(script: str, argv: Sequence[str] | None) -> str:
    """The command that ran ``script`` with ``argv`` (for the table of record)."""
    args = list(argv) if argv is not None else sys.argv[1:]
    return " ".join(["python", f"benchmarks/{script}", *args])


def spread(values: Sequence[float], fmt: str = "{:.2f}") -> str:
    """``median [min-max]`` of ``values`` formatted with ``fmt`` (``-`` if empty)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return "-"
    return (f"{fmt.format(statistics.median(vals))} "
            f"[{fmt.format(min(vals))}-{fmt.format(max(vals))}]")


def median(values: Sequence[float]) -> float | None:
    """Median of the non-None values, or None."""
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def ratio_spread(num: Sequence[float], den: Sequence[float]) -> tuple[float | None, str]:
    """Median ratio ``median(num) / median(den)`` and its text with the range of the
    per-repetition ratios (paired by position) in brackets."""
    mn, md = median(num), median(den)
    if mn is None or not md:
        return None, "-"
    pairs = [a / b for a, b in zip(num, den) if a is not None and b]
    r = mn / md
    rng = f" [{min(pairs):.2f}-{max(pairs):.2f}]" if len(pairs) > 1 else ""
    return r, f"{r:.2f}{rng}"


def write_section(path: str | Path, name: str, markdown: str) -> None:
    """Replace the ``name`` section of ``path`` with ``markdown`` (append it if absent;
    create the file with a ``# Benchmarks`` title if missing). Other sections are untouched."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    p = Path(path)
    text = p.read_text() if p.exists() else "# Benchmarks\n"
    block = f"{start}\n{markdown.rstrip()}\n{end}"
    if start in text and end in text:
        text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    p.write_text(text)


def recv_exact(sock: socket.socket, view: memoryview) -> None:
    """Fill ``view`` from ``sock`` (loopback reference measurements).

    Raises:
        ConnectionError: the peer closed the connection first.
    """
    got, n = 0, len(view)
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise ConnectionError("peer closed")
        got += k


DIGITS_MLP_TOML = """\
[data]
name = "digits"
[model]
name = "mlp"
hidden = [64]
[training]
epochs = {epochs}
global_batch_size = {batch}
optimizer = "sgd"
[run]
strategies = {strategies}
workers = [{workers}]
timeout_s = 1800.0
"""
"""The benchmarks' digits MLP experiment (project defaults otherwise); fill with ``str.format``."""


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment with quiet TensorFlow logs and ``src`` importable."""
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def run_distbench(args: Sequence[str], log: Path, timeout_s: float = 3600) -> subprocess.CompletedProcess[str]:
    """Run ``python -m distbench ARGS`` with this interpreter; output goes to ``log``.

    Raises:
        RuntimeError: a non-zero exit (the log's tail is in the message).
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as f:
        f.write(f"\n$ distbench {' '.join(args)}\n")
        f.flush()
        cp = subprocess.run([sys.executable, "-m", "distbench", *args], stdout=f, stderr=subprocess.STDOUT,
                            text=True, timeout=timeout_s, env=child_env(), cwd=ROOT)
    if cp.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-20:])
        raise RuntimeError(f"distbench {' '.join(args)} exited with {cp.returncode}:\n{tail}")
    return cp


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    """The records of ``run_dir/results.jsonl`` (empty if missing)."""
    p = Path(run_dir) / "results.jsonl"
    if not p.exists():
        return []
    return [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()]


def steady_epoch_s(rec: dict[str, Any], skip: int = 1) -> list[float]:
    """Per-epoch training seconds of a record after the first ``skip`` epochs, from the
    curve's epoch-end ``elapsed_s`` (snapshot copies are already off the clock).

    The first epoch holds one-off costs (``tf.function`` tracing, Spark task start), so
    its exclusion is the warm-up of a step-time measurement.
    """
    pts = sorted((p for p in rec.get("curve") or [] if p.get("epoch")), key=lambda p: p["epoch"])
    ends = {p["epoch"]: p["elapsed_s"] for p in pts}
    out = []
    for e in sorted(ends):
        if e > skip and (e - 1) in ends:
            out.append(ends[e] - ends[e - 1])
    return out

