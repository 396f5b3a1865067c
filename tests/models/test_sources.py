"""The user's own models: factory functions, saved .keras files, keras.applications."""

from __future__ import annotations

import sys
import textwrap

import keras
import numpy as np
import pytest

from distbench.config import ConfigError, ModelConfig
from distbench.models import build_model, check_model, model_source, num_parameters
from distbench.models.output import BINARY, SPARSE, LossSpec
from distbench.models.sources import from_application, from_file, import_factory
from distbench.workload import weights_sha256

DIGITS = (8, 8, 1)
PLUGIN = "tests.plugins.models"


def factory(name: str) -> ModelConfig:
    return ModelConfig(factory=f"{PLUGIN}:{name}")


def built(spec: ModelConfig, shape: tuple[int, ...] = DIGITS, classes: int = 10, seed: int = 1) -> keras.Model:
    keras.utils.set_random_seed(seed)
    return build_model(spec, shape, classes)


# ------------------------------------------------------------------ factories
def test_factory_builds_the_users_model_with_its_dropout():
    spec = factory("with_dropout")
    m = built(spec)
    assert any(isinstance(layer, keras.layers.Dropout) for layer in m.layers)
    assert num_parameters(m.get_weights()) == 64 * 32 + 32 + 32 * 10 + 10
    assert check_model(m, spec, DIGITS, 10) == LossSpec(SPARSE, from_logits=True)
    assert model_source(spec) == "factory:tests.plugins.models:with_dropout"
    # the same seed gives the same weights: every process rebuilds the same architecture
    assert weights_sha256(built(spec).get_weights()) == weights_sha256(m.get_weights())


def test_subclassed_model_gets_its_weights_before_they_are_loaded():
    spec = ModelConfig(factory=f"{PLUGIN}:Subclassed.build")
    m = built(spec)
    assert [w.shape for w in m.get_weights()] == [(64, 16), (16,), (16, 10), (10,)]
    assert check_model(m, spec, DIGITS, 10) == LossSpec(SPARSE, from_logits=False)  # softmax, last attribute


@pytest.mark.parametrize("name, message", [
    ("tests.plugins.nope:build", ("cannot import module 'tests.plugins.nope' (No module named 'tests.plugins.nope'); "
                                  "run distbench from the folder")),
    (f"{PLUGIN}:missing", f"module '{PLUGIN}' has no attribute 'missing' (it defines: "),
    # a close name is offered, and only what the module defines is listed (not `keras`, `Any`)
    (f"{PLUGIN}:with_dropot", "no attribute 'with_dropot'; did you mean 'with_dropout'? (it defines: "),
    (f"{PLUGIN}:NOT_CALLABLE", "'NOT_CALLABLE' is an int, not a function (input_shape, num_classes) -> keras.Model"),
    (f"{PLUGIN}:raises", "raised RuntimeError for input_shape=(8, 8, 1), num_classes=10: cannot build for 10 classes"),
    (f"{PLUGIN}:not_a_model", "returned a list, expected an uncompiled keras.Model"),
])
def test_bad_factories_are_named(name, message):
    with pytest.raises(ConfigError, match="^model.factory = ") as e:
        build_model(ModelConfig(factory=name), DIGITS, 10)
    assert message in str(e.value)
    assert "keras," not in str(e.value) and "Any," not in str(e.value)


def test_factory_form_and_a_module_whose_import_fails(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="expected 'package.module:function'"):
        import_factory("no_colon")
    with pytest.raises(ConfigError, match="'mymod.py' is a file name; name the module as Python imports it: "
                                          "\"mymod:build\""):
        import_factory("mymod.py:build")
    (tmp_path / "broken_models.py").write_text("def build(:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="importing module 'broken_models' raised SyntaxError"):
        import_factory("broken_models:build")
    # the module is found, one of its own imports is not: the fix is installing that, not a path
    (tmp_path / "needs_dep.py").write_text("import nonexistent_pkg_xyz\ndef build(s, n): pass\n")
    with pytest.raises(ConfigError, match="module 'needs_dep' imports 'nonexistent_pkg_xyz', which is not installed"):
        import_factory("needs_dep:build")


def test_factory_module_is_found_in_the_current_directory(tmp_path, monkeypatch):
    pkg = tmp_path / "cwd_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "nets.py").write_text(textwrap.dedent("""
        import keras
        def build(input_shape, num_classes):
            return keras.Sequential([keras.Input(input_shape), keras.layers.Flatten(), keras.layers.Dense(num_classes)])
    """))
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.chdir(tmp_path)
    m = build_model(ModelConfig(factory="cwd_pkg.nets:build"), DIGITS, 3)
    assert m.output_shape == (None, 3) and str(tmp_path) in sys.path


# ------------------------------------------------------------- saved models
def _save(tmp_path, input_shape=DIGITS, classes=10) -> str:
    keras.utils.set_random_seed(7)
    m = keras.Sequential([keras.Input(input_shape), keras.layers.Flatten(), keras.layers.Dense(12, activation="relu"),
                          keras.layers.Dense(classes, activation="softmax")])
    path = tmp_path / "model.keras"
    m.save(path)
    return str(path)


def test_saved_model_brings_its_weights_or_is_reinitialised(tmp_path):
    path = _save(tmp_path)
    saved = keras.saving.load_model(path).get_weights()
    spec = ModelConfig(path=path)
    m = built(spec)
    assert all((a == b).all() for a, b in zip(m.get_weights(), saved))
    assert check_model(m, spec, DIGITS, 10) == LossSpec(SPARSE, from_logits=False)
    assert model_source(spec) == f"path:{path}"
    re_spec = ModelConfig(path=path, reinit=True)
    r1, r2, other = built(re_spec, seed=1), built(re_spec, seed=1), built(re_spec, seed=2)
    assert [w.shape for w in r1.get_weights()] == [w.shape for w in saved]
    assert weights_sha256(r1.get_weights()) == weights_sha256(r2.get_weights())  # the run's seed decides
    assert weights_sha256(r1.get_weights()) not in (weights_sha256(saved), weights_sha256(other.get_weights()))
    assert model_source(re_spec) == f"path:{path} (reinit)"


def test_bad_saved_models(tmp_path):
    junk = tmp_path / "junk.keras"
    junk.write_bytes(b"not a zip file")
    with pytest.raises(ConfigError, match=r"junk.keras' is not a loadable Keras 3 model \(ValueError: the file exists but is "
                                          r"not a .keras zip archive .*\); save one with"):
        from_file(str(junk), reinit=False)
    with pytest.raises(ConfigError, match="gone.keras': no such file on .*: put it at the same path on every host"):
        from_file(str(tmp_path / "gone.keras"), reinit=False)
    path = _save(tmp_path, input_shape=(5, 5, 2))
    m = build_model(ModelConfig(path=path), DIGITS, 10)
    with pytest.raises(ConfigError, match=r"takes inputs of shape \(None, 5, 5, 2\) but the data's samples have "
                                          r"shape \(8, 8, 1\)"):
        check_model(m, ModelConfig(path=path), DIGITS, 10)


# --------------------------------------------------------- keras.applications
@pytest.fixture(scope="module")
def applications():
    """mobilenet_v2 and resnet50 on 32x32x3, 10 classes, each built once."""
    out = {}
    for name in ("mobilenet_v2", "resnet50"):
        keras.utils.set_random_seed(3)
        out[name] = build_model(ModelConfig(name=name), (32, 32, 3), 10)
    return out


@pytest.mark.parametrize("name, params", [("mobilenet_v2", 2_270_794), ("resnet50", 23_608_202)])
def test_applications_on_small_images(applications, name, params):
    m = applications[name]
    spec = ModelConfig(name=name)
    assert num_parameters(m.get_weights()) == params
    assert check_model(m, spec, (32, 32, 3), 10) == LossSpec(SPARSE, from_logits=True)  # classifier_activation=None
    assert model_source(spec) == f"keras.applications:{name}"
    # another process rebuilds the architecture and loads the saved weights: same hash
    saved = [np.asarray(w, np.float32) for w in m.get_weights()]
    again = build_model(spec, (32, 32, 3), 10)
    again.set_weights(saved)
    assert weights_sha256([np.asarray(w, np.float32) for w in again.get_weights()]) == weights_sha256(saved)


def test_application_errors():
    with pytest.raises(ConfigError, match=r"model.name = 'resnet50' \(keras.applications.ResNet50\) cannot take the "
                                          r"data's input shape \(8, 8, 1\): Input size must be at least 32x32"):
        from_application("resnet50", DIGITS, 10)
    with pytest.raises(ConfigError, match="at least 75x75"):
        from_application("inception_v3", (32, 32, 3), 10)
    with pytest.raises(ConfigError, match="not a keras.applications model; expected one of .*resnet50.*vgg16"):
        from_application("resnet5", (32, 32, 3), 10)
    with pytest.raises(ConfigError) as e:  # tabular data (the user test): Keras's sentence ends in a period
        from_application("resnet50", (20,), 10)
    assert "input shape (20,): " in str(e.value) and ".;" not in str(e.value), str(e.value)


# ------------------------------------------------------------ output checks
@pytest.mark.parametrize("name, classes, expected", [
    ("softmax_head", 10, LossSpec(SPARSE, False)),
    ("softmax_layer_head", 10, LossSpec(SPARSE, False)),
    ("with_dropout", 2, LossSpec(SPARSE, True)),
    ("sigmoid_unit", 2, LossSpec(BINARY, False)),
    ("logit_unit", 2, LossSpec(BINARY, True)),
])
def test_loss_is_read_from_the_model(name, classes, expected):
    spec = factory(name)
    assert check_model(built(spec, classes=classes), spec, DIGITS, classes) == expected


@pytest.mark.parametrize("name, classes, message", [
    ("regression", 10, ("not supported: distbench compares classifiers: the model has 13 outputs for the data's 10 "
                        "classes")),
    ("sigmoid_unit", 10, r"output has shape \(None, 1\) but the data has 10 classes: expected \(None, 10\)"),
    ("lambda_last", 10, "cannot tell whether the model outputs logits or probabilities: its last layer 'lambda"),
    ("wrong_input", 10, r"takes inputs of shape \(None, 5, 5, 2\)"),
])
def test_models_that_are_not_the_datas_classifier(name, classes, message):
    spec = factory(name)
    with pytest.raises(ConfigError, match=message):
        check_model(built(spec, classes=classes), spec, DIGITS, classes)


def test_multi_output_and_odd_heads():
    inp = keras.Input(DIGITS)
    flat = keras.layers.Flatten()(inp)
    two = keras.Model(inp, [keras.layers.Dense(10)(flat), keras.layers.Dense(10)(flat)])
    with pytest.raises(ConfigError, match="has 2 outputs: distbench trains one classifier output"):
        check_model(two, ModelConfig(), DIGITS, 10)
    sig = keras.Sequential([inp, keras.layers.Flatten(), keras.layers.Dense(10, activation="sigmoid")])
    with pytest.raises(ConfigError, match="sigmoid on 10 units is a multi-label head"):
        check_model(sig, ModelConfig(), DIGITS, 10)
    relu = keras.Sequential([inp, keras.layers.Flatten(), keras.layers.Dense(10, activation="relu")])
    with pytest.raises(ConfigError, match="last layer has activation 'relu': expected linear"):
        check_model(relu, ModelConfig(), DIGITS, 10)
    one = keras.Sequential([inp, keras.layers.Flatten(), keras.layers.Dense(1, activation="softmax")])
    with pytest.raises(ConfigError, match="ends in softmax over 1 unit"):
        check_model(one, ModelConfig(), DIGITS, 2)
    conv = keras.Sequential([inp, keras.layers.Conv2D(10, 1)])
    with pytest.raises(ConfigError, match=r"output has shape \(None, 8, 8, 10\), expected \(None, 10\)"):
        check_model(conv, ModelConfig(), DIGITS, 10)
    logsm = keras.Sequential([inp, keras.layers.Flatten(), keras.layers.Dense(10, activation="log_softmax")])
    assert check_model(logsm, ModelConfig(), DIGITS, 10) == LossSpec(SPARSE, True)  # log-probabilities are logits
