"""Synthetic ResNet-50 throughput: distbench's strategies next to a plain Horovod synthetic loop.

The reference is the loop of Horovod's ``examples/tensorflow2/tensorflow2_synthetic_benchmark.py``
written out here (its code is not copied): keras.applications ResNet-50 with
``weights=None``, one fixed random batch per rank, ``hvd.DistributedGradientTape``, the
variables broadcast from rank 0, warm-up batches, then ``iters`` timings of
``batches_per_iter`` batches each; images/s per rank is batch x batches / seconds, and the
total is that times the ranks. The same model, image size, per-rank batch and optimizer
run through ``distbench run examples/resnet50_synthetic.toml`` (``single``, ``mirrored``,
``horovod``, ``spark_ps:adag``; 2 workers), whose records give images/s
(``samples_per_s``) over the whole training clock, first epoch (warm-up) excluded.

Usage::

    python benchmarks/resnet_synthetic.py [--quick] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "resnet50_synthetic.toml"


def rank_worker(model_name: str, batch: int, image: int, warmup: int, iters: int, batches_per_iter: int,
                out: str) -> int:
    """Inside ``horovodrun``: the synthetic loop on this rank; rank 0 writes
    ``{"ranks", "img_per_s_per_rank": [one per iteration]}`` to ``out``."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import horovod.tensorflow as hvd
    import keras
    import tensorflow as tf

    hvd.init()
    tf.config.threading.set_intra_op_parallelism_threads(max(1, (os.cpu_count() or 1) // hvd.local_size()))
    keras.backend.clear_session()  # Horovod matches collectives by name: same variable names on every rank
    from distbench.config import APPLICATIONS

    model = getattr(keras.applications, APPLICATIONS[model_name])(weights=None, input_shape=(image, image, 3),
                                                                  classes=10, classifier_activation=None)
    opt = keras.optimizers.SGD(0.01)
    opt.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    data = tf.random.uniform([batch, image, image, 3])
    target = tf.random.uniform([batch], minval=0, maxval=10, dtype=tf.int64)
    tvars = model.trainable_variables
    tvalues = [v.value for v in tvars]
    hvd.broadcast_variables([v.value for v in model.variables], root_rank=0)

    @tf.function(autograph=False)
    def step() -> None:
        with tf.GradientTape() as tape:
            loss = loss_fn(target, model(data, training=True))
        grads = hvd.DistributedGradientTape(tape).gradient(loss, tvalues)
        opt.apply_gradients(zip(grads, tvars))

    for _ in range(warmup):
        step()
    rates = []
    for _ in range(iters):
        t0 = time.perf_counter()
        for _ in range(batches_per_iter):
            step()
        hvd.allreduce(tf.constant(0.0), name="sync").numpy()  # every rank's batches are done
        rates.append(batch * batches_per_iter / (time.perf_counter() - t0))
    if hvd.rank() == 0:
        Path(out).write_text(json.dumps({"ranks": hvd.size(), "img_per_s_per_rank": rates}))
    hvd.shutdown()
    return 0


def horovod_reference(model: str, ranks: int, batch: int, image: int, warmup: int, iters: int, batches: int,
                      tmp: Path) -> dict:
    """Run :func:`rank_worker` on ``ranks`` ranks under ``horovodrun --gloo``; rank 0's JSON.

    Raises:
        RuntimeError: the launcher failed (its log tail in the message).
    """
    from distbench.launch.commands import horovodrun_command, localhost_hosts
    from distbench.launch.process import ProcSpec, log_tail, run_processes
    from distbench.strategies.horovod import find_horovodrun

    out = tmp / f"reference_{ranks}.json"
    prog = [sys.executable, str(Path(__file__).resolve()), "--rank-worker", "--model", model, "--batch", str(batch),
            "--image",
            str(image), "--warmup", str(warmup), "--iters", str(iters), "--batches-per-iter", str(batches),
            "--out", str(out)]
    argv, env = horovodrun_command(ranks, localhost_hosts(ranks), prog, tmp / f"ref{ranks}-logs", 120,
                                   sys.executable, horovodrun=find_horovodrun() or "horovodrun")
    log = tmp / f"reference_{ranks}.log"
    res = run_processes([ProcSpec("horovodrun", argv, env, log)], timeout_s=1800)
    if not res.ok:
        raise RuntimeError(f"Horovod reference failed ({res.reason(1800)}):\n{log_tail(log, 30)}")
    return json.loads(out.read_text())


def steady_rate(rec: dict) -> float | None:
    """Images/s of a record after its first epoch (samples per epoch / steady epoch seconds)."""
    epochs = C.steady_epoch_s(rec)
    if not epochs or not rec.get("epochs"):
        return rec.get("samples_per_s")
    per_epoch = rec["samples"] / rec["epochs"]
    return per_epoch / statistics.median(epochs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test, not a measurement")
    ap.add_argument("--write", help="BENCHMARKS.md to update (section resnet_synthetic)")
    ap.add_argument("--rank-worker", action="store_true", help=argparse.SUPPRESS)
    for flag, default in (("--batch", 16), ("--image", 32), ("--warmup", 3), ("--iters", 5),
                          ("--batches-per-iter", 4)):
        ap.add_argument(flag, type=int, default=default)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--model", default="resnet50", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.rank_worker:
        return rank_worker(args.model, args.batch, args.image, args.warmup, args.iters, args.batches_per_iter,
                           args.out)
    tmp = Path(tempfile.mkdtemp(prefix="distbench-resnet-"))
    cfg = EXAMPLE
    if args.quick:  # a small model and data: checks the script end to end in seconds
        cfg = tmp / "quick.toml"
        cfg.write_text(EXAMPLE.read_text().replace('name = "resnet50"', 'name = "mobilenet_v3_small"')
                       .replace("samples = 1280", "samples = 256").replace("epochs = 2", "epochs = 2"))
        args.warmup, args.iters, args.batches_per_iter = 1, 2, 2
    run_dir = tmp / "run"
    t0 = time.perf_counter()
    C.run_distbench(["run", str(cfg), "--out", str(run_dir)], tmp / "distbench.log")
    recs = {r["strategy"]: r for r in C.read_records(run_dir)}
    model = "mobilenet_v3_small" if args.quick else "resnet50"
    refs = {n: horovod_reference(model, n, args.batch, args.image, args.warmup, args.iters, args.batches_per_iter,
                                 tmp) for n in (1, 2)}
    wall = time.perf_counter() - t0
    lines = [f"## Synthetic {model} throughput (images/s)", "",
             f"`{C.command_line('resnet_synthetic.py', argv)}` on {C.utc_now()}; {C.machine_info()}; load "
             f"{C.load_average()}; {wall:.0f} s.", "",
             f"distbench: `{cfg.name}` ({model}, 32x32x3 random images, global batch 32, 2 workers); images/s "
             "= samples_per_s over the whole training clock (its first epoch holds warm-up), and for the "
             "synchronous strategies also after the first epoch. Reference: the loop of Horovod's "
             "tensorflow2_synthetic_benchmark.py "
             f"(per-rank batch {args.batch}, {args.iters} x {args.batches_per_iter} timed batches after "
             f"{args.warmup} warm-up), `horovodrun --gloo`, mean ± 1.96 sd over iterations.", "",
             "| run | ranks / replicas | images/s | images/s after epoch 1 | status |",
             "|---|---|---|---|---|"]
    for name in ("single", "mirrored", "horovod", "spark_ps:adag"):
        r = recs.get(name)
        if r is None:
            continue
        ok = r["status"] == "ok"
        rate = steady_rate(r) if ok and not name.startswith("spark_ps") else None  # PS epochs: centre updates
        sps = r.get("samples_per_s") if ok else None
        lines.append(f"| distbench `{name}` | {r.get('replicas') or r['workers']} | "
                     f"{'-' if sps is None else f'{sps:.1f}'} | {'-' if rate is None else f'{rate:.1f}'} | "
                     f"{r['status']} {r.get('reason') or ''} |")
    for n, ref in refs.items():
        per = ref["img_per_s_per_rank"]
        mean, sd = statistics.fmean(per), statistics.pstdev(per)
        lines.append(f"| Horovod synthetic loop | {n} | - | {mean * n:.1f} ± {1.96 * sd * n:.1f} "
                     f"({mean:.1f} ± {1.96 * sd:.1f} per rank) | ok |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        C.write_section(args.write, "resnet_synthetic", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
