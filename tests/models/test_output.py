"""LossSpec: saved and read back; labels the loss can take."""

from __future__ import annotations

import numpy as np
import pytest

from distbench.config import ConfigError
from distbench.models.output import BINARY, SPARSE, LossSpec, check_labels


def test_round_trip_and_the_default_of_older_workloads():
    spec = LossSpec(BINARY, from_logits=False)
    assert LossSpec.from_dict(spec.to_dict()) == spec and spec.output == "probabilities"
    assert LossSpec.from_dict(None) == LossSpec(SPARSE, True)  # what every workload trained with before
    with pytest.raises(ConfigError, match="workload loss 'mse': expected sparse_categorical_crossentropy"):
        LossSpec.from_dict({"loss": "mse"})


def test_labels_must_be_class_indices():
    check_labels(np.array([0, 1, 2], np.int32), "x")
    with pytest.raises(ConfigError, match="not supported: distbench compares classifiers: the labels of dataset 'r' "
                                          "have dtype float32 .regression targets..; labels must be integer"):
        check_labels(np.array([0.5, 1.5], np.float32), "dataset 'r'")
    with pytest.raises(ConfigError, match=r"have shape \(2, 3\): expected integer class indices of shape \(n,\)"):
        check_labels(np.zeros((2, 3), np.int32), "x")
