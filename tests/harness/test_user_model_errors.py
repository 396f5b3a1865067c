"""``distbench run`` refuses a bad ``[model]`` before any configuration starts: exit 2,
one line, no run directory left behind."""

from __future__ import annotations

import os

import pytest

from tests.conftest import ROOT, distbench

pytestmark = pytest.mark.integration  # each case starts `distbench run`, which imports TensorFlow
ENV = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
F = "tests.plugins.models"


def _saved(tmp_path, name: str, shape: tuple[int, ...]) -> str:
    import keras

    path = tmp_path / name
    keras.Sequential([keras.Input(shape), keras.layers.Flatten(), keras.layers.Dense(10)]).save(path)
    return str(path)


@pytest.mark.parametrize("case, model, message", [
    ("missing module", f'factory = "{F}x:build"', f"cannot import module '{F}x' (No module named '{F}x')"),
    ("missing function", f'factory = "{F}:nope"', f"module '{F}' has no attribute 'nope'"),
    ("raising", f'factory = "{F}:raises"', ("raised RuntimeError for input_shape=(8, 8, 1), num_classes=10: cannot "
                                            "build for 10 classes")),
    ("not a model", f'factory = "{F}:not_a_model"', "returned a list, expected an uncompiled keras.Model"),
    ("regression", f'factory = "{F}:regression"', ("not supported: distbench compares classifiers: the model has 13 "
                                                   "outputs for the data's 10 classes")),
    ("junk file", "path = '{junk}'", "is not a loadable Keras 3 model"),
    ("other input shape", "path = '{small}'", ("takes inputs of shape (None, 5, 5, 2) but the data's samples have "
                                               "shape (8, 8, 1)")),
    ("unknown application", 'name = "resnet5"', "expected mlp, cnn or a keras.applications model: convnext_tiny"),
    ("images too small", 'name = "resnet50"', ("cannot take the data's input shape (8, 8, 1): Input size must be at "
                                               "least 32x32; Received: input_shape=(8, 8, 1); use data with larger "
                                               "images")),
    ("two inputs", f'factory = "{F}:two_inputs"', ("has 2 inputs, expected 1: distbench feeds each step one batch of "
                                                   "the data's samples (shape (8, 8, 1)); build a model with one Input")),
    ("two sources", f'factory = "{F}:with_dropout"\npath = "{{small}}"', "are both set: choose one source"),
])
def test_bad_model_exits_2_with_one_line(tmp_path, case, model, message):
    junk = tmp_path / "junk.keras"
    junk.write_bytes(b"not a keras file")
    small = _saved(tmp_path, "small.keras", (5, 5, 2)) if "small" in model else ""
    cfg = tmp_path / "c.toml"
    cfg.write_text("[model]\n" + model.format(junk=junk, small=small) + "\n")
    out = tmp_path / "run"
    cp = distbench("run", str(cfg), "--strategies", "single", "--epochs", "1", "--out", str(out), env=ENV,
                   timeout=180)
    lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    assert cp.returncode == 2, cp.stderr[-2000:]
    assert lines == [lines[-1]] and lines[-1].startswith("distbench: error: "), cp.stderr[-2000:]
    assert message in lines[-1]
    assert not out.exists()  # nothing that looks like a run
