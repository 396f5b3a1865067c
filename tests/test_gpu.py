"""Issue 35: a machine whose NVIDIA GPUs TensorFlow cannot use is never benchmarked on its
CPU without saying so. A fake ``nvidia-smi`` on ``PATH`` lists two GPUs; CUDA's libraries
are not installed here, so ``distbench env`` names what is missing and every configuration
is ``unavailable`` with it, unless ``[run] device = "cpu"`` asks for the CPU."""

from __future__ import annotations

import json
import os

import pytest

from distbench import gpu
from distbench.config import ConfigError, from_dict
from tests.conftest import distbench

TWO_GPUS = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)", "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb)")


@pytest.fixture
def fake_gpus(tmp_path):
    """``PATH`` with an ``nvidia-smi`` that lists two GPUs, as the driver's does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n[ \"$1\" = -L ] || exit 9\n" + "".join(f"echo '{g}'\n" for g in TWO_GPUS))
    smi.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_problem_names_the_gpus_the_missing_libraries_and_the_fix(monkeypatch):
    monkeypatch.setattr(gpu, "_state", lambda: (TWO_GPUS, ()))
    why = gpu.problem("auto")
    assert "this machine has 2 NVIDIA GPU(s) (GPU 0: NVIDIA H100 80GB HBM3" in why
    assert "nvidia-cudnn-cu12" in why and "tensorflow[and-cuda]" in why and '[run] device = "cpu"' in why
    assert gpu.problem("cpu") is None
    monkeypatch.setattr(gpu, "_state", lambda: (TWO_GPUS, ("nvidia-cudnn-cu12 9.3",)))
    assert gpu.problem("auto") is None and gpu.problem("gpu") is None
    monkeypatch.setattr(gpu, "_state", lambda: ((), ()))
    assert gpu.problem("auto") is None
    assert 'run.device = "gpu" but nvidia-smi lists no GPU here' in gpu.problem("gpu")
    with pytest.raises(ConfigError, match="run.device = 'tpu'"):
        from_dict({"run": {"device": "tpu"}})


def test_env_and_run_refuse_gpus_tensorflow_cannot_use(tmp_path, fake_gpus):
    if gpu.cuda_libraries():
        pytest.skip("CUDA's libraries are installed here: TensorFlow can use a GPU")
    env = distbench("env", "--json", env=fake_gpus, timeout=300)
    assert env.returncode == 0, env.stderr[-2000:]
    info = json.loads(env.stdout)
    assert info["gpus"][0] == "GPUs: 2 listed by nvidia-smi -L" and "TensorFlow cannot use them" in info["gpus"][3]
    assert info["gpus"][4].startswith("  JAX (keras_jax): this machine has 2 NVIDIA GPU(s) but JAX cannot use them: "
                                      "jax-cuda12-plugin is not installed")
    rows = {s["name"]: s for s in info["strategies"]}
    assert not rows["single"]["available"] and "CUDA's libraries are missing" in rows["single"]["reason"]
    assert not rows["mirrored"]["available"]
    assert "jax[cuda12]" in rows["keras_jax:data_parallel"]["reason"]  # not TensorFlow's fix (user test)
    text = distbench("env", env=fake_gpus, timeout=300)
    assert "GPU 1: NVIDIA H100 80GB HBM3" in text.stdout and "TensorFlow cannot use them" in text.stdout
    assert text.stdout.count("CUDA's libraries are missing") == 1  # once, not once per strategy
    assert "unavailable GPUs its framework cannot use (see GPUs above)" in text.stdout
    out = tmp_path / "run"
    run = distbench("run", "--strategies", "single,mirrored", "--epochs", "1", "--repeats", "1", "--out", str(out),
                    env=fake_gpus, timeout=300)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in records] == ["unavailable", "unavailable"], run.stderr[-2000:]
    assert all("CUDA's libraries are missing" in r["reason"] for r in records)
    assert from_dict({"run": {"device": "cpu"}}).run.device == "cpu"
    out = tmp_path / "cpu"  # --device cpu: the embedded default otherwise (a config file would change it)
    run = distbench("run", "--device", "cpu", "--strategies", "single", "--epochs", "1", "--repeats", "1", "--out",
                    str(out), env=fake_gpus, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert record["status"] == "ok" and record["details"]["device_names"] == ["CPU"]
    assert json.loads((out / "config.json").read_text())["run"]["device"] == "cpu"
    # user test: the report named the GPUs and nowhere said the numbers are the CPU's
    assert "hidden (CUDA_VISIBLE_DEVICES='-1'): trained on the CPU" in (out / "report.md").read_text()


def _two_listed(monkeypatch):
    gpu._state.cache_clear()
    monkeypatch.setattr(gpu, "_state", lambda: (TWO_GPUS, ("nvidia-cuda-runtime-cu12 12.5",)))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_each_worker_process_gets_one_gpu_per_host_and_servers_none(monkeypatch):
    _two_listed(monkeypatch)
    assert gpu.process_envs(["127.0.0.1"] * 3, servers=1) == [
        {"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}, {"CUDA_VISIBLE_DEVICES": "0"},  # round robin
        {"CUDA_VISIBLE_DEVICES": "-1"}]
    # two hosts: each host's workers count from its first GPU
    assert [e["CUDA_VISIBLE_DEVICES"] for e in gpu.process_envs(["10.0.0.2", "10.0.0.3", "10.0.0.2"])] == ["0", "0", "1"]
    # the user's own CUDA_VISIBLE_DEVICES is the list handed out; -1 means none
    assert [e["CUDA_VISIBLE_DEVICES"] for e in gpu.process_envs(["h", "h"], env={"CUDA_VISIBLE_DEVICES": "2,3"})] \
        == ["2", "3"]
    assert gpu.process_envs(["h", "h"], servers=1, env={"CUDA_VISIBLE_DEVICES": "-1"}) == [{}, {}, {}]


def test_without_gpus_no_launcher_touches_the_environment(monkeypatch):
    gpu._state.cache_clear()
    monkeypatch.setattr(gpu, "_state", lambda: ((), ()))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpu.process_envs(["127.0.0.1"] * 2, servers=1) == [{}, {}, {}]


def test_multi_worker_mirrored_and_tf_ps_launchers_give_each_worker_its_gpu(monkeypatch, tmp_path):
    from distbench.strategies.multi_worker_mirrored import worker_commands
    from distbench.strategies.tf_ps import cluster_spec, server_commands

    _two_listed(monkeypatch)
    base = {"PATH": "/usr/bin"}
    mw = worker_commands(tmp_path, "k", [1001, 1002, 1003], 1, base_env=base)
    assert [env["CUDA_VISIBLE_DEVICES"] for _, env in mw] == ["0", "1", "0"]
    servers = server_commands(cluster_spec([2001, 2002, 2003, 2004], 2, 1), 1, tmp_path, base_env=base)
    assert [(name, env["CUDA_VISIBLE_DEVICES"]) for name, _, env in servers] == [
        ("worker 0", "0"), ("worker 1", "1"), ("ps 0", "-1")]


class _Dev:
    def __init__(self, i):
        self.name, self.device_type = f"/physical_device:GPU:{i}", "GPU"


def test_place_pins_one_gpu_with_memory_growth_and_hides_them_from_a_server(monkeypatch):
    import tensorflow as tf

    devs, calls = [_Dev(0), _Dev(1)], []
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: devs if kind == "GPU" else [])
    monkeypatch.setattr(tf.config, "set_visible_devices", lambda d, kind: calls.append(("visible", [x.name for x in d])))
    monkeypatch.setattr(tf.config.experimental, "set_memory_growth", lambda d, on: calls.append(("growth", d.name, on)))
    monkeypatch.setattr(tf.config.experimental, "get_device_details", lambda d: {"device_name": "NVIDIA H100"})
    monkeypatch.setattr(gpu, "_PLACED", [])
    assert gpu.place(3) == ["GPU 1: NVIDIA H100"]  # local rank 3 of 2 GPUs: round robin
    assert calls == [("visible", ["/physical_device:GPU:1"]), ("growth", "/physical_device:GPU:1", True)]
    assert gpu.place(0) == ["GPU 1: NVIDIA H100"]  # placed once per process (a shared engine's rank)
    monkeypatch.setattr(gpu, "_PLACED", [])
    calls.clear()
    assert gpu.place(0, count=4) == ["GPU 0: NVIDIA H100", "GPU 1: NVIDIA H100"]  # mirrored: min(workers, GPUs)
    monkeypatch.setattr(gpu, "_PLACED", [])
    calls.clear()
    assert gpu.place(None) == ["CPU"] and calls == [("visible", [])]  # a parameter server


def test_place_on_a_machine_without_gpus_is_the_cpu(monkeypatch):
    import tensorflow as tf

    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [])
    monkeypatch.setattr(gpu, "_PLACED", [])
    assert gpu.place(0) == ["CPU"]


def test_mirrored_all_reduces_by_nccl_on_gpus_else_by_hierarchical_copy(monkeypatch):
    import tensorflow as tf
    from tensorflow.python.framework import kernels

    from distbench.strategies.mirrored import cross_device_ops

    assert cross_device_ops(tf, "logical CPU") is None and cross_device_ops(tf, "logical GPU (2 on one)") is None
    assert isinstance(cross_device_ops(tf, "GPU"), tf.distribute.NcclAllReduce)  # this wheel has the kernel

    class NoKernels:
        kernel = []

    monkeypatch.setattr(kernels, "get_registered_kernels_for_op", lambda op: NoKernels())
    assert isinstance(cross_device_ops(tf, "GPU"), tf.distribute.HierarchicalCopyAllReduce)


def test_gpus_hidden_by_the_user_ask_for_the_cpu_and_the_report_says_so(monkeypatch):
    from distbench.results.reportdata import describe_hardware

    monkeypatch.setattr(gpu, "_state", lambda: (TWO_GPUS, ()))  # listed, no CUDA libraries
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert "CUDA's libraries are missing" in gpu.problem("auto")
    for hidden in ("-1", ""):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)  # user test: the standard way was refused
        assert gpu.problem("auto") is None and gpu.jax_problem("auto") is None
        assert "hides every GPU" in gpu.problem("gpu")
        assert "hidden by CUDA_VISIBLE_DEVICES" in gpu.describe()[-1]
    prov = {"hostname": "h", "cpu_count": 2, "cpu_model": "EPYC", "gpus": list(TWO_GPUS),
            "kernel_env": {"CUDA_VISIBLE_DEVICES": "-1"}}
    assert "hidden (CUDA_VISIBLE_DEVICES='-1'): trained on the CPU" in describe_hardware(prov)
    assert "hidden" not in describe_hardware({**prov, "kernel_env": {"CUDA_VISIBLE_DEVICES": None}})


def test_device_gpu_without_a_gpu_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    # user test (helper-40): --device gpu here made a run directory of unavailable records and exited 1
    from click.testing import CliRunner

    from distbench.cli import main

    monkeypatch.setattr(gpu, "listed", lambda: ())
    monkeypatch.setattr(gpu, "_state", lambda: ((), ()))
    res = CliRunner().invoke(main, ["run", "--strategies", "single", "--device", "gpu", "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and 'run.device = "gpu" but nvidia-smi lists no GPU here' in res.output
    assert not (tmp_path / "r").exists()
    assert "(--device cpu)" in res.output
    # helper-42: compare() named the config file's key; it names its own keyword
    import numpy as np

    from distbench import compare

    x, y = np.random.rand(60, 4).astype("float32"), np.arange(60) % 2
    with pytest.raises(ConfigError, match='^device="gpu" but nvidia-smi lists no GPU here .*; use device="auto" or '
                                          '"cpu" on this machine$'):
        compare(None, (x, y), strategies=["single"], device="gpu", out=tmp_path / "api")
    assert not (tmp_path / "api").exists()
