"""Model spec -> Keras model."""

from __future__ import annotations

import re

import numpy as np
import pytest

from distbench.config import ConfigError, ModelConfig
from distbench.models import build_model, num_parameters


def test_mlp_shapes_and_params():
    m = build_model(ModelConfig(name="mlp", hidden=[32, 16]), (8, 8, 1), 10)
    assert m.output_shape == (None, 10)
    # 64*32+32 + 32*16+16 + 16*10+10
    assert num_parameters(m.get_weights()) == 64 * 32 + 32 + 32 * 16 + 16 + 16 * 10 + 10


def test_cnn_shapes():
    m = build_model(ModelConfig(name="cnn", filters=[4, 8], hidden=[16]), (8, 8, 1), 3)
    out = np.asarray(m(np.zeros((2, 8, 8, 1), np.float32)))
    assert out.shape == (2, 3)
    # conv 3*3*1*4+4, conv 3*3*4*8+8, dense (2*2*8)*16+16, head 16*3+3
    assert num_parameters(m.get_weights()) == 40 + 296 + 32 * 16 + 16 + 51


@pytest.mark.parametrize("shape", [(30,), (5, 2)])
def test_cnn_refuses_samples_that_are_not_images(shape):
    # the user test: breast_cancer (30 features) with model.name = "cnn" ended in a Keras traceback
    with pytest.raises(ConfigError, match=r"needs image samples of shape \(H, W, C\), but the data's samples have "
                                          rf"shape {re.escape(str(shape))}: use model.name = \"mlp\""):
        build_model(ModelConfig(name="cnn"), shape, 2)


def test_dropout_layer_present():
    m = build_model(ModelConfig(name="mlp", hidden=[8], dropout=0.5), (4, 4, 1), 2)
    assert any(type(layer).__name__ == "Dropout" for layer in m.layers)
