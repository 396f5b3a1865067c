"""distbench: train the same Keras model under every major way of distributing training
and compare them with honest numbers."""

__version__ = "0.1.0"
