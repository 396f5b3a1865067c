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
    assert record["status"] == "ok"
    assert json.loads((out / "config.json").read_text())["run"]["device"] == "cpu"
