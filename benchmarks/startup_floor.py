"""Each strategy's start-up next to the bare floor of its own engine.

A configuration's start-up is read from its record (``distbench run --strategies S
--workers 2 --epochs 1``, the embedded digits workload): ``timings.phases.engine_start_s``
(the strategy's own start-up: from the workload loaded to the first step, tracing
excluded) and ``timings.startup_s`` (spawn of the configuration's process to its first
step). The *floor* of its engine is the same processes started by the same launcher
doing nothing but the engine's own start, timed from spawn to "ready" (the last process
to be ready; each writes its ready time to a file), with the environment distbench gives
its children (:func:`distbench.launch.commands.child_env`; ``horovodrun``/``mpirun`` from
distbench's own builders, :func:`~distbench.launch.commands.horovodrun_command` and
:func:`~distbench.launch.commands.mpirun_command`, so the flags are the same):

- ``single``: ``python -c "import tensorflow, keras"`` (every strategy builds a Keras model);
- ``mirrored``: the same, then N logical CPU devices and a ``MirroredStrategy`` over them;
- ``multi_worker_mirrored``: N processes with ``TF_CONFIG`` on loopback ports, each
  building ``MultiWorkerMirroredStrategy`` (ring) and running one all-reduce;
- ``tf_ps``: the N worker and ``tf.ps_tasks`` ps ``tf.distribute.Server`` processes
  distbench starts (same inter-op/intra-op threads) and a coordinator process that builds
  ``ParameterServerStrategy`` and a ``ClusterCoordinator`` on them;
- ``horovod``: ``horovodrun --gloo`` on N ranks, each ``import tensorflow, keras`` and ``hvd.init()``;
- ``horovod_mpi``: ``mpirun`` on N ranks, the same;
- ``mpi_ps:<o>``: ``mpirun`` on N+1 ranks (the server is rank 0), each ``mpi4py`` and
  ``import tensorflow, keras``;
- ``spark_ps:<o>``: a SparkSession on ``local[N]`` with distbench's properties
  (:func:`distbench.ps_async.spark.make_session`'s), then one barrier job of N tasks
  (``rdd.barrier().mapPartitionsWithIndex``) whose Python workers ``import tensorflow, keras``.

``spark_ps`` and ``mpi_ps`` run on the sweep's shared engine by default (``[spark]
share_session``, ``[mpi] share_engine``), which starts once per sweep: each sweep here
runs one configuration, so each pays its own engine start.

Rounds alternate: configuration, floor, configuration, floor... in strategy order, the
whole sequence reversed on odd rounds; cells are median [min-max] over the rounds.

Usage::

    python benchmarks/startup_floor.py [--quick] [--rounds 3] [--strategies a,b]
        [--keep] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

SECTION = "startup_floor"
STRATEGIES = ["single", "mirrored", "multi_worker_mirrored", "tf_ps", "horovod", "horovod_mpi", "spark_ps:adag",
              "mpi_ps:adag"]
QUICK = ["single", "mirrored"]
WORKERS = 2
FLOOR_TIMEOUT_S = 600.0

# Each floor program ends with READY: the process writes its ready time (Unix seconds) to
# <dir>/ready.<name> (dir = its first argument), so the floor is spawn -> the last one ready.
READY = ("import os as _os, sys as _sys, time as _time\n"
         "def ready(name=None):\n"
         "    p = _os.path.join(_sys.argv[1], 'ready.%s' % (name or _os.getpid()))\n"
         "    with open(p + '.tmp', 'w') as f:\n"
         "        f.write(repr(_time.time()))\n"
         "    _os.replace(p + '.tmp', p)\n")
TF = "import tensorflow as tf\nimport keras\n"

FLOOR_CODE = {
    "single": READY + TF + "ready()\n_os._exit(0)\n",
    "mirrored": READY + TF + (
        "n = int(_sys.argv[2])\n"
        "cpu = tf.config.list_physical_devices('CPU')[0]\n"
        "tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)\n"
        "tf.distribute.MirroredStrategy(['/cpu:%d' % i for i in range(n)])\n"
        "ready()\n_os._exit(0)\n"),
    "multi_worker_mirrored": READY + TF + (
        "ring = tf.distribute.experimental.CommunicationImplementation.RING\n"
        "s = tf.distribute.MultiWorkerMirroredStrategy(\n"
        "    communication_options=tf.distribute.experimental.CommunicationOptions(implementation=ring))\n"
        "@tf.function\n"
        "def one():\n"
        "    return s.reduce(tf.distribute.ReduceOp.SUM, s.run(lambda: tf.constant(1.0)), axis=None)\n"
        "assert float(one()) == s.num_replicas_in_sync\n"
        "ready()\n_time.sleep(2)\n_os._exit(0)\n"),  # the peer may still be reading the last chunk
    "tf_ps.server": READY + (
        "import json\nimport tensorflow as tf\n"
        "t = json.loads(_os.environ['TF_CONFIG'])\n"
        "proto = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=int(_sys.argv[2]),\n"
        "                                 intra_op_parallelism_threads=int(_sys.argv[3]))\n"
        "server = tf.distribute.Server(tf.train.ClusterSpec(t['cluster']), job_name=t['task']['type'],\n"
        "                              task_index=t['task']['index'], protocol='grpc', config=proto, start=True)\n"
        "ready()\nserver.join()\n"),
    "tf_ps.chief": READY + TF + (
        "import json\n"
        "tf.config.threading.set_inter_op_parallelism_threads(int(_sys.argv[2]))\n"
        "resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(\n"
        "    tf.train.ClusterSpec(json.loads(_sys.argv[3])), task_type='chief', task_id=0, rpc_layer='grpc')\n"
        "strategy = tf.distribute.ParameterServerStrategy(resolver)\n"
        "tf.distribute.coordinator.ClusterCoordinator(strategy)\n"
        "ready()\n_os._exit(0)\n"),
    "horovod": READY + TF + (
        "import horovod.tensorflow as hvd\nhvd.init()\n"
        "ready()\nhvd.shutdown()\n_os._exit(0)\n"),
    "mpi_ps": READY + "from mpi4py import MPI\n" + TF + "ready()\nMPI.Finalize()\n_os._exit(0)\n",
    "spark_ps": READY + (
        "import json\n"
        "out, master, conf, n = _sys.argv[1], _sys.argv[2], json.loads(_sys.argv[3]), int(_sys.argv[4])\n"
        "_os.environ['PYSPARK_PYTHON'] = _sys.executable\n"
        "_os.environ['PYSPARK_DRIVER_PYTHON'] = _sys.executable\n"
        "from pyspark.sql import SparkSession\n"
        "b = SparkSession.builder.master(master).appName('distbench-floor')\n"
        "for k, v in conf.items():\n"
        "    b = b.config(k, v)\n"
        "spark = b.getOrCreate()\n"
        "def task(i, rows):\n"
        "    import os, time\n"
        "    import tensorflow, keras\n"
        "    with open(os.path.join(out, 'ready.task%d' % i), 'w') as f:\n"
        "        f.write(repr(time.time()))\n"
        "    yield i\n"
        "got = spark.sparkContext.parallelize(range(n), n).barrier().mapPartitionsWithIndex(task).collect()\n"
        "assert sorted(got) == list(range(n)), got\n"
        "spark.stop()\n_os._exit(0)\n"),
}
FLOOR_CODE["horovod_mpi"] = FLOOR_CODE["horovod"]

DEFINITION = {
    "single": "`python -c` importing tensorflow and keras",
    "mirrored": "the same + {n} logical CPU devices + `MirroredStrategy` over them",
    "multi_worker_mirrored": "{n} processes (`TF_CONFIG`, loopback ports): tensorflow + keras, "
                             "`MultiWorkerMirroredStrategy` (ring), one all-reduce",
    "tf_ps": "{n} worker + {ps} ps `tf.distribute.Server` processes (distbench's threads) and a coordinator "
             "process: tensorflow + keras, `ParameterServerStrategy` + `ClusterCoordinator`",
    "horovod": "`horovodrun --gloo` (distbench's flags), {n} ranks: tensorflow + keras, `hvd.init()`",
    "horovod_mpi": "`mpirun` (distbench's flags), {n} ranks: tensorflow + keras, `hvd.init()`",
    "mpi_ps": "`mpirun` (distbench's flags), {n1} ranks (server rank 0 + {n} replicas): mpi4py, tensorflow + keras",
    "spark_ps": "SparkSession `local[{n}]` (distbench's properties) + one barrier job of {n} tasks whose Python "
                "workers import tensorflow + keras",
}


def family(strategy: str) -> str:
    """``spark_ps:adag`` -> ``spark_ps``; other names unchanged."""
    return strategy.split(":", 1)[0]


# ---------------------------------------------------------------------------- floors
def floor_processes(strategy: str, out: Path, workers: int = WORKERS) -> tuple[list[tuple[str, list[str], dict]], int]:
    """The floor's processes ``(name, argv, env)`` (started together) and how many ready
    files make it ready. Built with distbench's own environment and launcher builders."""
    from distbench.config import ExperimentConfig
    from distbench.launch import commands
    from distbench.launch.tfconfig import tf_config
    from distbench.training.loop import threads_per_process

    py, base, fam, n = sys.executable, C.child_env(), family(strategy), workers
    cfg = ExperimentConfig()
    env = commands.child_env(None, base)
    code = FLOOR_CODE.get(fam)
    if fam in ("single", "mirrored"):
        return [(fam, [py, "-c", code, str(out), str(n)], env)], 1
    if fam == "multi_worker_mirrored":
        cluster = {"worker": [f"127.0.0.1:{p}" for p in commands.free_ports(n)]}
        return [(f"worker {i}", [py, "-c", code, str(out)],
                 commands.child_env({"TF_CONFIG": tf_config(cluster, "worker", i)}, base)) for i in range(n)], n
    if fam == "tf_ps":
        from distbench.strategies.tf_ps import COORDINATOR_INTER_OP, SERVER_INTER_OP, cluster_spec

        ps = cfg.tf.ps_tasks
        cluster = cluster_spec(commands.free_ports(1 + n + ps), n, ps)
        threads = threads_per_process(cfg.training.threads, n + 1)  # as tf_ps.launch: ctx.threads_per_process(n + 1)
        procs = [(f"{job} {i}", [py, "-c", FLOOR_CODE["tf_ps.server"], str(out), str(SERVER_INTER_OP), str(threads)],
                  commands.child_env({"TF_CONFIG": tf_config(cluster, job, i)}, base))
                 for job in ("worker", "ps") for i in range(len(cluster[job]))]
        procs.append(("chief", [py, "-c", FLOOR_CODE["tf_ps.chief"], str(out), str(COORDINATOR_INTER_OP),
                                json.dumps(cluster)], env))
        return procs, len(procs)
    if fam in ("horovod", "horovod_mpi"):
        program = [py, "-c", code, str(out)]
        if fam == "horovod":
            argv, lenv = commands.horovodrun_command(n, commands.localhost_hosts(n), program, out / "ranks",
                                                     commands.start_timeout(cfg.run.timeout_s), py, base_env=base)
        else:
            argv, lenv = commands.mpirun_command(n, commands.localhost_hosts(n), program, out / "ranks", py,
                                                 base_env=base, mpirun=shutil.which("mpirun") or "mpirun")
        return [(fam, argv, lenv)], n
    if fam == "mpi_ps":
        mpirun = shutil.which("mpirun") or "mpirun"
        argv, lenv = commands.mpirun_command(n + 1, commands.localhost_hosts(n + 1), [py, "-c", code, str(out)],
                                             out / "ranks", py, base_env=base, mpirun=mpirun)
        return [("mpirun", argv, lenv)], n + 1
    if fam == "spark_ps":
        from distbench.config.spark import BARRIER_CHECK_DEFAULTS

        conf = {"spark.ui.enabled": "false", "spark.sql.execution.arrow.pyspark.enabled": "true",
                "spark.sql.adaptive.coalescePartitions.enabled": "false", "spark.executorEnv.PYSPARK_PYTHON": py,
                "spark.executorEnv.TF_CPP_MIN_LOG_LEVEL": env.get("TF_CPP_MIN_LOG_LEVEL", "1"),
                **BARRIER_CHECK_DEFAULTS, **dict(cfg.spark.conf)}  # as distbench.ps_async.spark.make_session
        master = cfg.spark.master or f"local[{n}]"
        return [("driver", [py, "-c", code, str(out), master, json.dumps(conf), str(n)], env)], n
    raise ValueError(f"no floor for {strategy!r}")


def kill_sessions(procs: list[subprocess.Popen]) -> None:
    """SIGKILL what is left of each process's session (servers, a JVM, ranks)."""
    from distbench.launch.process import kill_session

    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        kill_session(p.pid)
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            pass


def measure_floor(strategy: str, out: Path, workers: int = WORKERS) -> dict[str, Any]:
    """Start the floor's processes, wait until all are ready; ``{"floor_s"}`` (spawn to the
    last ready) or ``{"error"}``."""
    out.mkdir(parents=True, exist_ok=True)
    procs_spec, expected = floor_processes(strategy, out, workers)
    procs: list[subprocess.Popen] = []
    spawn = time.time()
    try:
        for name, argv, env in procs_spec:
            with open(out / f"{name.replace(' ', '')}.log", "ab") as log:
                procs.append(subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, start_new_session=True, cwd=out))
        deadline = time.monotonic() + FLOOR_TIMEOUT_S
        while True:
            ready = [f for f in out.glob("ready.*") if not f.name.endswith(".tmp")]
            if len(ready) >= expected:
                break
            failed = [p for p in procs if p.poll() not in (None, 0)]
            if failed or all(p.poll() is not None for p in procs) or time.monotonic() > deadline:
                why = ("timed out" if time.monotonic() > deadline else
                       f"exited {failed[0].returncode}" if failed else "exited before every process was ready")
                tail = "\n".join(f.read_text(errors="replace")[-800:] for f in out.glob("*.log"))
                return {"error": f"{why}: {len(ready)}/{expected} ready", "tail": tail}
            time.sleep(0.05)
        stamps = [float(f.read_text()) for f in ready]
        for p in procs:  # let them leave on their own (a launcher's ranks), servers are killed
            try:
                p.wait(20 if family(strategy) != "tf_ps" else 0.01)
            except subprocess.TimeoutExpired:
                pass
        return {"floor_s": max(stamps) - spawn, "first_ready_s": min(stamps) - spawn}
    finally:
        kill_sessions(procs)


# ---------------------------------------------------------------------- configurations
def measure_config(strategy: str, out: Path, log: Path, workers: int = WORKERS) -> dict[str, Any]:
    """``distbench run --strategies S --workers N --epochs 1`` in ``out``; the record's
    start-up figures, or ``{"error"}``."""
    args = ["run", "--strategies", strategy, "--workers", str(workers), "--epochs", "1", "--repeats", "1",
            "--out", str(out)]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as f:
        f.write(f"\n$ distbench {' '.join(args)}\n")
        f.flush()
        cp = subprocess.run([sys.executable, "-m", "distbench", *args], stdout=f, stderr=subprocess.STDOUT,
                            env=C.child_env(), cwd=C.ROOT, timeout=3600)
    recs = C.read_records(out)
    if not recs:
        return {"error": f"distbench run exited {cp.returncode} with no record (see {log})"}
    r = recs[0]
    t = r.get("timings") or {}
    ph = t.get("phases") or {}
    if r.get("status") != "ok":
        from distbench.text import clip

        return {"error": f"{r.get('status')}: {clip(r.get('reason') or '', 200)}"}
    w = r.get("workload") or {}
    return {"engine_start_s": ph.get("engine_start_s"), "startup_s": t.get("startup_s"),
            "process_start_s": ph.get("process_start_s"), "workload_s": ph.get("workload_s"),
            "trace_s": ph.get("trace_s"), "run_dir": str(out),
            "workload": f"{w.get('dataset')}, {w.get('model')} ({w.get('num_parameters', 0):,} parameters)"}


# ------------------------------------------------------------------------------ main
def plan(strategies: list[str], rounds: int) -> list[tuple[int, str, str]]:
    """``(round, strategy, "config" | "floor")`` in running order: configuration then floor
    per strategy, the whole round's sequence reversed on odd rounds."""
    steps = []
    for k in range(rounds):
        seq = [(k, s, what) for s in strategies for what in ("config", "floor")]
        steps += seq[::-1] if k % 2 else seq
    return steps


def definition(strategy: str, workers: int = WORKERS) -> str:
    from distbench.config import ExperimentConfig

    return DEFINITION[family(strategy)].format(n=workers, n1=workers + 1, ps=ExperimentConfig().tf.ps_tasks)


def table(strategies: list[str], got: dict[str, dict[str, list[dict]]], workers: int = WORKERS) -> list[str]:
    """The markdown table rows (header included)."""
    lines = ["| strategy | engine start s | spawn to first step s | floor s | engine start / floor | "
             "first step / floor | process start + workload + trace s | floor: spawn to ready of |",
             "|---|---|---|---|---|---|---|---|"]
    for s in strategies:
        cfg = [r for r in got[s]["config"] if "error" not in r]
        flo = [r for r in got[s]["floor"] if "error" not in r]
        pairs = [(c, f) for c, f in zip(got[s]["config"], got[s]["floor"]) if "error" not in c and "error" not in f]
        eng = [c["engine_start_s"] for c, _ in pairs]
        first = [c["startup_s"] for c, _ in pairs]
        fl = [f["floor_s"] for _, f in pairs]
        other = [sum(c.get(k) or 0.0 for k in ("process_start_s", "workload_s", "trace_s")) for c in cfg]
        errors = [r["error"] for r in got[s]["config"] + got[s]["floor"] if "error" in r]
        note = f" ({len(errors)} run(s) failed: {errors[0]})" if errors else ""
        lines.append(f"| `{s}` | {C.spread([c['engine_start_s'] for c in cfg], '{:.1f}')} | "
                     f"{C.spread([c['startup_s'] for c in cfg], '{:.1f}')} | "
                     f"{C.spread([f['floor_s'] for f in flo], '{:.1f}')} | {C.ratio_spread(eng, fl)[1]} | "
                     f"{C.ratio_spread(first, fl)[1]} | {C.spread(other, '{:.1f}')} | {definition(s, workers)}{note} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"1 round of {', '.join(QUICK)}: a smoke test")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (each: every configuration and floor) [default: 3]")
    ap.add_argument("--strategies", help=f"comma-separated subset [default: {','.join(STRATEGIES)}]")
    ap.add_argument("--keep", action="store_true", help="keep the run directories and floor logs (printed)")
    ap.add_argument("--write", help="BENCHMARKS.md to update (section startup_floor)")
    args = ap.parse_args(argv)
    strategies = (args.strategies.split(",") if args.strategies else QUICK if args.quick else STRATEGIES)
    unknown = [s for s in strategies if family(s) not in DEFINITION]
    if unknown:
        ap.error(f"--strategies: no floor for {', '.join(unknown)}")
    rounds = 1 if args.quick else args.rounds
    tmp = Path(tempfile.mkdtemp(prefix="distbench-startup-floor-"))
    load_start, t_all = C.load_average(), time.perf_counter()
    got: dict[str, dict[str, list[dict]]] = {s: {"config": [], "floor": []} for s in strategies}
    loads = []
    try:
        for k, s, what in plan(strategies, rounds):
            name = f"{s.replace(':', '-')}-{what}-{k}"
            if what == "config":
                res = measure_config(s, tmp / name, tmp / "distbench.log")
            else:
                res = measure_floor(s, tmp / name)
            res["round"] = k
            got[s][what].append(res)
            loads.append(os.getloadavg()[0])
            shown = {x: round(v, 2) if isinstance(v, float) else v for x, v in res.items() if x not in ("tail",)}
            print(f"round {k} {s} {what}: {shown}", flush=True)
            if "tail" in res:
                print(res["tail"], file=sys.stderr, flush=True)
        for s in strategies:  # pair each round's configuration and floor (plan() appends them round by round)
            got[s]["config"].sort(key=lambda r: r["round"])
            got[s]["floor"].sort(key=lambda r: r["round"])
        (tmp / "results.json").write_text(json.dumps(got, indent=1))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    took = time.perf_counter() - t_all
    from distbench.launch.commands import child_env

    tf_log = child_env(None, C.child_env()).get("TF_CPP_MIN_LOG_LEVEL")
    workload = next((r["workload"] for s in strategies for r in got[s]["config"] if "workload" in r), "?")
    lines = [
        "## Start-up next to each engine's floor (`benchmarks/startup_floor.py`)", "",
        f"- date: {C.utc_now()}",
        f"- machine: {C.machine_info()}; Horovod {C.version('horovod')}, pyspark {C.version('pyspark')}, "
        f"mpi4py {C.version('mpi4py')}",
        f"- command: `{C.command_line('startup_floor.py', argv)}`",
        f"- workload: the embedded default ({workload}), `distbench run --strategies S --workers {WORKERS} "
        "--epochs 1 --repeats 1`, one configuration per sweep.",
        f"- method: {rounds} round(s); each round runs, per strategy, the configuration (a fresh sweep) and its "
        "engine's floor, alternating (configuration, floor, configuration, floor...; the whole sequence reversed "
        "on odd rounds); cells are median [min-max] over rounds, ratios the median of one over the median of the "
        "other [range of the per-round ratios]. *engine start*: the record's `timings.phases.engine_start_s` (the "
        "strategy's own start-up: from the workload loaded to the first step, tracing excluded); *spawn to first "
        "step*: `timings.startup_s`. *floor*: the same processes started by the same launcher doing nothing but "
        "the engine's own start (last column), spawn to the last process ready (each writes its ready time), "
        f"with distbench's child environment (`TF_CPP_MIN_LOG_LEVEL={tf_log}`; `horovodrun` and `mpirun` argv "
        "from distbench's builders). `spark_ps` and `mpi_ps` run on the sweep's shared engine (`[spark] "
        "share_session`, `[mpi] share_engine`, the defaults), which starts once per sweep: one configuration per "
        "sweep here, so each pays its own engine start; in that mode the engine process's own start (for "
        "`mpi_ps`: `mpirun` and the ranks' interpreters) is in `process_start_s`, so there *spawn to first step* "
        "is the figure to set against the floor.",
        f"- load average at start {load_start}, at end {C.load_average()} (1-minute load after each step: "
        f"{min(loads):.1f}-{max(loads):.1f}); the benchmark took {took:.0f} s.", "",
        *table(strategies, got)]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.keep:
        print(f"run directories and floor logs kept in {tmp}", file=sys.stderr)
    if args.write:
        C.write_section(args.write, SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
