"""Where a default sweep's wall time goes, with and without the shared engines (Spark, MPI).

Runs the embedded default sweep (digits, the MLP, every strategy available here, 2
workers, 10 epochs: what ``make run`` runs) ``--rounds`` times in each of two modes,
alternating so that machine load hits both alike:

- ``separate``: ``[spark] share_session = false`` and ``[mpi] share_engine = false``, every
  ``spark_ps`` configuration in its own process with its own Spark application and every
  ``mpi_ps`` configuration with its own ``mpirun`` (the behaviour before the shared engines);
- ``shared``: the default, the ``spark_ps`` configurations in one Spark application and the
  ``mpi_ps`` configurations on one ``mpirun`` job.

For each sweep it reports the wall time, the sum of the records' ``timings.train_s``, the
training share, and the sum of each phase of ``timings.phases`` over the records; then
checks that the two modes recorded the same thing where they must: identical initial
weights, and identical test accuracy for the deterministic (synchronous) strategies.

Usage::

    python benchmarks/sweep_startup.py [--quick] [--rounds 1] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

PHASES = ("process_start_s", "workload_s", "engine_start_s", "trace_s", "train_s", "off_clock_s", "exit_s", "eval_s")
DETERMINISTIC = ("single", "mirrored", "multi_worker_mirrored", "horovod", "horovod_mpi", "spark_ps:easgd",
                 "spark_ps:averaging", "mpi_ps:easgd", "mpi_ps:averaging")
QUICK = ["single", "spark_ps:downpour", "spark_ps:easgd", "spark_ps:averaging", "mpi_ps:easgd", "mpi_ps:averaging"]


def sweep(mode: str, tmp: Path, k: int, quick: bool) -> dict:
    """One sweep in ``mode``; returns its wall time, records and phase sums."""
    cfg = tmp / f"{mode}.toml"
    share = "true" if mode == "shared" else "false"
    cfg.write_text(f"[spark]\nshare_session = {share}\n[mpi]\nshare_engine = {share}\n"
                   + ("[training]\nepochs = 2\n[run]\nstrategies = [" + ", ".join(f'"{s}"' for s in QUICK) + "]\n"
                      if quick else ""))
    out = tmp / f"{mode}-{k}"
    t0 = time.perf_counter()
    C.run_distbench(["run", str(cfg), "--out", str(out)], tmp / "run.log", timeout_s=7200)
    wall = time.perf_counter() - t0
    recs = C.read_records(out)
    sums = {p: sum(((r.get("timings") or {}).get("phases") or {}).get(p) or 0.0 for r in recs) for p in PHASES}
    train = sum((r.get("timings") or {}).get("train_s") or 0.0 for r in recs)
    return {"mode": mode, "wall": wall, "train": train, "records": recs, "phases": sums}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="six strategies, 2 epochs: a smoke test")
    ap.add_argument("--rounds", type=int, default=1, help="sweeps per mode, alternating [default: 1]")
    ap.add_argument("--write", help="BENCHMARKS.md to update (section sweep_startup)")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="distbench-sweep-"))
    runs = []
    t_all = time.perf_counter()
    for k in range(args.rounds):
        for mode in ("separate", "shared"):
            runs.append(sweep(mode, tmp, k, args.quick))
            print(f"{mode} #{k}: {runs[-1]['wall']:.0f} s", flush=True)
    by = {m: [r for r in runs if r["mode"] == m] for m in ("separate", "shared")}
    lines = ["## Sweep wall time: start-up vs training", "",
             f"`{C.command_line('sweep_startup.py', argv)}` on {C.utc_now()}; {C.machine_info()}; load "
             f"{C.load_average()}; {time.perf_counter() - t_all:.0f} s. "
             + ("Six strategies, 2 epochs (--quick)" if args.quick else
                "The embedded default sweep (`distbench run`: digits, MLP, every strategy, 2 workers, 10 epochs)")
             + f", {args.rounds} sweep(s) per mode, alternating. `separate`: `[spark] share_session = false` and "
             "`[mpi] share_engine = false` (a Spark application per spark_ps configuration and an mpirun per mpi_ps "
             "configuration, as before); `shared`: one Spark application for the sweep's spark_ps configurations "
             "and one mpirun job for its mpi_ps configurations (the default). Phases are sums over the sweep's "
             "records of `timings.phases` (seconds).", "",
             "| mode | wall s | sum of train_s | training share | "
             + " | ".join(p.removesuffix("_s").replace("_", " ") for p in PHASES) + " |",
             "|---|---|---|---|" + "---|" * len(PHASES)]
    for m, rs in by.items():
        wall = statistics.median(r["wall"] for r in rs)
        train = statistics.median(r["train"] for r in rs)
        ph = {p: statistics.median(r["phases"][p] for r in rs) for p in PHASES}
        lines.append(f"| {m} | {wall:.0f} | {train:.1f} | {100 * train / wall:.0f}% | "
                     + " | ".join(f"{ph[p]:.1f}" for p in PHASES) + " |")
    w_sep = statistics.median(r["wall"] for r in by["separate"])
    w_sh = statistics.median(r["wall"] for r in by["shared"])
    sep, sh = ({r["config_id"]: r for r in by[m][0]["records"]} for m in ("separate", "shared"))
    hashes = {r["initial_weights_sha256"] for r in [*sep.values(), *sh.values()] if r.get("initial_weights_sha256")}
    same, differ = [], []
    for cid, r in sep.items():
        o = sh.get(cid)
        if o and r["strategy"] in DETERMINISTIC and r["status"] == o["status"] == "ok":
            (same if r["final_test_accuracy"] == o["final_test_accuracy"] else differ).append(
                f"{r['strategy']} {r['final_test_accuracy']:.4f}/{o['final_test_accuracy']:.4f}")
    def starts(recs: dict, family: str) -> str:
        got = [r["timings"]["phases"]["engine_start_s"] for r in recs.values()
               if r["strategy"].startswith(family) and (r.get("timings") or {}).get("phases")]
        return C.spread(got, "{:.1f}")

    lines += ["", f"Shared / separate wall time: {w_sh / w_sep:.2f}. Engine start-up per configuration, separate / "
              f"shared: spark_ps {starts(sep, 'spark_ps')} / {starts(sh, 'spark_ps')} s, mpi_ps "
              f"{starts(sep, 'mpi_ps')} / {starts(sh, 'mpi_ps')} s (the first shared configuration of each engine "
              "pays for its start). Initial weights: "
              f"{'one hash in every record of both modes' if len(hashes) == 1 else f'{len(hashes)} different hashes'}"
              f". Test accuracy of the deterministic strategies, separate/shared: identical for {len(same)} "
              f"({', '.join(same) or 'none'})" + (f"; different for {', '.join(differ)}" if differ else "") + "."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        C.write_section(args.write, "sweep_startup", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
