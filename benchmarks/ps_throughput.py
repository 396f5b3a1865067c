"""Parameter-server throughput: commit+pull round trips through ``ParameterServer``.

For models of 0.1 M, 1 M and 10 M float32 parameters and 1, 2, 4 and 8 client
*processes* (so the GIL bounds nothing but the server), measures round trips
per second, where one round trip is ``commit(delta)`` then ``pull()`` (two
requests, the plain API) and, as a second figure, ``commit_and_pull`` (one
request).  In the same run it measures a raw loopback TCP echo of the same
bytes (send N bytes, receive N bytes back, one stream, plain sockets in two
processes) as the ceiling.  Each cell: warm-up, then several repetitions;
the median and the min-max spread are reported.  "MB/s" counts payload bytes
moved in both directions (2 x model bytes per round trip).

Usage::

    PYTHONPATH=src python benchmarks/ps_throughput.py [--quick] [--write BENCHMARKS.md]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import socket
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402  (also makes a checkout's src/ importable)

import zmq  # noqa: E402

from distbench.ps_async.client import PSClient  # noqa: E402
from distbench.ps_async.protocol import new_secret  # noqa: E402
from distbench.ps_async.server import ParameterServer  # noqa: E402



def template_for(n_params: int) -> list:
    """Two tensors (a big 'kernel' and a 1000-wide 'bias') totalling ``n_params`` float32."""
    bias = min(1000, n_params // 10)
    return [((n_params - bias,), np.dtype("float32")), ((bias,), np.dtype("float32"))]


# ----------------------------------------------------------------------------- raw echo
def _echo_server(port_q, nbytes):
    ls = socket.create_server(("127.0.0.1", 0))
    port_q.put(ls.getsockname()[1])
    conn, _ = ls.accept()
    view = memoryview(bytearray(nbytes))
    try:
        while True:
            C.recv_exact(conn, view)
            conn.sendall(view)
    except (ConnectionError, OSError):
        pass
    finally:
        conn.close()
        ls.close()


class Echo:
    """Plain TCP echo of ``nbytes`` (server in another process): the loopback ceiling."""

    def __init__(self, nbytes: int, warmup: int) -> None:
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        self.proc = ctx.Process(target=_echo_server, args=(q, nbytes))
        self.proc.start()
        self.sock = socket.create_connection(("127.0.0.1", q.get(timeout=60)))
        self.data = np.full(nbytes, 7, np.uint8)
        self.back = memoryview(bytearray(nbytes))
        for _ in range(warmup):
            self._rt()

    def _rt(self):
        self.sock.sendall(self.data)
        C.recv_exact(self.sock, self.back)

    def rep(self, iters: int) -> float:
        """Round trips per second over ``iters`` echoes."""
        t0 = time.perf_counter()
        for _ in range(iters):
            self._rt()
        return iters / (time.perf_counter() - t0)

    def close(self) -> None:
        self.sock.close()
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.terminate()


def _zmq_echo_server(port_q):
    ctx = zmq.Context(io_threads=1)
    sock = ctx.socket(zmq.ROUTER)
    port_q.put(sock.bind_to_random_port("tcp://127.0.0.1"))
    try:
        while True:
            frames = sock.recv_multipart(copy=False)
            if len(frames) == 2 and len(frames[1]) == 0:  # the client's goodbye
                break
            sock.send_multipart(frames, copy=False)  # identity + payload, by reference
    finally:
        sock.close(0)
        ctx.term()


class ZmqEcho(Echo):
    """ZeroMQ echo of ``nbytes`` (DEALER client, ROUTER server in another process, zero-copy
    send and receive, one I/O thread each: the parameter server's own transport and settings,
    with no server or client work): the ceiling of any ZeroMQ parameter server."""

    def __init__(self, nbytes: int, warmup: int) -> None:
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        self.proc = ctx.Process(target=_zmq_echo_server, args=(q,))
        self.proc.start()
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(f"tcp://127.0.0.1:{q.get(timeout=60)}")
        self.data = np.full(nbytes, 7, np.uint8)
        for _ in range(warmup):
            self._rt()

    def _rt(self):
        self.sock.send(self.data, copy=False)
        self.sock.recv(copy=False)

    def close(self) -> None:
        self.sock.send(b"")
        self.sock.close(0)
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.terminate()


# ----------------------------------------------------------------------------- PS clients
def _ps_client(address, secret, wid, n_params, iters, warmup, reps, fused, barrier, out_q,
               tune=None):
    tmpl = template_for(n_params)
    delta = [np.full(s, 1e-6, dtype) for s, dtype in tmpl]
    client = PSClient(address, secret, wid, tmpl, timeout_s=120, tune_malloc=tune)
    seq = 0
    _, clock = client.pull()

    def round_trip():
        nonlocal seq, clock
        if fused:
            _, clock, _ = client.commit_and_pull(delta, seq, clock)
        else:
            client.commit(delta, seq, clock)
            _, clock = client.pull()
        seq += 1

    for _ in range(warmup):
        round_trip()
    out_q.put(("ready", wid, 0.0, 0.0))
    for _ in range(reps):
        barrier.wait()  # idle (blocked) while the parent measures the echo
        t0 = time.perf_counter()
        for _ in range(iters):
            round_trip()
        out_q.put(("rep", wid, t0, time.perf_counter()))
    client.done()
    client.close()


def bench_cell(n_params, n_clients, iters, warmup, reps, fused, echo, io_threads=1, tune=None, zecho=None):
    """One (size, clients) cell: alternate echo repetitions (TCP, then ZeroMQ when ``zecho``
    is given) and a PS repetition.

    Pairing each PS repetition with an echo repetition measured just before it
    (PS clients idle meanwhile) keeps the ratio meaningful on a shared machine
    whose background load drifts.

    Returns:
        ``(ps_rates, echo_rates, zmq_echo_rates)``: aggregate PS round trips/s and the
        echoes' round trips/s, one of each per repetition (``zmq_echo_rates`` empty
        without ``zecho``).
    """
    ctx = mp.get_context("spawn")
    secret = new_secret()
    init = [np.zeros(s, dtype) for s, dtype in template_for(n_params)]
    server = ParameterServer(init, "downpour", secret, num_workers=n_clients,
                             io_threads=io_threads, tune_malloc=tune).start()
    procs = []
    try:
        barrier, out_q = ctx.Barrier(n_clients + 1), ctx.Queue()
        procs = [ctx.Process(target=_ps_client, args=(server.address, secret, k, n_params, iters,
                                                      warmup, reps, fused, barrier, out_q, tune))
                 for k in range(n_clients)]
        for p in procs:
            p.start()
        for _ in range(n_clients):
            assert out_q.get(timeout=600)[0] == "ready"
        ps_rates, echo_rates, zecho_rates = [], [], []
        for _ in range(reps):
            echo_rates.append(echo.rep(iters))
            if zecho is not None:
                zecho_rates.append(zecho.rep(iters))
            barrier.wait()
            got = [out_q.get(timeout=600) for _ in range(n_clients)]
            wall = max(g[3] for g in got) - min(g[2] for g in got)
            ps_rates.append(n_clients * iters / wall)
        for p in procs:
            p.join(60)
            if p.exitcode != 0:
                raise RuntimeError(f"client process exited with {p.exitcode}")
        st = server.stats()
        if st["rejected"]["total"]:
            raise RuntimeError(f"server rejected messages: {st['rejected']}")
        return ps_rates, echo_rates, zecho_rates
    finally:
        server.stop()
        for p in procs:
            if p.is_alive():
                p.terminate()


# ----------------------------------------------------------------------------- report
def machine_info() -> str:
    """One line: the common machine line plus NumPy, pyzmq and libzmq versions."""
    return f"{C.machine_info()}, NumPy {np.__version__}, pyzmq {zmq.__version__} (libzmq {zmq.zmq_version()})"


def fmt(rates, scale=1.0, digits=1):
    """``"median [min-max]"`` of ``rates * scale``."""
    m, lo, hi = (statistics.median(rates) * scale, min(rates) * scale, max(rates) * scale)
    return f"{m:,.{digits}f} [{lo:,.{digits}f}-{hi:,.{digits}f}]"


def pct(ratios):
    """``"median% [min%-max%]"``."""
    return (f"{statistics.median(ratios):.0%} [{min(ratios):.0%}-{max(ratios):.0%}]")


def main(argv=None) -> int:
    """Run the benchmark, print the Markdown section, optionally write it into a file."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: a few seconds")
    ap.add_argument("--sizes", default="100000,1000000,10000000",
                    help="comma-separated parameter counts")
    ap.add_argument("--clients", default="1,2,4,8", help="comma-separated client counts")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions per cell")
    ap.add_argument("--mb-per-rep", type=float, default=800.0,
                    help="payload MB each client moves per repetition (sets iterations)")
    ap.add_argument("--no-fused", action="store_true", help="skip the commit_and_pull column")
    ap.add_argument("--io-threads", type=int, default=1, help="server ZeroMQ I/O threads")
    ap.add_argument("--no-tune-malloc", dest="tune_malloc", action="store_const", const=False,
                    default=None, help="pass tune_malloc=False to server and clients (default: "
                    "auto, i.e. glibc mmap threshold raised for messages > 16 MiB)")
    ap.add_argument("--write", metavar="PATH", help="replace the ps_throughput section of PATH")
    args = ap.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    clients = [int(c) for c in args.clients.split(",")]
    reps, mb_per_rep, warmup = args.reps, args.mb_per_rep, 2
    if args.quick:
        sizes, clients, reps, mb_per_rep, warmup = [100_000, 1_000_000], [1, 2], 2, 40.0, 1
    started = time.time()
    load0 = C.load_average()
    rows, echo_rows, zecho_rows = [], [], []
    for n in sizes:
        nbytes = 4 * n
        mb = 2 * nbytes / 1e6
        iters = int(min(5000, max(3, mb_per_rep * 1e6 / (2 * nbytes))))
        echo, zecho = Echo(nbytes, warmup), ZmqEcho(nbytes, warmup)
        all_echo, all_zecho = [], []
        try:
            for k in clients:
                ps, ech, _ = bench_cell(n, k, iters, warmup, reps, False, echo, args.io_threads,
                                        args.tune_malloc)
                all_echo += ech
                cells = [f"{n / 1e6:g} M", str(k), fmt(ps), fmt(ps, mb, 0),
                         pct([p / e for p, e in zip(ps, ech)])]
                if not args.no_fused:
                    fu, ech, zech = bench_cell(n, k, iters, warmup, reps, True, echo, args.io_threads,
                                               args.tune_malloc, zecho)
                    all_echo += ech
                    all_zecho += zech
                    cells += [fmt(fu), pct([p / e for p, e in zip(fu, ech)]),
                              pct([p / e for p, e in zip(fu, zech)]), pct([z / e for z, e in zip(zech, ech)])]
                else:
                    cells += ["-"] * 4
                rows.append("| " + " | ".join(cells) + " |")
                print(rows[-1], file=sys.stderr, flush=True)
        finally:
            echo.close()
            zecho.close()
        echo_rows.append(f"| {n / 1e6:g} M | {nbytes / 1e6:g} MB | TCP | {fmt(all_echo)} | "
                         f"{fmt(all_echo, mb, 0)} |")
        if all_zecho:
            zecho_rows.append(f"| {n / 1e6:g} M | {nbytes / 1e6:g} MB | ZeroMQ | {fmt(all_zecho)} | "
                              f"{fmt(all_zecho, mb, 0)} |")
    cmd = "python " + " ".join([Path(sys.argv[0]).as_posix()] + (argv or sys.argv[1:]))
    md = "\n".join([
        "## Parameter-server throughput (`benchmarks/ps_throughput.py`)", "",
        f"- date: {C.utc_now()}",
        f"- machine: {machine_info()}",
        f"- command: `{cmd}`",
        f"- {reps} timed repetitions after {warmup} warm-up round trips per client; cells "
        "are median [min-max]; MB/s counts payload in both directions (2 x model bytes "
        "per round trip); clients are separate processes; optimizer DOWNPOUR (C += delta); "
        f"tune_malloc={'auto' if args.tune_malloc is None else args.tune_malloc}; "
        f"load average at start {load0}; "
        f"run took {time.time() - started:.0f} s.", "",
        "Echoes of the same bytes, one stream between two processes, all repetitions of that "
        "size: raw loopback TCP (plain sockets: the loopback ceiling) and ZeroMQ (DEALER to "
        "ROUTER, zero-copy, one I/O thread each: the parameter server's transport with no "
        "server or client work, the ceiling of any ZeroMQ parameter server):", "",
        "| params | bytes each way | transport | round trips/s | MB/s |", "|---|---|---|---|---|",
        *sorted(echo_rows + zecho_rows), "",
        "Through the parameter server. One round trip = `commit(delta)` + `pull()` (two "
        "requests), or `commit_and_pull` (one request). \"vs loopback\" = aggregate PS round "
        "trips/s divided by one echo stream's round trips/s, each PS repetition paired with "
        "an echo repetition measured just before it (so background load hits both); "
        "\"vs ZeroMQ echo\" the same against the ZeroMQ echo, and \"ZeroMQ echo vs loopback\" "
        "the transport's own share of the loopback ceiling:", "",
        "| params | clients | commit+pull rt/s | MB/s | vs loopback | commit_and_pull rt/s "
        "| vs loopback | vs ZeroMQ echo | ZeroMQ echo vs loopback |", "|---|---|---|---|---|---|---|---|---|",
        *rows, ""])
    print(md)
    if args.write:
        C.write_section(args.write, "ps_throughput", md)
        print(f"wrote section to {args.write}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
