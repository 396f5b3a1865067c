"""An example model factory for ``[model] factory = "examples.my_model:build"``.

distbench calls ``build(input_shape, num_classes)`` in every process of a run (the
parent that saves the initial weights, every replica, rank and Spark task) and loads the
run's initial weights into what it returns, so the function must build the same
architecture every time; the weights it draws are used only once, seeded by the run.

Works on the 8x8x1 digits and on 32x32x3 images (it pools only while the feature map is
at least 16 pixels wide).
"""

from __future__ import annotations

from typing import Any


def build(input_shape: tuple[int, ...], num_classes: int) -> Any:
    """A small convolutional classifier: 2 x [Conv2D 3x3, BatchNormalization, ReLU],
    then Flatten, Dropout and a Dense layer of class logits.

    The BatchNormalization layers are ``synchronized=True``: under the synchronous
    strategies (mirrored, multi_worker_mirrored, horovod, horovod_mpi) their training-batch
    mean and variance are computed over the global batch, as ``single`` computes them,
    instead of over each replica's share of it (README, "Your own model").

    Args:
        input_shape: one sample's shape ``(H, W, C)``.
        num_classes: number of classes (one logit each; the last layer has no
            activation, so distbench trains it with ``from_logits=True``).

    Returns:
        An uncompiled ``keras.Model``.
    """
    import keras

    inputs = keras.Input(shape=input_shape)
    x = inputs
    for filters in (16, 32):
        x = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
        x = keras.layers.BatchNormalization(synchronized=True)(x)
        x = keras.layers.Activation("relu")(x)
        if x.shape[1] >= 16 and x.shape[2] >= 16:
            x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dropout(0.2)(x)
    outputs = keras.layers.Dense(num_classes)(x)
    return keras.Model(inputs, outputs, name="my_model")
