"""Step time across strategies against the compute floor, and the scaling model
(``distbench predict``) checked against the same measurements.

One run directory, built by ``distbench run`` and extended round by round with
``--resume --repeats k`` (each round runs one repetition of every configuration, odd
rounds in reverse order, so a drift in the machine's load hits all of them alike): the
``synthetic`` dataset
(random 32x32x3 images, 10 classes), a CNN whose convolutions dominate the compute
(``cnn``, filters [32, 64], hidden [128]: ~12.3 MFLOP forward per sample, 545 k
parameters = 2.2 MB), global batch 64, SGD, 2 workers, for ``single``, ``mirrored``,
``multi_worker_mirrored``, ``horovod``, ``keras_jax:data_parallel`` (Keras 3's own
``DataParallel`` on JAX, one process over 2 CPU devices), ``keras_jax:multi_process`` (the
same over 2 processes, Gloo) and ``spark_ps:adag``; then ``horovod`` and
``spark_ps:adag`` on 1 worker too (the 1-worker points of the model's validation).

- **samples/s** of a configuration = training samples per epoch / steady-state epoch
  seconds, where the steady-state epoch time is the difference of consecutive epoch-end
  times on the record's curve after the first epoch (the first epoch, with tracing and
  Spark/Horovod start-up, is each run's warm-up); median [min-max] over the rounds.
  The record's own ``samples_per_s`` (over all of ``train_s``) is shown for information.
- **compute floor**: training FLOPs per sample (3 x the forward FLOPs, counted
  analytically from the layer shapes by :func:`distbench.predict.forward_flops`, and
  cross-checked with TensorFlow's graph profiler) over the machine's float32 matmul
  rate (the best GFLOP/s of a 2048 x 2048 ``tf.matmul`` with every core, in a fresh
  process, before and after the strategies run). Fraction of floor = samples/s / floor
  samples/s.
- **scaling model**: :func:`distbench.predict.predict` fed with single's steady-state
  step time, the model's bytes and this machine's loopback TCP bandwidth and latency
  (measured in the same run: a 2.2 MB one-way transfer and a 1-byte ping-pong between
  two processes) predicts the epoch time of ``mirrored``/``multi_worker_mirrored``/
  ``horovod`` (ring allreduce) and ``spark_ps:adag`` (one server, ADAG's window) on 1
  and 2 workers; compared with the measured steady-state epoch times. Two predictions
  for 2 workers: as the model assumes (each worker has its own hardware: a step at half
  the batch takes half of single's step time) and contention-adjusted (the 2 workers
  share the 2 cores: a step takes single's full step time).

Usage::

    python benchmarks/step_time.py [--quick] [--reps N] [--write BENCHMARKS.md]
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
import _common as C  # noqa: E402

SECTION, MODEL_SECTION = "step_time", "scaling_model"
STRATEGIES = ["single", "mirrored", "multi_worker_mirrored", "horovod", "keras_jax:data_parallel",
              "keras_jax:multi_process", "spark_ps:adag"]
ONE_WORKER = ["horovod", "spark_ps:adag"]
# CONFIG's model, input and classes, for the compute probe's FLOP count
CNN_SPEC = {"model": {"name": "cnn", "filters": [32, 64], "hidden": [128]}, "input_shape": [32, 32, 3], "classes": 10}


# ------------------------------------------------------------- compute probe
def compute_worker(out: str, n: int, reps: int, model_json: str) -> int:
    """In a fresh process with every core: time ``reps`` float32 ``n x n`` matmuls
    (after 2 warm-ups) and count the model's forward FLOPs with TF's profiler.

    Writes ``{"gflops": [per repetition], "profiler_forward_flops": int | None}`` to ``out``.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(os.cpu_count() or 1)
    a = tf.random.normal([n, n], dtype=tf.float32, seed=1)
    b = tf.random.normal([n, n], dtype=tf.float32, seed=2)
    inner = max(1, int(4e9 / (2 * n ** 3)))  # ~4 GFLOP per timing
    for _ in range(2):
        float(tf.matmul(a, b)[0, 0])
    rates = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            c = tf.matmul(a, b)
        float(c[0, 0])
        rates.append(inner * 2 * n ** 3 / (time.perf_counter() - t0) / 1e9)
    prof = None
    try:
        from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
        from tensorflow.python.profiler import model_analyzer, option_builder

        from distbench.config import ModelConfig
        from distbench.models import build_model

        spec = json.loads(model_json)
        m = build_model(ModelConfig(**spec["model"]), tuple(spec["input_shape"]), spec["classes"])
        f = tf.function(lambda x: m(x, training=False)).get_concrete_function(
            tf.TensorSpec([1, *spec["input_shape"]], tf.float32))
        opts = option_builder.ProfileOptionBuilder.float_operation()
        opts["output"] = "none"
        prof = int(model_analyzer.profile(graph=convert_variables_to_constants_v2(f).graph,
                                          options=opts).total_float_ops)
    except Exception as e:  # the profiler is a cross-check only
        print(f"profiler FLOPs unavailable: {type(e).__name__}: {e}", file=sys.stderr)
    Path(out).write_text(json.dumps({"gflops": rates, "profiler_forward_flops": prof, "n": n}))
    return 0


def run_compute_probe(tmp: Path, tag: str, n: int, reps: int, spec: dict) -> dict:
    """Run :func:`compute_worker` in a fresh process; return its JSON."""
    out = tmp / f"compute_{tag}.json"
    cp = subprocess.run([sys.executable, __file__, "--compute-worker", "--out", str(out), "--n", str(n),
                         "--reps", str(reps), "--model-json", json.dumps(spec)],
                        capture_output=True, text=True, env=C.child_env(), timeout=900)
    if cp.returncode != 0:
        raise RuntimeError(f"compute probe failed:\n{(cp.stdout + cp.stderr)[-2000:]}")
    return json.loads(out.read_text())


# ------------------------------------------------------------- loopback probe
def _sink(port_q: "mp.Queue[int]", nbytes: int) -> None:
    ls = socket.create_server(("127.0.0.1", 0))
    port_q.put(ls.getsockname()[1])
    conn, _ = ls.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    big, one = memoryview(bytearray(nbytes)), memoryview(bytearray(1))
    try:
        while True:
            C.recv_exact(conn, one)
            if one[0] == 1:  # ping
                conn.sendall(b"p")
            else:  # a bulk transfer follows
                C.recv_exact(conn, big)
                conn.sendall(b"k")
    except (ConnectionError, OSError):
        pass
    finally:
        conn.close()
        ls.close()


def loopback(nbytes: int, reps: int) -> dict:
    """Loopback TCP between two processes: one-way latency (half a 1-byte round trip) and
    bandwidth for ``nbytes`` transfers (``nbytes / (transfer time - round trip)``).

    Returns ``{"latency_s": [...], "bandwidth_Bps": [...]}`` (one value per repetition,
    each repetition the median of its iterations)."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=_sink, args=(q, nbytes), daemon=True)
    proc.start()
    try:
        sock = socket.create_connection(("127.0.0.1", q.get(timeout=60)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ack = memoryview(bytearray(1))
        payload = b"\x02" + bytes(nbytes)

        def ping() -> float:
            t0 = time.perf_counter()
            sock.sendall(b"\x01")
            C.recv_exact(sock, ack)
            return time.perf_counter() - t0

        def bulk() -> float:
            t0 = time.perf_counter()
            sock.sendall(payload)
            C.recv_exact(sock, ack)
            return time.perf_counter() - t0

        for _ in range(20):
            ping(), bulk()
        lat, bw = [], []
        for _ in range(reps):
            rtt = statistics.median(ping() for _ in range(200))
            t = statistics.median(bulk() for _ in range(20))
            lat.append(rtt / 2)
            bw.append(nbytes / max(t - rtt, 1e-9))
        sock.close()
        return {"latency_s": lat, "bandwidth_Bps": bw}
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.terminate()


# ------------------------------------------------------------------ the run
CONFIG = """\
[data]
name = "synthetic"
samples = {samples}
image_shape = [32, 32, 3]
classes = 10
[model]
name = "cnn"
filters = [32, 64]
hidden = [128]
[training]
epochs = {epochs}
global_batch_size = {batch}
optimizer = "sgd"
[run]
strategies = {strategies}
workers = [2]
timeout_s = 1800.0
"""


def steady(rec: dict) -> tuple[float | None, float | None]:
    """(steady-state samples/s, steady-state seconds per epoch) of a record, or Nones."""
    ep = C.steady_epoch_s(rec)
    if not ep or not rec.get("epochs"):
        return None, None
    per_epoch = rec["samples"] / rec["epochs"]
    e = statistics.median(ep)
    return per_epoch / e, e


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print its Markdown sections, optionally write them into a file."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 256 samples, 2 epochs, single and mirrored, one round")
    ap.add_argument("--reps", type=int, default=3, help="rounds (one repetition of every strategy each)")
    ap.add_argument("--epochs", type=int, default=3, help="epochs per run (the first is the warm-up)")
    ap.add_argument("--samples", type=int, default=2048, help="synthetic samples (80%% x 90%% train)")
    ap.add_argument("--batch-size", type=int, default=64, help="global batch size")
    ap.add_argument("--strategies", default=",".join(STRATEGIES), help="comma-separated strategies")
    ap.add_argument("--no-one-worker", action="store_true", help="skip the 1-worker horovod/adag runs")
    ap.add_argument("--write", metavar="PATH", help="replace the step_time and scaling_model sections of PATH")
    ap.add_argument("--keep", metavar="DIR", help="keep the run directory and logs in DIR")
    ap.add_argument("--compute-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=2048, help=argparse.SUPPRESS)
    ap.add_argument("--model-json", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.compute_worker:
        return compute_worker(args.out, args.n, args.reps, args.model_json)
    reps, epochs, samples, n_mm = args.reps, args.epochs, args.samples, 2048
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    one_worker = [] if args.no_one_worker else [s for s in ONE_WORKER if s in strategies]
    if args.quick:
        reps, epochs, samples, n_mm, strategies, one_worker = 1, 2, 256, 1024, ["single", "mirrored"], []
    if reps < 1 or epochs < 2:
        ap.error("--reps >= 1 and --epochs >= 2 (the first epoch is the warm-up)")
    started, load0 = time.time(), C.load_average()
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="distbench-steptime-"))
    tmp.mkdir(parents=True, exist_ok=True)
    from distbench.config import ModelConfig
    from distbench.predict import forward_flops

    spec = CNN_SPEC
    fwd = forward_flops(ModelConfig(**spec["model"]), spec["input_shape"], spec["classes"])
    try:
        mm_before = run_compute_probe(tmp, "before", n_mm, 2 if args.quick else 5, spec)
        cfg = tmp / "steptime.toml"
        cfg.write_text(CONFIG.format(samples=samples, epochs=epochs, batch=args.batch_size,
                                     strategies=json.dumps(strategies)))
        run_dir, log = tmp / "run", tmp / "distbench.log"
        for k in range(reps):
            # Round k adds repetition k of every configuration; odd rounds run them in reverse
            # order, so a drift in the machine's load does not favour the early strategies.
            ahead = k % 2 == 0
            calls = [["--strategies", ",".join(strategies if ahead else strategies[::-1])]]
            if one_worker:
                calls.append(["--workers", "1", "--strategies", ",".join(one_worker if ahead else one_worker[::-1])])
            for extra in (calls if ahead else calls[::-1]):
                a = ["run", str(cfg), "--out", str(run_dir), "--repeats", str(k + 1), *extra]
                C.run_distbench(a + (["--resume"] if run_dir.exists() else []), log)
            print(f"round {k} done", file=sys.stderr, flush=True)
        mm_after = mm_before if args.quick else run_compute_probe(tmp, "after", n_mm, 5, spec)
        recs = C.read_records(run_dir)
        model_bytes = recs[0]["workload"]["num_parameters"] * 4
        net = loopback(model_bytes, 2 if args.quick else 5)
        from distbench.predict import inputs_from_run

        inputs = inputs_from_run(run_dir)
        sections = render(recs, strategies, one_worker, fwd, mm_before, mm_after, net, inputs, reps, epochs,
                          samples, args.batch_size, C.command_line("step_time.py", argv), time.time() - started,
                          load0)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    for md in sections.values():
        print(md)
    if args.write:
        for name, md in sections.items():
            C.write_section(args.write, name, md)
        print(f"wrote sections {', '.join(sections)} to {args.write}", file=sys.stderr)
    return 0


def render(recs: list[dict], strategies: list[str], one_worker: list[str], fwd: int, mm_before: dict,
           mm_after: dict, net: dict, inputs, reps: int, epochs: int, samples: int, batch: int, cmd: str,
           took: float, load0: str) -> dict[str, str]:
    """The ``step_time`` and ``scaling_model`` Markdown sections."""
    from distbench.predict import predict

    gflops = mm_before["gflops"] + mm_after["gflops"]
    rate = max(gflops) * 1e9  # the floor is a bound: the machine's best observed rate
    train_flops = 3 * fwd
    floor = rate / train_flops
    groups: dict[tuple[str, int], list[dict]] = {}
    for r in recs:
        groups.setdefault((r["strategy"], r["workers"]), []).append(r)
    bad = [f"`{r['config_id']}` r{r['repeat']}: {r['status']}: {r.get('reason', '')}"
           for r in recs if r["status"] != "ok"]
    ok = {k: [r for r in v if r["status"] == "ok"] for k, v in groups.items()}
    single = [steady(r)[0] for r in ok.get(("single", 1), [])]
    n_train = recs[0]["workload"]["sizes"]["train"]
    rows = []
    order = [(s, 1 if s == "single" else 2) for s in strategies] + [(s, 1) for s in one_worker]
    for key in order:
        rs = ok.get(key, [])
        if not rs:
            st = groups.get(key, [{}])[0].get("status", "not run")
            rows.append(f"| `{key[0]}` | {key[1]} | {st} | - | - | - |")
            continue
        sps = [steady(r)[0] for r in rs]
        med = C.median(sps)
        sp = C.ratio_spread(sps, single)[1] if single else "-"
        rows.append(f"| `{key[0]}` | {key[1]} | {C.spread(sps, '{:,.0f}')} | "
                    f"{C.spread([r['samples_per_s'] for r in rs], '{:,.0f}')} | "
                    f"{med / floor:.0%} | {sp} |")
    prof = mm_before.get("profiler_forward_flops")
    step = [
        "## Step time across strategies vs the compute floor (`benchmarks/step_time.py`)", "",
        f"- date: {C.utc_now()}",
        f"- machine: {C.machine_info()}; Horovod {C.version('horovod')}, pyspark {C.version('pyspark')}",
        f"- command: `{cmd}`",
        f"- workload: synthetic {samples} samples 32x32x3 ({n_train} for training), `cnn` filters [32, 64] "
        f"hidden [128] ({recs[0]['workload']['num_parameters']:,} parameters), global batch {batch}, SGD, "
        f"{epochs} epochs per run; {reps} round(s), each adding one repetition of every configuration "
        "(`distbench run --resume`, each configuration in a fresh process; odd rounds in reverse order); the "
        "first epoch of every run is its warm-up and is not timed. "
        f"Load average at start {load0}; the benchmark took {took:.0f} s.",
        f"- compute floor: forward {fwd / 1e6:.2f} MFLOP/sample counted from the layer shapes (TensorFlow's "
        f"profiler: {prof / 1e6:.2f} MFLOP incl. bias/ReLU/pooling) x 3 for a training step = "
        f"{train_flops / 1e6:.1f} MFLOP/sample; float32 matmul ({mm_before['n']}x{mm_before['n']}, all cores, "
        f"fresh process) {C.spread(mm_before['gflops'], '{:.1f}')} GFLOP/s before and "
        f"{C.spread(mm_after['gflops'], '{:.1f}')} after the runs; floor = peak rate ({max(gflops):.1f} GFLOP/s) "
        f"/ FLOPs per sample = **{floor:,.0f} samples/s**. It is a first-order floor: it assumes the convolutions "
        "run at the matmul rate with the direct algorithm (oneDNN may use Winograd, which needs fewer FLOPs), "
        "and the first layer's input gradient, counted in the 3x, is never computed." if prof else
        f"- compute floor: forward {fwd / 1e6:.2f} MFLOP/sample (layer shapes) x 3 = {train_flops / 1e6:.1f} "
        f"MFLOP/sample; matmul {C.spread(gflops, '{:.1f}')} GFLOP/s; floor (peak rate) **{floor:,.0f} samples/s**.",
        "- samples/s (steady) = training samples per epoch / median steady-state epoch seconds (curve "
        "epoch-end times after epoch 1); samples/s (record) = the record's `samples_per_s` over all of "
        "`train_s` (first epoch included). Cells: median [min-max] over rounds. speed-up = ratio of "
        "steady samples/s to single's (bracket: per-round range).", "",
        "| strategy | workers | samples/s (steady) | samples/s (record) | of floor | speed-up vs single |",
        "|---|---|---|---|---|---|", *rows, ""]
    if bad:
        step += ["Runs that did not finish ok: " + "; ".join(bad), ""]

    # --- the scaling model against the measurements
    bw, lat = statistics.median(net["bandwidth_Bps"]), statistics.median(net["latency_s"])
    G, step_s = inputs.global_batch, inputs.step_s
    n_epoch = (n_train // G) * G  # samples actually trained per epoch (remainder dropped)
    win = inputs.window or 12
    val = []
    for key in order:
        rs = ok.get(key, [])
        if not rs:
            continue
        meas = [steady(r)[1] for r in rs]
        n = key[1]
        kind = "ps" if key[0].startswith("spark_ps") else "allreduce"

        def pred(compute: float) -> float:
            p = predict(compute, inputs.model_bytes, n_epoch, G // n, bw, lat, [n], win)[0]
            return p.ps_epoch_s if kind == "ps" else p.allreduce_epoch_s

        dedicated = pred(step_s * (G // n) / G)
        shared = pred(step_s)
        m = C.median(meas)
        note = "calibration point (the model's compute input)" if key == ("single", 1) else ""
        val.append(f"| `{key[0]}` | {n} | {'one server, window ' + str(win) if kind == 'ps' else 'ring allreduce'} "
                   f"| {C.spread(meas, '{:.3f}')} | {dedicated:.3f} ({dedicated / m:.2f}) | "
                   f"{shared:.3f} ({shared / m:.2f}) | {note} |")
    ten = predict(step_s, inputs.model_bytes, n_epoch, G, 1.25e9, 50e-6, window=win)
    from distbench.predict import format_table

    model = [
        "## Scaling model vs measurements (`distbench predict`, from `benchmarks/step_time.py`)", "",
        f"- date: {C.utc_now()}; same run as the step-time section; command: `{cmd}`",
        f"- inputs: compute per step = single's steady-state step time {step_s * 1e3:.2f} ms at batch {G} "
        f"({inputs.records} runs); model {inputs.model_bytes / 1e6:.2f} MB; loopback TCP measured in this "
        f"run between two processes: bandwidth {C.spread([b / 1e9 for b in net['bandwidth_Bps']], '{:.2f}')} "
        f"GB/s for {inputs.model_bytes / 1e6:.1f} MB transfers, latency "
        f"{C.spread([x * 1e6 for x in net['latency_s']], '{:.1f}')} us (half a 1-byte round trip); the "
        f"median values are used. ADAG's window: {win}.",
        "- predicted epoch seconds, with predicted / measured in brackets. *dedicated*: the model as "
        "written (per-worker batch G/N, compute scaled linearly: each worker is assumed to have the whole "
        "machine); *shared cores*: N workers on this machine's 2 cores, so each step of G/N samples "
        "takes single's full step time. Measured = median steady-state epoch [min-max].", "",
        "| configuration | N | model | measured epoch s | predicted, dedicated | predicted, shared cores | |",
        "|---|---|---|---|---|---|---|", *val, "",
        f"Extrapolation with the same compute and model size on 10 GbE (1.25e9 B/s, 50 us; weak scaling, "
        f"batch {G} per worker, {n_epoch} samples per epoch, ADAG window {win}): `distbench predict "
        f"--run-dir DIR` prints this table and writes `DIR/predict.png`.", "",
        "```", format_table(ten), "```", "", *TRUST, ""]
    return {SECTION: "\n".join(step), MODEL_SECTION: "\n".join(model)}


TRUST = [
    "Where the model stops being trustworthy: it has no contention (workers sharing cores, memory "
    "bandwidth or a NIC: here the 2 workers share 2 cores, hence the *shared cores* column), no "
    "stragglers or variance (a synchronous step waits for the slowest worker), no overlap of "
    "communication with computation and no per-call framework costs (Python, gRPC collectives, input "
    "pipelines, Spark, serialization: they dominate small models and are why `multi_worker_mirrored` "
    "is slower than predicted), a single un-sharded server, one bandwidth/latency pair (no topology, "
    "no NCCL vs TCP/Gloo/MPI differences, no congestion at hundreds of workers), and it predicts time "
    "per epoch only: staleness and larger effective batches change how many epochs reach an accuracy. "
    "Its compute input is `single`'s step time, so a replica whose own per-step costs exceed "
    "`single`'s (Horovod's per-step Python call and its allreduce op, the Spark replica's commits "
    "and pulls) is slower than predicted even with one worker: compare the 1-worker rows.",
]


if __name__ == "__main__":
    raise SystemExit(main())
