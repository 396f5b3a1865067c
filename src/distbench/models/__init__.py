"""Models built from ``[model]`` (:class:`distbench.config.ModelConfig`).

Sources: the built-in ``mlp`` and ``cnn`` (class logits), keras.applications models
(``name = "resnet50"``...), the user's factory function (``factory``) or saved model
(``path``), see :mod:`distbench.models.sources`. Every model maps a batch of images
``(batch, H, W, C)`` to ``(batch, num_classes)`` scores (or ``(batch, 1)`` for 2
classes), logits or probabilities (:mod:`distbench.models.output`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distbench.config import APPLICATIONS, MODELS, ConfigError, ModelConfig
from distbench.models.output import LossSpec, loss_spec

MODEL_DESCRIPTIONS = {
    "mlp": "Flatten -> Dense(hidden...) -> Dense(classes); small, communication-bound",
    "cnn": "[Conv2D 3x3 + MaxPool 2x2] x len(filters) -> Flatten -> Dense(hidden...) -> Dense(classes)",
    "<application>": "keras.applications, weights=None, logits: " + ", ".join(APPLICATIONS),
    "factory = \"m:f\"": "your function (input_shape, num_classes) -> keras.Model",
    "path = \"x.keras\"": "your saved Keras 3 model (its weights, or reinit = true)",
}


def model_source(spec: ModelConfig) -> str:
    """Where the model comes from, as recorded: ``mlp``, ``cnn``,
    ``keras.applications:resnet50``, ``factory:pkg.mod:build`` or ``path:/abs/model.keras``."""
    if spec.factory:
        return f"factory:{spec.factory}"
    if spec.path:
        return f"path:{spec.path}" + (" (reinit)" if spec.reinit else "")
    if spec.name in APPLICATIONS:
        return f"keras.applications:{spec.name}"
    return spec.name


def build_model(spec: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> Any:
    """Build an uncompiled Keras 3 model from ``spec``, whatever its source.

    Every process of a run calls this with the same arguments and then loads the
    workload's initial weights, so it must build the same architecture everywhere.

    Args:
        spec: model spec (``factory``, ``path``, or ``name`` with its settings).
        input_shape: one sample's shape, ``(H, W, C)``.
        num_classes: number of classes.

    Returns:
        A built Keras model whose weights are initialised from Keras' global seed (call
        ``keras.utils.set_random_seed`` first for reproducible weights), or for ``path``
        without ``reinit`` the file's weights.

    Raises:
        ConfigError: the source cannot give a model (see :mod:`distbench.models.sources`),
            or ``cnn`` for samples that are not images ``(H, W, C)``.
        ValueError: unknown built-in model name.
    """
    from distbench.models import sources

    if spec.factory:
        return _built(sources.from_factory(spec.factory, input_shape, num_classes, spec.factory_dir), input_shape, spec)
    if spec.path:
        return _built(sources.from_file(spec.path, spec.reinit), input_shape, spec)
    if spec.name in APPLICATIONS:
        return sources.from_application(spec.name, input_shape, num_classes)
    return _builtin(spec, input_shape, num_classes)


def _built(model: Any, input_shape: tuple[int, ...], spec: ModelConfig) -> Any:
    """Create the weights of a model that has none yet (a subclassed model creates them
    on its first call) by calling it on one zero sample.

    Raises:
        ConfigError: the call fails (the model cannot take the data's samples).
    """
    if not model.weights:
        try:
            model(np.zeros((1, *input_shape), np.float32), training=False)
        except Exception as e:  # noqa: BLE001 - the user's model
            raise ConfigError(f"model {model_source(spec)!r} cannot take one sample of the data's shape "
                              f"{tuple(input_shape)}: {type(e).__name__}: {' '.join(str(e).split())[:300]}") from None
    return model


def check_model(model: Any, spec: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> LossSpec:
    """Check that ``model`` fits the data and read its loss (once, when the workload is made).

    Checks the declared input shape (dimensions left open, ``None``, match anything),
    runs the model on 2 zero samples, and reads the loss from the output's shape and the
    last layer's activation (:func:`distbench.models.output.loss_spec`).

    Raises:
        ConfigError: several inputs or outputs, an input shape other than the data's, a
            model that fails on the data's samples or has no trainable weights, or an
            output that is not a classifier's (see :func:`~distbench.models.output.loss_spec`).
    """
    source = model_source(spec)
    inputs = getattr(model, "inputs", None) or []
    if len(inputs) > 1:
        raise ConfigError(f"model {source!r} has {len(inputs)} inputs, expected 1: distbench feeds each step one "
                          f"batch of the data's samples (shape {tuple(input_shape)}); build a model with one Input "
                          "(e.g. concatenate the features into one array in the data file)")
    if inputs:
        declared = tuple(inputs[0].shape[1:])
        if len(declared) != len(input_shape) or any(d is not None and d != s for d, s in zip(declared, input_shape)):
            shape = tuple(input_shape)
            raise ConfigError(f"model {source!r} takes inputs of shape {(None, *declared)} but the data's samples "
                              f"have shape {shape}: build (or save) it for input_shape={shape}")
    try:
        out = model(np.zeros((2, *input_shape), np.float32), training=False)
    except Exception as e:  # noqa: BLE001 - the user's model
        raise ConfigError(f"model {source!r} cannot take samples of the data's shape {tuple(input_shape)}: "
                          f"{type(e).__name__}: {' '.join(str(e).split())[:300]}") from None
    if isinstance(out, (list, tuple, dict)):
        raise ConfigError(f"model {source!r} has {len(out)} outputs: distbench trains one classifier output")
    if not model.trainable_weights:
        raise ConfigError(f"model {source!r} has no trainable weights: nothing to train")
    return loss_spec(model, tuple(out.shape), num_classes)


def _builtin(spec: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> Any:
    """The built-in ``mlp`` or ``cnn`` (a ``keras.Sequential``, class logits)."""
    import keras

    if spec.name == "cnn" and len(input_shape) != 3:
        raise ConfigError(f"model.name = \"cnn\" needs image samples of shape (H, W, C), but the data's samples have "
                          f"shape {tuple(input_shape)}: use model.name = \"mlp\" for tabular data, or give an image "
                          "shape with data.feature_shape, e.g. [8, 8, 1]")
    layers: list[Any] = [keras.Input(shape=input_shape)]
    if spec.name == "cnn":
        h, w = input_shape[0], input_shape[1]
        for f in spec.filters:
            layers.append(keras.layers.Conv2D(f, 3, padding="same", activation=spec.activation))
            if h >= 2 and w >= 2:
                layers.append(keras.layers.MaxPooling2D(2))
                h, w = h // 2, w // 2
    elif spec.name != "mlp":
        raise ValueError(f"unknown model {spec.name!r}; expected one of {', '.join(MODELS)}")
    layers.append(keras.layers.Flatten())
    for units in spec.hidden:
        layers.append(keras.layers.Dense(units, activation=spec.activation))
        if spec.dropout > 0:
            layers.append(keras.layers.Dropout(spec.dropout))
    layers.append(keras.layers.Dense(num_classes))
    return keras.Sequential(layers, name=f"distbench_{spec.name}")


def num_parameters(weights: list[Any]) -> int:
    """Total number of scalars in a list of weight arrays."""
    return int(sum(int(w.size) for w in weights))
