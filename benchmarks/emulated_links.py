"""The cost model against shaped links: ring allreduce and a parameter server on an
emulated 2-host cluster at 100 Mbit/s and unshaped, predicted slow-down vs measured.

Runs ``distbench run`` once on an emulated cluster (``[cluster] emulate``: one network
namespace per host, each host's link rate-limited with ``tc tbf``; needs root) with a
communication-heavy model (digits, an MLP of ~2.2 M parameters, 8.9 MB of float32
weights), 2 workers (one per host), ``horovod`` (Gloo ring allreduce) and ``mpi_ps:adag``
(one parameter server on the launching host, communication window 1), at each link rate
of ``--rates`` (default ``unlimited`` and ``100mbit``). For every strategy it compares:

- measured: the steady seconds per epoch (epochs after the first, from the records'
  curves) at the shaped rate minus the same at ``unlimited``;
- predicted: what :mod:`distbench.predict` adds per epoch for the shaped rate, i.e.
  steps per epoch x :func:`~distbench.predict.ring_allreduce_s` for the ring, and whole
  communication windows per epoch x :func:`~distbench.predict.ps_exchange_s` for the
  server. The server's own link (the emulated bridge) is not shaped, but ``mpi_ps``'s
  server rank serves one exchange at a time (probe, receive the whole commit, apply, send
  the centre), each over a shaped worker link, so a round of N exchanges takes the
  model's single-server ``N x 2 x bytes / rate``.
  The unshaped veth pair is taken as infinitely fast, and latency as 0 (the emulation
  shapes the rate only; measured veth latency is tens of microseconds).

The difference of two measured times cancels what does not depend on the link (compute,
Python, framing), so the ratio predicted/measured tests the communication term alone.

Usage::

    python benchmarks/emulated_links.py [--quick] [--rates unlimited,100mbit] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

sys.path.insert(0, str(C.ROOT / "src"))
from distbench import predict as P  # noqa: E402
from distbench.cluster import netns  # noqa: E402
from distbench.config import values as spec  # noqa: E402

STRATEGIES = ["horovod", "mpi_ps:adag"]
CONFIG = """\
[data]
name = "digits"
[model]
name = "mlp"
hidden = {hidden}
[training]
epochs = {epochs}
global_batch_size = 128
optimizer = "sgd"
learning_rate = 0.1
[ps]
communication_window = 1
[run]
strategies = {strategies}
workers = [2]
timeout_s = 1800.0
[cluster]
emulate = {{ hosts = 2, slots = 1, bandwidth = {rates} }}
"""


def _toml_list(items: list) -> str:
    return "[" + ", ".join(f'"{x}"' if isinstance(x, str) else str(x) for x in items) + "]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small model and 2 epochs at 1gbit: a smoke test")
    ap.add_argument("--rates", default=None, help="comma-separated link rates, 'unlimited' first "
                                                  "[default: unlimited,100mbit; --quick: unlimited,1gbit]")
    ap.add_argument("--epochs", type=int, default=None, help="epochs per configuration [default: 4; --quick: 2]")
    ap.add_argument("--write", help="BENCHMARKS.md to update (section emulated_links)")
    args = ap.parse_args(argv)
    ok, why = netns.available()
    if not ok:
        text = (f"## The cost model against shaped links (emulated 2-host cluster)\n\nNot run on {C.utc_now()}: "
                f"{why}.\n")
        print(text)
        if args.write:
            C.write_section(args.write, "emulated_links", text)
        return 0
    rates = (args.rates or ("unlimited,1gbit" if args.quick else "unlimited,100mbit")).split(",")
    if rates[0] != spec.UNLIMITED or len(rates) < 2:
        ap.error(f"--rates {','.join(rates)}: expected 'unlimited' first and at least one shaped rate")
    epochs = args.epochs or (2 if args.quick else 4)
    hidden = [64] if args.quick else [2048, 1024]
    tmp = Path(tempfile.mkdtemp(prefix="distbench-links-"))
    cfg = tmp / "links.toml"
    cfg.write_text(CONFIG.format(hidden=hidden, epochs=epochs, strategies=_toml_list(STRATEGIES),
                                 rates=_toml_list(rates)))
    t0 = time.perf_counter()
    C.run_distbench(["run", str(cfg), "--out", str(tmp / "run")], tmp / "run.log", timeout_s=3600)
    wall = time.perf_counter() - t0
    recs = C.read_records(tmp / "run")
    bad = [f"{r['config_id']}: {r['status']} {r.get('reason', '')}" for r in recs if r["status"] != "ok"]
    if bad:
        raise RuntimeError("not every configuration ran: " + "; ".join(bad))
    by = {(r["strategy"], r["bandwidth"]): r for r in recs}
    params = recs[0]["workload"]["num_parameters"]
    model_bytes = 4 * params
    n_train = recs[0]["workload"]["sizes"]["train"] if isinstance(recs[0]["workload"]["sizes"], dict) else None
    lines = ["## The cost model against shaped links (emulated 2-host cluster)", "",
             f"`{C.command_line('emulated_links.py', argv)}` on {C.utc_now()}; {C.machine_info()}; load "
             f"{C.load_average()}; {wall:.0f} s. digits, MLP {hidden} ({params:,} parameters, "
             f"{model_bytes / 1e6:.1f} MB float32), global batch 128, 2 workers on 2 emulated hosts (one network "
             f"namespace each, `tc tbf` on both ends of each host's link), {epochs} epochs; `mpi_ps:adag` with "
             "communication window 1 and its server on the launching host (unshaped bridge). Seconds per epoch are "
             "the medians of the steady epochs (after the first). Predicted slow-down: steps per epoch x the "
             "ring allreduce (2 (N-1)/N x bytes / rate) and whole windows per epoch x the PS exchange round "
             "(N x 2 x bytes / rate: the server rank serves one commit and pull at a time, each over a shaped "
             "worker link); latency and the unshaped link's own time are taken as 0.", "",
             "| strategy | link | s/epoch | measured slow-down, s/epoch | predicted, s/epoch | predicted / measured |",
             "|---|---|---|---|---|---|"]
    worst = 0.0
    for name in STRATEGIES:
        base = by[(name, spec.UNLIMITED)]
        base_s = statistics.median(C.steady_epoch_s(base))
        lines.append(f"| `{name}` | unlimited | {base_s:.2f} | - | - | - |")
        for rate in rates[1:]:
            r = by[(name, rate)]
            bw = spec.parse_rate("bandwidth", rate) / 8  # bytes/s
            steps = r["steps"] / r["epochs"] / (r["workers"] if name.startswith("mpi_ps") else 1)
            if name.startswith("mpi_ps"):
                window = r.get("communication_window") or 1
                comm = math.ceil(steps / window) * P.ps_exchange_s(r["workers"], model_bytes, bw, 0.0)
            else:
                comm = steps * P.ring_allreduce_s(r["workers"], model_bytes, bw, 0.0)
            s = statistics.median(C.steady_epoch_s(r))
            measured = s - base_s
            ratio = comm / measured if measured > 0 else float("inf")
            worst = max(worst, abs(ratio - 1))
            lines.append(f"| `{name}` | {rate} | {s:.2f} | {measured:.2f} | {comm:.2f} | {ratio:.2f} |")
    lines += ["", f"Largest deviation of predicted from measured: {100 * worst:.0f}% "
              f"({'within' if worst <= 0.25 else 'outside'} 25%)."
              + (f" {n_train} training samples." if n_train else "")]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        C.write_section(args.write, "emulated_links", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
