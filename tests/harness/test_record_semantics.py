"""Every field of a synchronous strategy's record means what it means for ``single``.

One ``distbench run`` (digits, 2 workers, 3 epochs; the session's ``shared_sweep``) trains the five synchronous
strategies (single, mirrored, multi_worker_mirrored, horovod, horovod_mpi) on the same
global batches, plus two parameter-server strategies (tf_ps, mpi_ps:downpour). The
synchronous records are compared field by field: identical where the schedule makes them
identical (steps, samples, curve epochs and steps...), float fields within a tight
tolerance (the last step's global-batch loss, test loss), and derived fields by their
definition (samples_per_s, per_replica_batch_size, curve elapsed time vs train_s).
``PS_MEANINGS`` lists the same-named fields that legitimately mean something else for a
parameter-server strategy (spark_ps shares mpi_ps's accounting, ``centre_output``), and
the second test checks each of those meanings on the real PS records.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from distbench.results.store import read_records
from tests.conftest import requires

SYNC = ("single", "mirrored", "multi_worker_mirrored", "horovod", "horovod_mpi")
PS = ("tf_ps", "mpi_ps:downpour")
pytestmark = [pytest.mark.integration, requires(module="horovod"), requires(executable="mpirun"),
              requires(module="mpi4py")]

SAME = ("status", "epochs", "global_batch_size", "steps", "samples", "learning_rate", "lr_scaling", "optimizer",
        "initial_weights_sha256", "target_accuracy", "workload")
"""Top-level fields every synchronous strategy must record identically."""
SAME_DETAILS = ("steps_per_epoch",)
CLOSE = {"final_test_loss": 1e-5, "final_test_accuracy": 1e-9}
CLOSE_DETAILS = {"last_train_loss": 1e-5}
"""Relative tolerances: the same steps on the same batches, summed in another order."""

PS_MEANINGS = {
    "steps": "replica steps summed over the replicas (each a local optimizer step on a "
             "per-replica batch), not global optimizer steps: sum(details.per_worker_steps)",
    "samples": "steps x per_replica_batch_size: samples the replicas trained on, all together",
    "samples_per_s": "those samples / train_s: replica throughput, not global-batch throughput",
    "curve.step": "updates of the centre variable when the snapshot was taken: commits (async) or barrier "
                  "rounds (sync) for spark_ps/mpi_ps (details.centre_clock at the end); for tf_ps every "
                  "replica step updates the parameter servers, so it equals the replica steps so far",
    "curve.epoch": "the e-th of `epochs` equal shares of all the updates the centre receives, not a pass of "
                   "one replica over the data",
    "details.last_train_loss": "absent: no single global batch exists whose loss could be reported",
    "details.steps_per_epoch": "absent: a spark_ps/mpi_ps replica runs n // global_batch_size steps per epoch on "
                               "its shard, tf_ps schedules workers x that many per epoch, each taken by whichever "
                               "worker is free; see details.per_worker_steps",
}
"""Same-named fields whose meaning differs for the parameter-server strategies (what
README's Results section says)."""


@pytest.fixture(scope="module")
def records(shared_sweep: Path) -> dict[str, dict]:
    recs = {r["strategy"]: r for r in read_records(shared_sweep)}
    assert set(SYNC + PS) <= set(recs), sorted(recs)
    for name, r in recs.items():
        assert r["status"] == "ok", (name, r["reason"], r.get("log_tail", "")[-1500:])
    return recs


def _close(a: float, b: float, rel: float) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=rel)


def test_synchronous_records_mean_the_same(records):
    single = records["single"]
    assert single["steps"] == single["epochs"] * single["details"]["steps_per_epoch"] > 0
    for name in SYNC:
        r, d = records[name], records[name]["details"]
        assert set(r) == set(single), (name, set(r) ^ set(single))
        for key in SAME:
            assert r[key] == single[key], (name, key, r[key], single[key])
        for key in SAME_DETAILS:
            assert d[key] == single["details"][key], (name, key)
        for key, rel in CLOSE.items():
            assert _close(r[key], single[key], rel), (name, key, r[key], single[key])
        for key, rel in CLOSE_DETAILS.items():
            assert _close(d[key], single["details"][key], rel), (name, key, d[key], single["details"][key])
        # Derived fields, by their definition.
        assert r["samples"] == r["steps"] * r["global_batch_size"], name
        assert r["per_replica_batch_size"] * r["replicas"] == r["global_batch_size"], name
        assert r["replicas"] == (1 if name == "single" else 2), name
        t = r["timings"]
        assert math.isclose(r["samples_per_s"], r["samples"] / t["train_s"], rel_tol=1e-9), name
        assert 0 < t["train_s"] < t["total_s"] and 0 <= t["startup_s"] < t["total_s"], (name, t)
        assert d["trace_s"] > 0, name  # traced before the clock, recorded
        # Curve: one point per epoch, optimizer steps so far, training seconds that end at train_s.
        assert [(p["epoch"], p["step"]) for p in r["curve"]] == [(p["epoch"], p["step"]) for p in single["curve"]]
        elapsed = [p["elapsed_s"] for p in r["curve"]]
        assert elapsed == sorted(elapsed) and 0 < elapsed[-1] <= t["train_s"] + 1e-6, (name, elapsed, t)
        assert t["train_s"] - elapsed[-1] < 0.5, (name, elapsed, t)  # nothing but the loop after the last epoch
        if name not in ("single", "mirrored"):
            assert d["replicas_in_sync_check"] == "passed", name


def test_parameter_server_fields_mean_what_ps_meanings_says(records):
    single = records["single"]
    for name in PS:
        r, d = records[name], records[name]["details"]
        assert set(r) == set(single), (name, set(r) ^ set(single))
        for key in ("epochs", "global_batch_size", "initial_weights_sha256", "workload"):
            assert r[key] == single[key], (name, key)
        # steps: replica steps summed; samples: x per-replica batch; samples_per_s: their rate.
        assert r["steps"] == sum(d["per_worker_steps"]) > 0, name
        assert r["per_replica_batch_size"] == r["global_batch_size"] // r["replicas"], name
        assert r["samples"] == r["steps"] * r["per_replica_batch_size"], name
        assert math.isclose(r["samples_per_s"], r["samples"] / r["timings"]["train_s"], rel_tol=1e-9), name
        # curve: one point per epoch share, step = centre updates so far.
        assert [p["epoch"] for p in r["curve"]] == list(range(1, r["epochs"] + 1)), name
        steps = [p["step"] for p in r["curve"]]
        assert steps == sorted(steps), name
        final_updates = r["steps"] if name == "tf_ps" else d["centre_clock"]
        assert steps[-1] == final_updates, (name, steps, final_updates)
        for key in ("last_train_loss", "steps_per_epoch"):
            assert key not in d, (name, key, PS_MEANINGS[f"details.{key}"])
