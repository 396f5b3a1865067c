"""The ``[model]`` section: a built-in model, a keras.applications model, the user's factory
or a saved ``.keras`` file, and their checks."""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from distbench.contracts import ConfigError
from distbench.config.values import choice

MODELS = ("mlp", "cnn")
# model.name -> keras.applications constructor (built with weights=None, logits output).
# model.name -> keras.applications constructor (built with weights=None, logits output).
APPLICATIONS = {
    "convnext_tiny": "ConvNeXtTiny", "convnext_small": "ConvNeXtSmall", "convnext_base": "ConvNeXtBase",
    "convnext_large": "ConvNeXtLarge", "convnext_xlarge": "ConvNeXtXLarge",
    "densenet121": "DenseNet121", "densenet169": "DenseNet169", "densenet201": "DenseNet201",
    **{f"efficientnet_b{i}": f"EfficientNetB{i}" for i in range(8)},
    **{f"efficientnet_v2_{k.lower()}": f"EfficientNetV2{k}" for k in ("B0", "B1", "B2", "B3", "S", "M", "L")},
    "inception_resnet_v2": "InceptionResNetV2", "inception_v3": "InceptionV3",
    "mobilenet": "MobileNet", "mobilenet_v2": "MobileNetV2",
    "mobilenet_v3_small": "MobileNetV3Small", "mobilenet_v3_large": "MobileNetV3Large",
    "nasnet_mobile": "NASNetMobile", "nasnet_large": "NASNetLarge",
    "resnet50": "ResNet50", "resnet101": "ResNet101", "resnet152": "ResNet152",
    "resnet50_v2": "ResNet50V2", "resnet101_v2": "ResNet101V2", "resnet152_v2": "ResNet152V2",
    "vgg16": "VGG16", "vgg19": "VGG19", "xception": "Xception",
}
FACTORY_FORM = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
ACTIVATIONS = ("relu", "tanh", "sigmoid", "elu", "selu", "gelu", "silu", "swish", "softplus", "leaky_relu",
               "relu6", "linear")


@dataclass
class ModelConfig:
    """Model spec (see :mod:`distbench.models`): one of three sources.

    Attributes:
        name: ``mlp`` (Dense layers), ``cnn`` (Conv2D blocks + Dense), or a
            keras.applications model (:data:`APPLICATIONS`: ``resnet50``, ``mobilenet_v2``...,
            built with ``weights=None`` and a logits output).
        hidden: Dense layer widths (units) for ``mlp``; also the head of ``cnn``.
        filters: Conv2D filter counts for ``cnn`` (one 3x3 conv + 2x2 max-pool each).
        activation: hidden activation (a Keras activation name).
        dropout: dropout rate after each hidden Dense layer, in [0, 1).
        factory: ``"package.module:function"``: the user's function
            ``(input_shape, num_classes) -> keras.Model`` (uncompiled); replaces ``name``.
        factory_dir: the folder ``factory``'s top package or module is imported from
            (put on ``sys.path`` by every process). Found when the config is validated (on
            the import path, then in the current directory) and recorded absolute, so that
            ``--resume``, ``predict``, ``advise --target`` and the printed commands import it
            from any folder; empty for an installed package or where it is not found (the
            import error then says how to fix it); set it to import from another folder.
        path: a saved Keras 3 model (``.keras``) whose architecture and weights are the
            initial ones; replaces ``name``. Made absolute when the config is validated.
        reinit: with ``path``: re-run the architecture's initializers with the run's seed
            instead of using the file's weights.
    """

    name: str = "mlp"
    hidden: list[int] = field(default_factory=lambda: [64])
    filters: list[int] = field(default_factory=lambda: [16, 32])
    activation: str = "relu"
    dropout: float = 0.0
    factory: str = ""
    factory_dir: str = ""
    path: str = ""
    reinit: bool = False


def check_model(m: ModelConfig) -> None:
    """``[model]``: its source, widths, filters, activation and dropout."""
    check_model_source(m)
    if not m.hidden or any(h < 1 for h in m.hidden):
        raise ConfigError(f"model.hidden = {m.hidden!r}: expected a non-empty list of widths >= 1")
    if any(f < 1 for f in m.filters) or (m.name == "cnn" and not m.filters):
        raise ConfigError(f"model.filters = {m.filters!r}: expected a non-empty list of counts >= 1")
    choice("model.activation", m.activation, ACTIVATIONS)
    if not 0.0 <= m.dropout < 1.0:
        raise ConfigError(f"model.dropout = {m.dropout!r}: must be in [0, 1)")


def check_model_source(m: ModelConfig) -> None:
    """Check ``[model]``'s source keys (``name`` | ``factory`` | ``path``); make ``path`` absolute.

    Raises:
        ConfigError: unknown name, two sources, a factory not of the form
            ``module:function``, a path that is not an existing ``.keras`` file, or
            ``reinit`` without ``path``.
    """
    if m.name not in MODELS and m.name not in APPLICATIONS:
        close = difflib.get_close_matches(m.name, [*MODELS, *APPLICATIONS], 1, 0.75)  # helper-36: none said
        raise ConfigError(f"model.name = {m.name!r}: " + (f"did you mean {close[0]!r}? " if close else "")
                          + "expected mlp, cnn or a keras.applications model: " + ", ".join(APPLICATIONS)
                          + " (or set model.factory / model.path for your own model)")
    if m.factory and m.path:
        raise ConfigError(f"model.factory = {m.factory!r} and model.path = {m.path!r} are both set: "
                          "choose one source for the model")
    if (m.factory or m.path) and m.name != "mlp":
        key = "factory" if m.factory else "path"
        raise ConfigError(f"model.name = {m.name!r} and model.{key} are both set: remove model.name "
                          f"(model.{key} replaces it)")
    if m.factory and not FACTORY_FORM.fullmatch(m.factory):
        raise ConfigError(f"model.factory = {m.factory!r}: expected 'package.module:function', "
                          "e.g. \"examples.my_model:build\"")
    if m.factory_dir and not m.factory:
        raise ConfigError(f"model.factory_dir = {m.factory_dir!r} without model.factory: set model.factory "
                          "(\"package.module:function\") or remove model.factory_dir")
    if m.factory and not m.factory_dir:
        m.factory_dir = factory_dir(m.factory)
    elif m.factory_dir:  # a recorded folder missing on this host is left to the import's error (a cluster's
        m.factory_dir = str(Path(m.factory_dir).expanduser().absolute())  # hosts may install it instead)
    if m.reinit and not m.path:
        raise ConfigError("model.reinit = true needs model.path (a saved .keras model to re-initialise)")
    if m.path:
        p = Path(m.path).expanduser()
        if p.suffix != ".keras":
            raise ConfigError(f"model.path = {m.path!r}: expected a Keras 3 '.keras' file "
                              "(save one with model.save(\"model.keras\"))")
        if not p.is_file():  # helper-36: the folder a relative path was read from was not said
            raise ConfigError(f"model.path = {m.path!r}: no such file" + ("" if p.is_absolute() else
                              f" (relative paths are read from the directory distbench runs in, {os.getcwd()})"))
        m.path = str(p.resolve())


def factory_dir(factory: str) -> str:
    """The absolute folder that ``factory``'s top package or module is found in, on
    ``sys.path`` and then in the current directory (as
    :func:`distbench.models.sources.import_factory` looks), found without importing it; ''
    where it is not found or is installed (under ``site-packages``/``dist-packages``)."""
    import importlib.machinery
    import sys

    top = factory.partition(":")[0].split(".")[0]
    try:
        spec = importlib.machinery.PathFinder.find_spec(top, [*sys.path, os.getcwd()])
    except (ImportError, ValueError):
        return ""
    if spec is None:
        return ""
    if spec.origin and os.path.isabs(spec.origin):
        where = Path(spec.origin).parent
        where = where.parent if spec.submodule_search_locations is not None else where  # a package's __init__.py
    elif spec.submodule_search_locations:  # a namespace package: its first folder
        where = Path(list(spec.submodule_search_locations)[0]).parent
    else:
        return ""
    if {"site-packages", "dist-packages"} & set(where.parts):
        return ""
    return str(where.absolute())
