"""The workload is saved once and reloaded identically; tampering is detected."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest

from distbench import config
from distbench.config import ConfigError
from distbench.models.output import SPARSE, LossSpec
from distbench.workload import (DATASET_CACHE, WEIGHTS_FILE, WORKLOAD_DIR, Workload, remove_dataset_cache,
                                save_weights)


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


def test_the_sweeps_dataset_cache_gives_the_same_splits_and_never_other_data(tmp_path, monkeypatch):
    import distbench.workload as W

    a = Workload.create(config.load(None), tmp_path)
    path = a.write_dataset_cache()
    assert path == tmp_path / WORKLOAD_DIR / DATASET_CACHE and path.exists()
    sources = []
    real = W.load_dataset
    monkeypatch.setattr(W, "load_dataset", lambda *args: sources.append(1) or real(*args))
    b = Workload.load(tmp_path, cached=True)
    assert not sources  # read from the cache, not the source
    assert b.data_sha256 == a.data_sha256 and b.dataset.details == a.dataset.details
    for k in ("x_train", "y_train", "x_val", "y_val", "x_test", "y_test"):
        x, y = getattr(a.dataset, k), getattr(b.dataset, k)
        assert x.dtype == y.dtype and x.shape == y.shape and (x == y).all()
    Workload.load(tmp_path)  # the sweep's own load reads the source
    assert len(sources) == 1
    other = dict(np.load(path))  # a cache whose data differ from the recorded fingerprint is not used
    other["x_train"] = other["x_train"] + np.float32(1)
    with open(path, "wb") as f:
        np.savez(f, **other)
    c = Workload.load(tmp_path, cached=True)
    assert len(sources) == 2 and (c.dataset.x_train == a.dataset.x_train).all()
    path.write_bytes(b"not an npz")  # unreadable: the source
    assert Workload.load(tmp_path, cached=True).data_sha256 == a.data_sha256 and len(sources) == 3
    remove_dataset_cache(tmp_path)
    remove_dataset_cache(tmp_path)  # nothing there: no error
    assert not path.exists()


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


def test_user_model_source_and_loss_are_saved_and_reloaded(tmp_path):
    cfg = config.override(config.load(None), model__factory="tests.plugins.models:softmax_head")
    a = Workload.create(cfg, tmp_path)
    meta = json.loads((tmp_path / WORKLOAD_DIR / "workload.json").read_text())
    assert meta["model"] == "factory:tests.plugins.models:softmax_head"
    assert meta["loss"] == {"loss": "sparse_categorical_crossentropy", "from_logits": False}
    b = Workload.load(tmp_path)
    assert b.loss == a.loss == LossSpec(SPARSE, from_logits=False)
    d = b.describe()
    assert d["model"] == "factory:tests.plugins.models:softmax_head" and d["model_output"] == "probabilities"
    assert d["loss"] == "sparse_categorical_crossentropy" and d["num_parameters"] == 64 * 16 + 16 + 16 * 10 + 10
    assert isinstance(b.loss_fn(), keras.losses.SparseCategoricalCrossentropy) and not b.loss_fn().from_logits


def test_a_run_of_a_factory_imports_it_from_the_folder_it_was_found_in_from_any_folder(tmp_path, monkeypatch):
    """User tests (helper-35, helper-36): --resume, predict and the printed commands failed from any
    other folder than the one the factory's module was imported from (every configuration of a
    resume failed, each leaving a failed record); a module gone is refused before any run."""
    import sys

    from distbench.harness.rundir import prepare_run_dir, recorded_config

    (tmp_path / "mymodels_h35.py").write_text("from tests.plugins.models import softmax_head as build\n")
    monkeypatch.chdir(tmp_path)
    cfg = config.override(config.load(None), model__factory="mymodels_h35:build")
    assert cfg.model.factory_dir == str(tmp_path)
    Workload.create(cfg, tmp_path / "run")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in (str(tmp_path), "")])
    monkeypatch.delitem(sys.modules, "mymodels_h35")
    resumed = config.override(recorded_config(tmp_path / "run"), run__repeats=2)
    quiet = []  # helper-36: TensorFlow's start-up lines printed on resume, where it was imported loudly
    assert prepare_run_dir(resumed, tmp_path / "run", resume=True, before_model=lambda: quiet.append(
        "mymodels_h35" in sys.modules)).build_model() is not None
    assert quiet == [False]  # TensorFlow made quiet before the factory's module is imported
    # a run recorded before factory_dir existed is the same workload
    old = json.loads((tmp_path / "run" / "config.json").read_text())
    del old["model"]["factory_dir"]
    (tmp_path / "run" / "config.json").write_text(json.dumps(old))
    recorded = (tmp_path / "run" / "config.json").read_text()
    (tmp_path / "mymodels_h35.py").rename(tmp_path / "gone.py")
    sys.path.remove(str(tmp_path))
    del sys.modules["mymodels_h35"]
    with pytest.raises(ConfigError, match="cannot import module 'mymodels_h35'.*run distbench from the folder"):
        prepare_run_dir(resumed, tmp_path / "run", resume=True)
    assert (tmp_path / "run" / "config.json").read_text() == recorded


def test_a_moved_run_directory_reads_its_own_inputs(tmp_path):
    """compare() saves its arrays in RUN_DIR/inputs and records the path absolute: a copied or
    moved run directory read the original's file, or failed once it was gone."""
    import shutil

    from distbench.harness.rundir import check_run_dir, recorded_config
    from sklearn.datasets import load_digits

    d = load_digits()
    (tmp_path / "a" / "inputs").mkdir(parents=True)
    np.savez(tmp_path / "a" / "inputs" / "data.npz", x=(d.data / 16).astype(np.float32), y=d.target)
    cfg = config.from_dict({"data": {"name": "npz", "path": str(tmp_path / "a" / "inputs" / "data.npz")}})
    first = Workload.create(cfg, tmp_path / "a")
    shutil.move(tmp_path / "a", tmp_path / "b")
    moved = recorded_config(tmp_path / "b")
    assert moved.data.path == str((tmp_path / "b" / "inputs" / "data.npz").resolve())
    check_run_dir(moved, tmp_path / "b", resume=True)  # the same workload: not refused as another data path
    assert Workload.load(tmp_path / "b").data_sha256 == first.data_sha256
    # and its Run next commands, which name RUN_DIR/config.json
    assert config.load(tmp_path / "b" / "config.json").data.path == moved.data.path


def test_a_workload_received_without_its_loss_reads_it_from_the_model(tmp_path):
    """A Horovod rank gets config, weights and hashes from rank 0, not the loss."""
    cfg = config.override(config.load(None), model__factory="tests.plugins.models:softmax_head")
    a = Workload.create(cfg, tmp_path)
    rank = Workload(a.config, a.dataset, a.initial_weights, a.initial_weights_sha256, a.data_sha256, tmp_path)
    assert rank.loss is None
    rank.build_model()
    assert rank.loss == a.loss


def test_a_model_built_differently_in_another_process_names_the_rule(tmp_path):
    a = Workload.create(config.load(None), tmp_path)
    other = Workload(a.config, a.dataset, [w[..., :1] for w in a.initial_weights], a.initial_weights_sha256,
                     a.data_sha256, tmp_path)  # as if the factory had drawn other layer sizes when they were saved
    with pytest.raises(ValueError, match="the model must have the same architecture every time it is built"):
        other.build_model()
    # a .keras path replaced since the run began is named as such, not as a factory (user test, helper-31)
    import dataclasses

    keras = pytest.importorskip("keras")
    path = tmp_path / "m.keras"
    keras.Sequential([keras.Input((64,)), keras.layers.Dense(8), keras.layers.Dense(10)]).save(path)
    moved = Workload(dataclasses.replace(a.config, model=dataclasses.replace(a.config.model, path=str(path))),
                     a.dataset, a.initial_weights, a.initial_weights_sha256, a.data_sha256, tmp_path)
    with pytest.raises(ValueError, match=f"{path} no longer holds the model this run started from"):
        moved.build_model()


@pytest.mark.parametrize("n,g,workers", [(432, 64, [2]), (432, 64, [2, 3]), (1293, 500, [2, 4]), (100, 64, [1]),
                                         (1000, 96, [8])])
def test_the_suggested_batch_size_is_one_the_config_accepts_and_drops_little(n, g, workers):
    # the user test: 432 samples, batch 64, workers [2] suggested 61, which the config then refused
    # ("not divisible by run.workers = 2")
    from distbench.workload import DROPPED_SHARE_WARNING, even_batch

    b = even_batch(n, g, workers)
    assert all(b % w == 0 for w in workers) and g / 2 <= b <= 2 * g
    assert n % b <= DROPPED_SHARE_WARNING * n
    if (n, g, workers) == (432, 64, [2]):  # user test (helper-35): 66 left 36 out, 72 divides the split
        assert b == 72
