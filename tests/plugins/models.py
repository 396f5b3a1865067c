"""Model factories for the tests: ``[model] factory = "tests.plugins.models:<name>"``."""

from __future__ import annotations

from typing import Any


def with_dropout(input_shape: tuple[int, ...], num_classes: int) -> Any:
    """A small functional MLP with Dropout, class logits."""
    import keras

    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(32, activation="relu")(x)
    x = keras.layers.Dropout(0.3)(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x))


def with_batchnorm(input_shape: tuple[int, ...], num_classes: int) -> Any:
    """Dense, BatchNormalization, ReLU, class logits (non-trainable moving statistics)."""
    import keras

    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Flatten(),
                             keras.layers.Dense(32, use_bias=False), keras.layers.BatchNormalization(),
                             keras.layers.Activation("relu"), keras.layers.Dense(num_classes)])


def softmax_head(input_shape: tuple[int, ...], num_classes: int) -> Any:
    """Class probabilities (softmax on the last Dense layer)."""
    import keras

    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Flatten(),
                             keras.layers.Dense(16, activation="relu"),
                             keras.layers.Dense(num_classes, activation="softmax")])


def softmax_layer_head(input_shape: tuple[int, ...], num_classes: int) -> Any:
    """Class probabilities from a separate Softmax layer."""
    import keras

    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Flatten(),
                             keras.layers.Dense(num_classes), keras.layers.Softmax()])


def sigmoid_unit(input_shape: tuple[int, ...], num_classes: int) -> Any:
    """One sigmoid unit: a binary classifier's probability."""
    import keras

    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Flatten(),
                             keras.layers.Dense(1, activation="sigmoid")])


def logit_unit(input_shape: tuple[int, ...], num_classes: int) -> Any:
    """One linear unit: a binary classifier's logit."""
    import keras

    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Flatten(), keras.layers.Dense(1)])


def regression(input_shape: tuple[int, ...], num_classes: int) -> Any:
    """More outputs than classes (a regression head)."""
    import keras

    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Flatten(),
                             keras.layers.Dense(num_classes + 3)])


def lambda_last(input_shape: tuple[int, ...], num_classes: int) -> Any:
    """Ends in a Lambda layer: logits or probabilities cannot be read from it."""
    import keras

    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Flatten(),
                             keras.layers.Dense(num_classes), keras.layers.Lambda(lambda t: t * 2.0)])


def wrong_input(input_shape: tuple[int, ...], num_classes: int) -> Any:
    """Built for another sample shape than the one it is given."""
    import keras

    return keras.Sequential([keras.Input(shape=(5, 5, 2)), keras.layers.Flatten(), keras.layers.Dense(num_classes)])


class Subclassed:
    """Holds a subclassed keras.Model factory (its weights exist only after a first call)."""

    @staticmethod
    def build(input_shape: tuple[int, ...], num_classes: int) -> Any:
        """A subclassed model: Flatten, Dense(16, relu), Dense(classes, softmax)."""
        import keras

        class Net(keras.Model):
            def __init__(self) -> None:
                super().__init__()
                self.flat = keras.layers.Flatten()
                self.hidden = keras.layers.Dense(16, activation="relu")
                self.out = keras.layers.Dense(num_classes, activation="softmax")

            def call(self, x: Any) -> Any:
                return self.out(self.hidden(self.flat(x)))

        return Net()


def raises(input_shape: tuple[int, ...], num_classes: int) -> Any:
    """Raises, as a buggy factory would."""
    raise RuntimeError(f"cannot build for {num_classes} classes")


def not_a_model(input_shape: tuple[int, ...], num_classes: int) -> Any:
    """Returns a list of layers instead of a model."""
    import keras

    return [keras.layers.Dense(num_classes)]


NOT_CALLABLE = 3


def two_inputs(input_shape: tuple[int, ...], num_classes: int) -> Any:
    """A model with two inputs (distbench feeds one batch): refused."""
    import keras

    a, b = keras.Input(shape=input_shape), keras.Input(shape=input_shape)
    x = keras.layers.Concatenate()([keras.layers.Flatten()(a), keras.layers.Flatten()(b)])
    return keras.Model([a, b], keras.layers.Dense(num_classes)(x))
