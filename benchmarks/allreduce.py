"""Horovod allreduce bandwidth on 2 ranks of this machine, under Gloo and under MPI,
against raw loopback TCP measured in the same run.

For float32 tensors of 1, 4, 16 and 64 MB (MiB: 2^20 bytes) each rank runs
``hvd.allreduce(t, op=Sum)`` (eager, as a training step's gradient allreduce is issued):
warm-up calls, then timed repetitions, each started after a small barrier allreduce and
ended when the result is on the host; a repetition's time is the slowest rank's. Figures
follow the NCCL-tests convention: ``algbw = size / time`` and
``busbw = algbw x 2(n-1)/n`` (the bytes each rank's link carries in a ring allreduce;
for n = 2 busbw equals algbw). The ceiling is a plain TCP transfer of the same bytes
over loopback between two processes (send S bytes, 1-byte acknowledgement), so
``busbw / TCP`` says how much of the raw loopback throughput Horovod's ring achieves
(in a 2-rank ring each rank sends S bytes and receives S bytes, both directions at once).
Gloo's ring runs over TCP; Open MPI on one host uses shared memory, so for MPI the TCP
figure is a reference point rather than its transport.

Usage::

    python benchmarks/allreduce.py [--quick] [--reps N] [--write BENCHMARKS.md]

Each controller's ranks are started with distbench's own launch builders
(``horovodrun -np 2 --gloo`` and ``mpirun -np 2``), running this file with ``--rank-worker``.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402  (also makes a checkout's src/ importable)

MIB = 1 << 20


# ------------------------------------------------------------------ rank worker
def rank_worker(sizes_mb: list[int], warmup: int, reps: int, out: str) -> int:
    """Inside ``horovodrun``/``mpirun``: time ``hvd.allreduce`` of each size; rank 0
    writes ``{"controller", "size", "times": {MB: [seconds per rep]}}`` to ``out``."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import horovod.tensorflow as hvd
    import numpy as np
    import tensorflow as tf

    hvd.init()
    tf.config.threading.set_intra_op_parallelism_threads(max(1, (os.cpu_count() or 1) // hvd.local_size()))
    barrier = tf.constant([1.0])
    times: dict[str, list[float]] = {}
    for mb in sizes_mb:
        t = tf.constant(np.full(mb * MIB // 4, 1.0, np.float32))
        name = f"bench_{mb}mb"
        for _ in range(warmup):
            hvd.allreduce(t, op=hvd.Sum, name=name).numpy()
        mine = []
        for _ in range(reps):
            hvd.allreduce(barrier, op=hvd.Sum, name="bench_barrier").numpy()
            t0 = time.perf_counter()
            r = hvd.allreduce(t, op=hvd.Sum, name=name)
            v = r.numpy()
            mine.append(time.perf_counter() - t0)
            if v[0] != hvd.size() or v[-1] != hvd.size():
                raise RuntimeError(f"allreduce of {mb} MB gave {v[0]}, {v[-1]}; expected {hvd.size()}")
        every = hvd.allgather(tf.constant([mine], tf.float64), name=f"times_{mb}mb").numpy()  # (ranks, reps)
        times[str(mb)] = [float(t) for t in every.max(axis=0)]  # no allgather_object: it pickles
    if hvd.rank() == 0:
        controller = "mpi" if hvd.mpi_enabled() else "gloo"
        Path(out).write_text(json.dumps({"controller": controller, "size": hvd.size(), "times": times}))
    hvd.shutdown()
    return 0


def run_controller(controller: str, sizes_mb: list[int], warmup: int, reps: int, tmp: Path) -> dict:
    """Start 2 ranks of this script under ``controller``'s launcher; return rank 0's JSON.

    Raises:
        RuntimeError: the launcher failed (its log tail in the message).
    """
    from distbench.launch import commands as C
    from distbench.strategies import horovod as H
    from distbench.launch.process import ProcSpec, log_tail, run_processes

    out = tmp / f"{controller}.json"
    prog = [sys.executable, str(Path(__file__).resolve()), "--rank-worker", "--sizes",
            ",".join(map(str, sizes_mb)), "--warmup", str(warmup), "--reps", str(reps), "--out", str(out)]
    if controller == "gloo":
        argv, env = C.horovodrun_command(2, C.localhost_hosts(2), prog, tmp / "gloo-logs", 120, sys.executable,
                                         horovodrun=H.find_horovodrun() or "horovodrun")
    else:
        argv, env = C.mpirun_command(2, C.localhost_hosts(2), prog, tmp / "mpi-logs", sys.executable,
                                     mpirun=shutil.which("mpirun") or "mpirun")
    log = tmp / f"{controller}.log"
    res = run_processes([ProcSpec(controller, argv, env, log)], timeout_s=900)
    if not res.ok:
        raise RuntimeError(f"{controller} run failed ({res.reason(900)}):\n{log_tail(log, 30)}")
    return json.loads(out.read_text())


# --------------------------------------------------------------- TCP loopback
def _tcp_receiver(port_q: "mp.Queue[int]", nbytes: int) -> None:
    ls = socket.create_server(("127.0.0.1", 0))
    port_q.put(ls.getsockname()[1])
    conn, _ = ls.accept()
    view = memoryview(bytearray(nbytes))
    try:
        while True:
            C.recv_exact(conn, view)
            conn.sendall(b"k")
    except (ConnectionError, OSError):
        pass
    finally:
        conn.close()
        ls.close()


def tcp_times(nbytes: int, warmup: int, reps: int) -> list[float]:
    """Seconds per one-way transfer of ``nbytes`` over loopback to another process
    (``sendall`` of the bytes, then a 1-byte acknowledgement), ``reps`` times."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=_tcp_receiver, args=(q, nbytes))
    proc.start()
    try:
        sock = socket.create_connection(("127.0.0.1", q.get(timeout=60)))
        data = bytes(nbytes)
        ack = memoryview(bytearray(1))
        out = []
        for i in range(warmup + reps):
            t0 = time.perf_counter()
            sock.sendall(data)
            C.recv_exact(sock, ack)
            if i >= warmup:
                out.append(time.perf_counter() - t0)
        sock.close()
        return out
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.terminate()


# -------------------------------------------------------------------- report
def machine_info() -> str:
    """One line: the common machine line plus Horovod and Open MPI versions."""
    ompi = "-"
    if shutil.which("mpirun"):
        try:
            first = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, timeout=30).stdout
            ompi = (first.splitlines() or ["-"])[0]
        except (OSError, subprocess.TimeoutExpired):
            pass
    return f"{C.machine_info()}, Horovod {C.version('horovod')}, {ompi}"


def gbps(nbytes: int, seconds: float) -> float:
    """GB/s (10^9 bytes per second) of ``nbytes`` moved in ``seconds``."""
    return nbytes / seconds / 1e9


def cell(nbytes: int, times: list[float], factor: float = 1.0) -> tuple[float, str]:
    """Median bandwidth (GB/s x ``factor``) and ``median [min-max]`` text."""
    bws = [gbps(nbytes, t) * factor for t in times]
    med = statistics.median(bws)
    return med, f"{med:.2f} [{min(bws):.2f}-{max(bws):.2f}]"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the Markdown section, optionally write it into a file."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 and 4 MB, 3 repetitions")
    ap.add_argument("--sizes", default="1,4,16,64", help="comma-separated tensor sizes in MB (2^20 bytes)")
    ap.add_argument("--reps", type=int, default=20, help="timed repetitions per size")
    ap.add_argument("--warmup", type=int, default=3, help="untimed warm-up calls per size")
    ap.add_argument("--controllers", default="gloo,mpi", help="gloo, mpi or both")
    ap.add_argument("--write", metavar="PATH", help="replace the allreduce section of PATH")
    ap.add_argument("--rank-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        ap.error(f"--sizes {args.sizes!r}: expected comma-separated integers (MB), e.g. 1,4,16,64")
    if not sizes or min(sizes) < 1 or args.reps < 1 or args.warmup < 0:
        ap.error("--sizes must be >= 1 MB, --reps >= 1, --warmup >= 0")
    controllers = [c.strip() for c in args.controllers.split(",") if c.strip()]
    if not controllers or set(controllers) - {"gloo", "mpi"}:
        ap.error(f"--controllers {args.controllers!r}: expected gloo, mpi or gloo,mpi")
    if args.rank_worker:
        return rank_worker(sizes, args.warmup, args.reps, args.out)
    reps, warmup = args.reps, args.warmup
    if args.quick:
        sizes, reps, warmup = [s for s in sizes if s <= 4] or sizes[:1], 3, 1
    started = time.time()
    load0 = C.load_average()
    tcp = {mb: tcp_times(mb * MIB, warmup, reps) for mb in sizes}
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="distbench-allreduce-") as tmp:
        for c in controllers:
            results[c] = run_controller(c, sizes, warmup, reps, Path(tmp))
            print(f"{c}: done", file=sys.stderr, flush=True)
    rows = []
    for mb in sizes:
        nbytes = mb * MIB
        t_med, t_txt = cell(nbytes, tcp[mb])
        rows.append(f"| {mb} | TCP loopback, one way | {statistics.median(tcp[mb]) * 1e3:.2f} | {t_txt} | - | 100% |")
        for c in controllers:
            times = results[c]["times"][str(mb)]
            n = results[c]["size"]
            _, a_txt = cell(nbytes, times)
            b_med, b_txt = cell(nbytes, times, 2 * (n - 1) / n)
            rows.append(f"| {mb} | Horovod {c}, {n} ranks | {statistics.median(times) * 1e3:.2f} "
                        f"[{min(times) * 1e3:.2f}-{max(times) * 1e3:.2f}] | {a_txt} | {b_txt} | "
                        f"{b_med / t_med:.0%} |")
    cmd = "python " + " ".join([Path(sys.argv[0]).as_posix()] + (argv if argv is not None else sys.argv[1:]))
    md = "\n".join([
        "## Horovod allreduce bandwidth (`benchmarks/allreduce.py`)", "",
        f"- date: {C.utc_now()}",
        f"- machine: {machine_info()}",
        f"- command: `{cmd}`",
        f"- 2 ranks on this machine, float32 `hvd.allreduce(op=Sum)` in eager mode; {warmup} warm-up "
        f"calls then {reps} timed repetitions per size, each after a barrier allreduce, a repetition's "
        "time = the slowest rank's; cells are median [min-max]; GB = 10^9 bytes, MB = 2^20 bytes. "
        "algbw = size / time, busbw = algbw x 2(n-1)/n (NCCL-tests convention; = algbw for 2 ranks). "
        "TCP loopback: the same bytes sent once between two processes over 127.0.0.1 (plain sockets, "
        "1-byte acknowledgement); last column = busbw / TCP median. Horovod's Gloo ring runs over TCP "
        "on loopback; Open MPI moves data between ranks of one host through shared memory (its default "
        "`vader` BTL), so for MPI the TCP column is a reference point, not its transport. "
        f"Load average at start {load0}; run took {time.time() - started:.0f} s.", "",
        "| size MB | transport | time ms | algbw GB/s | busbw GB/s | busbw / TCP |",
        "|---|---|---|---|---|---|", *rows, ""])
    print(md)
    if args.write:
        C.write_section(args.write, "allreduce", md)
        print(f"wrote section to {args.write}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
