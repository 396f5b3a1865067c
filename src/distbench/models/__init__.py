"""Model zoo built from a small spec (:class:`distbench.config.ModelConfig`).

Every model maps a batch of images ``(batch, H, W, C)`` to class logits
``(batch, num_classes)`` (no softmax: the loss uses ``from_logits=True``).
"""

from __future__ import annotations

from typing import Any

from distbench.config import ModelConfig

MODEL_DESCRIPTIONS = {
    "mlp": "Flatten -> Dense(hidden...) -> Dense(classes); small, communication-bound",
    "cnn": "[Conv2D 3x3 + MaxPool 2x2] x len(filters) -> Flatten -> Dense(hidden...) -> Dense(classes)",
}


def build_model(spec: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> Any:
    """Build an uncompiled Keras 3 model from ``spec``.

    Args:
        spec: model spec (name, hidden widths, filters, activation, dropout).
        input_shape: one sample's shape, ``(H, W, C)``.
        num_classes: number of output logits.

    Returns:
        A built ``keras.Sequential`` whose weights are initialised from Keras' global
        seed (call ``keras.utils.set_random_seed`` first for reproducible weights).

    Raises:
        ValueError: unknown model name, or a CNN whose pooling would shrink the image
            below 1x1.
    """
    import keras

    layers: list[Any] = [keras.Input(shape=input_shape)]
    if spec.name == "cnn":
        h, w = input_shape[0], input_shape[1]
        for f in spec.filters:
            layers.append(keras.layers.Conv2D(f, 3, padding="same", activation=spec.activation))
            if h >= 2 and w >= 2:
                layers.append(keras.layers.MaxPooling2D(2))
                h, w = h // 2, w // 2
    elif spec.name != "mlp":
        raise ValueError(f"unknown model {spec.name!r}; expected one of {', '.join(MODEL_DESCRIPTIONS)}")
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
