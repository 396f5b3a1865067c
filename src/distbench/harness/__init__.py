"""The harness: expand the experiment, run each configuration isolated, evaluate, record."""
