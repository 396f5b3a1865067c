"""What a model's output means, and the one loss every process trains with.

distbench compares classifiers. A model maps a batch ``(batch, H, W, C)`` to either

- ``(batch, num_classes)`` class scores: sparse categorical cross-entropy, or
- ``(batch, 1)`` for a 2-class problem: one score, binary cross-entropy,

and its last layer says whether those scores are **logits** (``linear``, or
``log_softmax``) or **probabilities** (``softmax``, or ``sigmoid`` for one unit). That is
read once from the model (:func:`loss_spec`) when the workload is created, saved in the
workload as a :class:`LossSpec`, and every process builds its loss from it
(:meth:`LossSpec.make`); the evaluator computes the same quantities in NumPy.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from distbench.config import ConfigError

SPARSE = "sparse_categorical_crossentropy"
BINARY = "binary_crossentropy"
LOGIT_ACTIVATIONS = ("linear", "log_softmax")
PROBABILITY_ACTIVATIONS = ("softmax", "sigmoid")
NOT_A_CLASSIFIER = "not supported: distbench compares classifiers"


@dataclass(frozen=True)
class LossSpec:
    """The loss of a workload: which cross-entropy, on logits or on probabilities.

    Attributes:
        loss: :data:`SPARSE` (labels are class indices, one score per class) or
            :data:`BINARY` (one output unit, 2 classes).
        from_logits: the model outputs logits (True) or probabilities (False).
    """

    loss: str = SPARSE
    from_logits: bool = True

    @property
    def output(self) -> str:
        """``"logits"`` or ``"probabilities"``."""
        return "logits" if self.from_logits else "probabilities"

    def make(self, reduction: str | None = None) -> Any:
        """Build the Keras loss: called with int labels ``(batch,)`` and the model's output.

        Args:
            reduction: Keras reduction; ``None`` gives one loss per sample ``(batch,)``,
                ``"sum_over_batch_size"`` their mean.

        Returns:
            A ``keras.losses.SparseCategoricalCrossentropy`` or ``BinaryCrossentropy``.
        """
        import keras

        if self.loss == BINARY:
            return keras.losses.BinaryCrossentropy(from_logits=self.from_logits, reduction=reduction)
        return keras.losses.SparseCategoricalCrossentropy(from_logits=self.from_logits, reduction=reduction)

    def to_dict(self) -> dict[str, Any]:
        """The spec as a JSON-able dict (saved in ``workload.json``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None) -> LossSpec:
        """The spec saved by :meth:`to_dict`; ``None`` (a workload saved before losses
        were recorded) is the sparse categorical cross-entropy on logits it trained with.

        Raises:
            ConfigError: an unknown loss name.
        """
        if raw is None:
            return cls()
        if raw.get("loss") not in (SPARSE, BINARY):
            raise ConfigError(f"workload loss {raw.get('loss')!r}: expected {SPARSE} or {BINARY}")
        return cls(str(raw["loss"]), bool(raw.get("from_logits", True)))


def output_layer(model: Any) -> Any:
    """The layer that produces ``model``'s output (descending into nested models).

    A functional or Sequential model knows it from its graph; a subclassed model does
    not, and its last layer (in attribute order) is taken.
    """
    import keras

    try:
        outputs = model.outputs
    except AttributeError:  # a subclassed model has no graph
        outputs = None
    layer = outputs[0]._keras_history.operation if outputs else (model.layers[-1] if model.layers else None)
    if isinstance(layer, keras.Model) and layer is not model:
        return output_layer(layer)
    return layer


def output_activation(model: Any) -> str:
    """Name of the activation of the layer producing ``model``'s output (``linear``,
    ``softmax``, ``sigmoid``...).

    Raises:
        ConfigError: the output layer has no activation distbench can read (e.g. a
            Lambda, Reshape or Add layer last).
    """
    import keras

    layer = output_layer(model)
    if isinstance(layer, keras.layers.Softmax):
        return "softmax"
    fn = getattr(layer, "activation", None)
    name = getattr(fn, "__name__", None)
    if layer is None or not isinstance(name, str):
        kind = "no layers" if layer is None else f"its last layer {layer.name!r} ({type(layer).__name__})"
        raise ConfigError(f"cannot tell whether the model outputs logits or probabilities: {kind} has no activation; "
                          "end the model with a Dense (or Activation / Softmax) layer whose activation is "
                          "linear (logits), softmax or sigmoid")
    return name


def loss_spec(model: Any, output_shape: tuple[Any, ...], num_classes: int) -> LossSpec:
    """Read the loss from a model's output shape and its last layer's activation.

    Args:
        model: the built Keras model.
        output_shape: the model's output shape for a batch, e.g. ``(2, 10)``.
        num_classes: the data's number of classes.

    Returns:
        :data:`SPARSE` for ``(batch, num_classes)``; :data:`BINARY` for ``(batch, 1)`` on
        2 classes; ``from_logits`` from the activation (linear/log_softmax: logits;
        softmax/sigmoid: probabilities).

    Raises:
        ConfigError: a regression or multi-label head (more outputs than classes, sigmoid
            on several units), an output of another shape, an activation that is neither
            logits nor probabilities, or softmax on one unit.
    """
    shape = tuple(output_shape)
    expected = f"(None, {num_classes})" + (" or (None, 1)" if num_classes == 2 else "")
    if len(shape) != 2:
        raise ConfigError(f"the model's output has shape {_none(shape)}, expected {expected} "
                          f"(one score per class for the data's {num_classes} classes)")
    units = shape[1]
    if units not in (num_classes, 1) or (units == 1 and num_classes != 2):
        if units > num_classes:
            raise ConfigError(f"{NOT_A_CLASSIFIER}: the model has {units} outputs for the data's {num_classes} "
                              f"classes (regression or multi-output heads are not compared); expected {expected}")
        raise ConfigError(f"the model's output has shape {_none(shape)} but the data has {num_classes} classes: "
                          f"expected {expected}; build the last layer with num_classes units")
    act = output_activation(model)
    if act not in LOGIT_ACTIVATIONS + PROBABILITY_ACTIVATIONS:
        raise ConfigError(f"the model's last layer has activation {act!r}: expected linear (logits), softmax or "
                          "sigmoid (probabilities); use activation=None on the last Dense layer to output logits")
    if units == 1:
        if act in ("softmax", "log_softmax"):
            raise ConfigError(f"the model ends in {act} over 1 unit (always 1): for 2 classes use one unit with "
                              "sigmoid or no activation, or 2 units with softmax")
        return LossSpec(BINARY, from_logits=act == "linear")
    if act == "sigmoid":
        raise ConfigError(f"{NOT_A_CLASSIFIER} with one class per sample here: sigmoid on {units} units is a "
                          "multi-label head; use softmax or no activation (logits) on the last layer")
    return LossSpec(SPARSE, from_logits=act in LOGIT_ACTIVATIONS)


def _none(shape: tuple[Any, ...]) -> str:
    """``(2, 10)`` -> ``(None, 10)``: a shape with its batch dimension left open."""
    return str((None, *shape[1:])) if shape else str(shape)


def check_labels(y: np.ndarray, source: str) -> None:
    """Labels must be int class indices of shape ``(n,)`` (what the loss and the evaluator assume).

    Raises:
        ConfigError: float targets (regression) or labels of another shape.
    """
    if not np.issubdtype(y.dtype, np.integer):
        raise ConfigError(f"{NOT_A_CLASSIFIER}: the labels of {source} have dtype {y.dtype} (regression "
                          "targets?); labels must be integer class indices 0..C-1")
    if y.ndim != 1:
        raise ConfigError(f"the labels of {source} have shape {y.shape}: expected integer class indices of "
                          "shape (n,) (not one-hot, not multi-label)")
