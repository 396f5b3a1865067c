"""The workload is saved once and reloaded identically; tampering is detected."""

from __future__ import annotations

import numpy as np
import pytest

from distbench import config
from distbench.config import ConfigError
from distbench.workload import WEIGHTS_FILE, WORKLOAD_DIR, Workload, save_weights


def test_create_then_load_is_identical(tmp_path):
    cfg = config.load(None)
    a = Workload.create(cfg, tmp_path)
    b = Workload.load(tmp_path)
    assert a.initial_weights_sha256 == b.initial_weights_sha256 and a.data_sha256 == b.data_sha256
    assert all((x == y).all() for x, y in zip(a.initial_weights, b.initial_weights))
    model = b.build_model()
    assert all((x == y).all() for x, y in zip(model.get_weights(), a.initial_weights))
    # the same seed gives the same weights in a fresh directory
    c = Workload.create(cfg, tmp_path / "other")
    assert c.initial_weights_sha256 == a.initial_weights_sha256
    assert a.steps_per_epoch() == len(a.dataset.y_train) // cfg.training.global_batch_size


def test_tampered_weights_detected(tmp_path):
    w = Workload.create(config.load(None), tmp_path)
    bad = [x + np.float32(1) for x in w.initial_weights]
    save_weights(tmp_path / WORKLOAD_DIR / WEIGHTS_FILE, bad)
    with pytest.raises(ConfigError, match="does not match its recorded SHA-256"):
        Workload.load(tmp_path)


def test_linear_lr_scaling(tmp_path):
    cfg = config.override(config.load(None), training__lr_scaling="linear", training__learning_rate=0.1)
    w = Workload.create(cfg, tmp_path)
    assert w.learning_rate(4) == pytest.approx(0.4) and w.learning_rate(1) == pytest.approx(0.1)


def test_batch_larger_than_training_split(tmp_path):
    cfg = config.override(config.load(None), training__global_batch_size=4096)
    with pytest.raises(ConfigError, match="exceeds the 1293 training samples"):
        Workload.create(cfg, tmp_path)
