"""keras_jax:data_parallel, keras_jax:multi_process and keras_jax:model_parallel: the JAX
processes' commands, the unavailable path, the ModelParallel plan, BatchNormalization's global
moments under DataParallel, and one real sweep (single, keras_jax with 1 and 2 devices, over 2
processes, and ModelParallel over a 1x2 mesh).

The sweep's numbers (digits, the embedded default MLP, 3 epochs; 2-core machine): keras_jax
with 1 device ended with single's test accuracy (0.9111, equal) and test loss 0.25673 against
0.25653 (relative 7.6e-4: XLA's and TensorFlow's float32 kernels sum in other orders, over 60
steps at learning rate 0.3); with 2 devices 0.9111 and 0.256534 (7e-8). The tolerances below
(one test sample of accuracy, 2e-3 of loss) sit above those.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from distbench.contracts import Status
from distbench.launch.process import GroupResult
from distbench.results.store import read_records
from distbench.strategies import keras_jax, registry
from distbench.strategies.base import StrategyUnavailable
from distbench.training.jax_loop import model_parallel_plan, xla_flags
from distbench.training.output import read_child_result
from tests.conftest import ROOT, distbench, requires

NAME = "keras_jax:data_parallel"
MULTI = "keras_jax:multi_process"
MODEL = "keras_jax:model_parallel"
ACCURACY_TOL = 0.003
"""Test accuracy within one test sample of the 360 (measured: equal)."""
LOSS_RTOL = 2e-3
"""Relative test loss (measured: 7.6e-4 with 1 device, 7e-8 with 2)."""
JAX_ENV = {"KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "1"}


def test_jax_command_exact():
    argv, env = keras_jax.jax_command(Path("/r"), Path("/r/artifacts/k"), 2,
                                      base_env={"PATH": "/bin", "XLA_FLAGS": "--xla_dump_to=/d "
                                                "--xla_force_host_platform_device_count=8"})
    assert argv == [sys.executable, "-m", "distbench", "worker", "keras-jax", "--run-dir", "/r", "--out",
                    "/r/artifacts/k", "--workers", "2"]
    assert env == {"PATH": "/bin", "TF_CPP_MIN_LOG_LEVEL": "1", "PYTHONUNBUFFERED": "1", "KERAS_BACKEND": "jax",
                   "XLA_FLAGS": "--xla_dump_to=/d --xla_force_host_platform_device_count=2"}
    assert xla_flags(3) == "--xla_force_host_platform_device_count=3"
    with pytest.raises(ValueError, match="at least 1 device"):
        xla_flags(0)


def test_multi_process_command_exact():
    argv, env = keras_jax.jax_command(Path("/r"), Path("/r/artifacts/k"), 2, base_env={"PATH": "/bin"},
                                      coordinator="10.0.0.2:23600", process_id=1, threads=3, python="/opt/py")
    assert argv == ["/opt/py", "-m", "distbench", "worker", "keras-jax", "--run-dir", "/r", "--out",
                    "/r/artifacts/k", "--workers", "2", "--coordinator", "10.0.0.2:23600", "--process-id", "1",
                    "--threads", "3"]
    assert env["XLA_FLAGS"] == "--xla_force_host_platform_device_count=1"  # one device per process


def test_registered_with_its_worker_entry():
    assert NAME in registry.names() and registry.families()["keras_jax"][:2] == [NAME, MULTI]
    assert registry.get(MULTI).uses_network and registry.get(MULTI).replicas(2) == 2
    assert registry.families()["keras_jax"] == [NAME, MULTI, MODEL]
    assert registry.worker_entries()["keras-jax"] == "distbench.harness.keras_jax_app:command"
    assert registry.get(NAME).replicas(2) == 2 and not registry.get(NAME).uses_network


def test_model_parallel_plan_shards_the_largest_kernels_on_their_outputs():
    weights = [("m/dense/kernel", (64, 512)), ("m/dense/bias", (512,)), ("m/dense_1/kernel", (512, 512)),
               ("m/dense_1/bias", (512,)), ("m/out/kernel", (512, 10)), ("m/out/bias", (10,)),
               ("m/bn/gamma", (512,))]
    shape, layouts = model_parallel_plan(weights, 4)
    assert shape == (2, 2)  # batch x model
    assert layouts == {"m/dense/kernel": (None, "model"), "m/dense/bias": ("model",),
                       "m/dense_1/kernel": (None, "model"), "m/dense_1/bias": ("model",)}  # out: 5k < 1/8 of 262k
    assert model_parallel_plan([("m/d/kernel", (4, 6))], 3)[0] == (1, 3)  # an odd count: every device on the model axis
    with pytest.raises(StrategyUnavailable, match="at least 2 devices"):
        model_parallel_plan(weights, 1)
    with pytest.raises(StrategyUnavailable, match=r"no large Dense kernel \(at least 1/8 of the largest one's "
                                                  r"parameters\) has an output dimension that divides over a model "
                                                  r"axis of 3 devices \(the large kernels: m/d/kernel \[4, 5\]\); "
                                                  r"give those layers widths divisible by 3"):
        model_parallel_plan([("m/d/kernel", (4, 5))], 3)
    # user test: a small output layer that divides is not counted, and the reason says which kernels are
    with pytest.raises(StrategyUnavailable, match=r"the large kernels: a/kernel \[64, 129\], b/kernel \[129, 129\]\)"):
        model_parallel_plan([("a/kernel", (64, 129)), ("b/kernel", (129, 129)), ("c/kernel", (129, 10))], 2)


def test_unavailable_where_jax_is_not_installed(monkeypatch, tmp_path):
    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("jax", "jaxlib") else
                        find(name, *a))
    a = registry.get(NAME).is_available(None, 2)
    assert not a.ok and a.reason == ("the Python packages jax and jaxlib are not installed; install it with pip install "
                                     "'jax[cpu]' (make setup does)")
    with pytest.raises(StrategyUnavailable, match="jax and jaxlib are not installed"):
        registry.get(NAME).launch(None)  # before it starts anything


def test_jax_process_that_cannot_import_jax_reports_unavailable(tmp_path):
    fake = tmp_path / "fake" / "jax"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('this jax is broken on purpose')\n")
    out = tmp_path / "out"
    argv, env = keras_jax.jax_command(tmp_path / "run", out, 1)
    env["PYTHONPATH"] = os.pathsep.join([str(fake.parent), os.environ.get("PYTHONPATH", "")])
    import subprocess

    cp = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr[-2000:]
    found = read_child_result(out)
    assert found is not None and found.status == Status.UNAVAILABLE
    assert found.reason == ("JAX cannot be imported here (ImportError: this jax is broken on purpose); install it "
                            "with pip install 'jax[cpu]' (make setup does)")
    with pytest.raises(StrategyUnavailable, match="this jax is broken on purpose"):  # the launcher's side
        keras_jax.result_of(GroupResult(True, False, 1.0), out, 60)


BN_CHECK = textwrap.dedent("""
    import sys
    sys.modules["tensorflow"] = None
    import numpy as np, jax, keras
    from jax.sharding import NamedSharding, PartitionSpec as P
    from distbench.training.jax_loop import make_train_step

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), keras.layers.BatchNormalization(momentum=0.5),
                              keras.layers.Dense(3)])
    opt = keras.optimizers.SGD(0.1)
    opt.build(model.trainable_variables)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
    x = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    x[:4] += 5.0  # the two devices' halves of the batch have very different moments
    y = np.arange(8, dtype=np.int32) % 3
    state = jax.tree.map(np.asarray, ([v.value for v in model.trainable_variables],
                                      [v.value for v in model.non_trainable_variables],
                                      [v.value for v in opt.variables]))
    out = {}
    for n in (1, 2):
        mesh = jax.sharding.Mesh(np.array(jax.devices()[:n]), ("batch",))
        rep, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("batch"))
        step = make_train_step(model, opt, loss, jax.tree.map(lambda a: rep, state))
        _, new = step(jax.device_put(state, rep), jax.device_put(x, split), jax.device_put(y, split))
        out[n] = [np.asarray(a) for a in jax.tree.leaves(new)]
    h = x @ state[0][0] + state[0][1]  # the BatchNormalization layer's input
    moving_mean = out[2][len(state[0])]
    print(max(float(np.abs(a - b).max()) for a, b in zip(out[1], out[2])),
          float(np.abs(moving_mean - 0.5 * h.mean(0)).max()), float(np.abs(moving_mean - 0.5 * h[:4].mean(0)).max()))
""")


@requires(module="jax")
def test_batchnorm_moments_are_the_global_batch_s_under_data_parallel():
    import subprocess

    env = {**os.environ, **JAX_ENV, "XLA_FLAGS": xla_flags(2)}
    cp = subprocess.run([sys.executable, "-c", BN_CHECK], env=env, capture_output=True, text=True, timeout=120,
                        cwd=ROOT)
    assert cp.returncode == 0, cp.stderr[-2000:]
    one_vs_two, to_global, to_half = (float(v) for v in cp.stdout.split()[-3:])
    assert one_vs_two < 1e-5  # the step on 2 devices is the step on 1: the moments are not per device
    assert to_global < 1e-5 and to_half > 1.0  # the moving mean moved toward the global batch's mean


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], dict]:
    out = tmp_path_factory.mktemp("keras-jax") / "run"
    cp = distbench("run", "--strategies", f"single,{NAME},{MULTI},{MODEL}", "--workers", "1,2", "--epochs", "3",
                   "--repeats", "1", "--out", str(out), timeout=600)
    assert cp.returncode == 0, cp.stderr[-3000:]
    recs = {(r["strategy"], r["workers"]): r for r in read_records(out)}
    assert set(recs) == {("single", 1), (NAME, 1), (NAME, 2), (MULTI, 1), (MULTI, 2), (MODEL, 1), (MODEL, 2)}
    assert recs.pop((MODEL, 1))["reason"].startswith("ModelParallel needs at least 2 devices")
    for key, r in recs.items():
        assert r["status"] == "ok", (key, r["reason"], r.get("log_tail", "")[-1500:])
    return recs


@pytest.mark.integration
@requires(module="jax")
def test_one_device_trains_single_s_steps_to_single_s_accuracy(sweep):
    single, jx = sweep[("single", 1)], sweep[(NAME, 1)]
    for key in ("steps", "samples", "epochs", "global_batch_size", "learning_rate", "initial_weights_sha256",
                "workload"):
        assert jx[key] == single[key], key
    assert jx["details"]["steps_per_epoch"] == single["details"]["steps_per_epoch"]
    assert [p["step"] for p in jx["curve"]] == [p["step"] for p in single["curve"]]
    assert abs(jx["final_test_accuracy"] - single["final_test_accuracy"]) <= ACCURACY_TOL
    assert jx["final_test_loss"] == pytest.approx(single["final_test_loss"], rel=LOSS_RTOL)
    d = jx["details"]
    assert d["backend"] == "jax" and d["tensorflow_imported"] is False and d["versions"]["jax"]
    assert d["mesh"]["shape"] == [1] and d["step_collectives"] == {} and jx["replicas"] == 1


@pytest.mark.integration
@requires(module="jax")
def test_two_devices_record_their_mesh_and_all_reduce(sweep):
    single, jx = sweep[("single", 1)], sweep[(NAME, 2)]
    d = jx["details"]
    assert jx["replicas"] == 2 and jx["per_replica_batch_size"] == single["global_batch_size"] // 2
    mesh = d["mesh"]
    assert (mesh["shape"], mesh["axis_names"], mesh["devices"], mesh["batch_dim"]) == ([2], ["batch"],
                                                                                      ["cpu:0", "cpu:1"], "batch")
    assert len(mesh["jax_devices"]) == 2 and mesh["device_kind"].startswith("host-platform CPU devices")
    assert d["distribution"] == "keras.distribution.DataParallel" and d["step_collectives"]["all-reduce"] >= 1
    assert "SPMD partitioner" in d["collective"] and d["tensorflow_imported"] is False
    assert jx["steps"] == single["steps"]
    assert abs(jx["final_test_accuracy"] - single["final_test_accuracy"]) <= ACCURACY_TOL
    assert json.dumps(d)  # the record's details are plain JSON


SEEDING_CHECK = textwrap.dedent("""
    import sys
    import keras
    from distbench.training.jax_loop import skip_tensorflow_seeding

    skip_tensorflow_seeding()
    keras.utils.set_random_seed(0)
    seeded_without_tf = "tensorflow" not in sys.modules
    import tensorflow  # a user's model module may import it (it failed when the import was blocked)
    keras.utils.set_random_seed(1)
    print(keras.backend.backend(), seeded_without_tf, "tensorflow" in sys.modules)
""")


def test_seeding_skips_tensorflow_and_a_model_module_may_import_it():
    cp = subprocess.run([sys.executable, "-c", SEEDING_CHECK], capture_output=True, text=True, timeout=300,
                        env={**os.environ, "KERAS_BACKEND": "jax"})
    assert cp.returncode == 0, cp.stderr[-2000:]
    assert cp.stdout.split()[-3:] == ["jax", "True", "True"], cp.stdout


@pytest.mark.integration
@requires(module="jax")
def test_two_processes_train_as_two_devices_do(sweep):
    one, two = sweep[(NAME, 2)], sweep[(MULTI, 2)]
    d = two["details"]
    assert d["processes"] == 2 and two["replicas"] == 2 and d["replicas_in_sync_check"] == "passed"
    assert len(d["process_netns"]) == 2 and len(set(d["worker_weight_sha256"])) == 1
    assert d["mesh"]["shape"] == [2] and d["mesh"]["device_kind"] == "CPU devices, one per process"
    assert "Gloo across 2 processes" in d["collective"] and d["step_collectives"]["all-reduce"] >= 1
    assert two["steps"] == one["steps"] and two["initial_weights_sha256"] == one["initial_weights_sha256"]
    assert abs(two["final_test_accuracy"] - one["final_test_accuracy"]) <= ACCURACY_TOL
    assert two["final_test_loss"] == pytest.approx(one["final_test_loss"], rel=LOSS_RTOL)
    assert sweep[(MULTI, 1)]["status"] == "ok" and sweep[(MULTI, 1)]["details"]["processes"] == 1


@pytest.mark.integration
@requires(module="jax")
def test_model_parallel_shards_the_kernels_and_trains_as_single(sweep):
    single, mp = sweep[("single", 1)], sweep[(MODEL, 2)]
    d = mp["details"]
    assert d["distribution"] == "keras.distribution.ModelParallel" and d["mesh"]["shape"] == [1, 2]
    assert d["mesh"]["axis_names"] == ["batch", "model"] and mp["replicas"] == 1
    assert any(k.endswith("dense/kernel") and v == [None, "model"] for k, v in d["sharded_variables"].items())
    assert mp["steps"] == single["steps"] and mp["initial_weights_sha256"] == single["initial_weights_sha256"]
    assert abs(mp["final_test_accuracy"] - single["final_test_accuracy"]) <= ACCURACY_TOL
    assert mp["final_test_loss"] == pytest.approx(single["final_test_loss"], rel=LOSS_RTOL)


@pytest.mark.integration
@requires(module="jax")
def test_model_parallel_builds_a_factory_with_synchronized_batchnorm(tmp_path):
    # the plan's probe build refused BatchNormalization(synchronized=True) outside the JAX rule's context
    out = tmp_path / "run"
    cp = distbench("run", str(ROOT / "examples" / "your_model.toml"), "--strategies", MODEL, "--workers", "2",
                   "--epochs", "2", "--out", str(out), timeout=600, cwd=ROOT)
    assert cp.returncode == 0, cp.stderr[-3000:]
    (r,) = read_records(out)
    assert r["status"] == "ok", r["reason"]
    assert r["details"]["sharded_variables"] == {"dense/kernel": [None, "model"], "dense/bias": ["model"]}
