#!/usr/bin/env python
"""Prove that Horovod 0.28.1 averages gradients for a Keras 3 model (TF backend).

Run with 2 (or more) ranks, under either launcher:

    horovodrun -np 2 --gloo python scripts/check_horovod_keras3.py
    mpirun --allow-run-as-root -np 2 --oversubscribe -bind-to none -map-by slot \
        python scripts/check_horovod_keras3.py

The pattern that works with Keras 3 (Horovod issue #4290):
  * a custom training loop with ``hvd.DistributedGradientTape``;
  * pass the *backing tf.Variables* (``v.value`` of each ``keras.Variable``) to
    ``tape.gradient`` and to ``hvd.broadcast_variables``. A Keras 3 variable is not a
    ``tf.Variable`` and has no ``.ref()``, so handing ``model.trainable_variables`` to
    Horovod fails with ``AttributeError: 'Variable' object has no attribute 'ref'``;
  * apply the averaged gradients with the Keras optimizer as usual.
  (``hvd.DistributedOptimizer`` inside Keras 3 ``model.fit`` does not average: see
  docs/horovod_build.md.)

Each rank starts from *different* random weights and trains on *different* random
data, so equal final weights can only come from the broadcast plus gradient averaging.
After training every rank allgathers a SHA-256 of its weights and checks that all
ranks agree; an allreduce(Average) where rank r contributes r + 1 must give
(size + 1) / 2 (1.5 with two ranks).

Each rank prints one JSON line (prefix ``HVDCHECK ``) and exits 0 only if every check
passed on that rank.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402
import horovod  # noqa: E402
import horovod.tensorflow as hvd  # noqa: E402

STEPS = int(os.environ.get("HVDCHECK_STEPS", "30"))
BATCH = 32          # per-rank batch
FEATURES = 20


def weights_digest(model: keras.Model) -> bytes:
    h = hashlib.sha256()
    for w in model.get_weights():
        h.update(np.ascontiguousarray(w, dtype=np.float32).tobytes())
    return h.digest()


def allgather_digest(digest: bytes) -> list[str]:
    """Allgather the first 16 bytes of a digest; return every rank's hex digest."""
    row = np.frombuffer(digest[:16], dtype=np.int32).reshape(1, 4)
    gathered = hvd.allgather(tf.constant(row), name="weights_digest").numpy()
    return [r.astype(np.int32).tobytes().hex() for r in gathered]


def main() -> int:
    t0 = time.time()
    hvd.init()
    t_init = time.time()
    rank, size = hvd.rank(), hvd.size()
    # Two ranks share a small machine: one intra-op thread each avoids oversubscription.
    tf.config.threading.set_intra_op_parallelism_threads(
        int(os.environ.get("HVDCHECK_THREADS", "1")))

    # Different seed per rank: different initial weights and different data.
    keras.utils.set_random_seed(1234 + rank)
    model = keras.Sequential([
        keras.Input((FEATURES,)),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(1),
    ])
    optimizer = keras.optimizers.SGD(learning_rate=0.05)
    loss_fn = keras.losses.MeanSquaredError()
    optimizer.build(model.trainable_variables)

    rng = np.random.default_rng(100 + rank)
    x = rng.normal(size=(STEPS * BATCH, FEATURES)).astype(np.float32)
    y = (x[:, :1] * 2.0 - x[:, 1:2] + rng.normal(scale=0.1, size=(len(x), 1))).astype(np.float32)

    initially_equal_before = len(set(allgather_digest(weights_digest(model)))) == 1

    # Start every rank from rank 0's weights: broadcast the backing tf.Variables.
    hvd.broadcast_variables([v.value for v in model.variables], root_rank=0)
    after_bcast = allgather_digest(weights_digest(model))

    train_vars = model.trainable_variables

    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, [v.value for v in train_vars])   # <- .value
        optimizer.apply_gradients(zip(grads, train_vars))
        return loss

    t_train = time.time()
    losses = []
    for step in range(STEPS):
        sl = slice(step * BATCH, (step + 1) * BATCH)
        losses.append(float(train_step(tf.constant(x[sl]), tf.constant(y[sl]))))

    train_seconds = time.time() - t_train
    final = allgather_digest(weights_digest(model))
    avg = float(hvd.allreduce(tf.constant(float(rank + 1)), op=hvd.Average,
                              name="rank_plus_one").numpy())
    expected_avg = (size + 1) / 2.0

    checks = {
        "size_at_least_2": size >= 2,
        "initial_weights_differed": not initially_equal_before,
        "equal_after_broadcast": len(set(after_bcast)) == 1,
        "equal_after_training": len(set(final)) == 1,
        "allreduce_average_ok": abs(avg - expected_avg) < 1e-6,
        "loss_decreased": losses[-1] < losses[0],
    }
    record = {
        "rank": rank,
        "size": size,
        "local_rank": hvd.local_rank(),
        "controller": "mpi" if hvd.mpi_enabled() else ("gloo" if hvd.gloo_enabled() else "?"),
        "built": {"mpi": hvd.mpi_built(), "gloo": hvd.gloo_built()},
        "versions": {"horovod": horovod.__version__, "tensorflow": tf.__version__,
                     "keras": keras.__version__, "python": sys.version.split()[0]},
        "steps": STEPS,
        "loss_first": round(losses[0], 6),
        "loss_last": round(losses[-1], 6),
        "weights_sha256_16": final[rank],
        "allreduce_average": avg,
        "allreduce_expected": expected_avg,
        "checks": checks,
        "ok": all(checks.values()),
        "seconds": {"init": round(t_init - t0, 2), "train": round(train_seconds, 2),
                    "total": round(time.time() - t0, 2)},
    }
    # One write() per line, so lines from different ranks do not interleave.
    sys.stdout.flush()
    os.write(1, ("HVDCHECK " + json.dumps(record, sort_keys=True) + "\n").encode())
    hvd.shutdown()
    return 0 if record["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
