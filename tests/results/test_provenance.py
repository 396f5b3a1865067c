"""Provenance names the kernel settings every configuration's processes inherit."""

from __future__ import annotations

from distbench.results import provenance
from distbench.results.report import provenance_lines


def test_kernel_settings_are_recorded_and_reported(monkeypatch):
    for k in provenance.KERNEL_ENV:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
    prov = provenance.collect(seed=1)
    assert prov["kernel_env"]["TF_ENABLE_ONEDNN_OPTS"] == "0"
    assert prov["kernel_env"]["OMP_NUM_THREADS"] is None
    assert ("kernel settings", "TF_ENABLE_ONEDNN_OPTS=0") in provenance_lines(prov)


def test_defaults_are_named_as_such_and_old_records_add_no_line(monkeypatch):
    for k in provenance.KERNEL_ENV:
        monkeypatch.delenv(k, raising=False)
    labels = dict(provenance_lines(provenance.collect()))
    assert labels["kernel settings"].startswith("TensorFlow's defaults")
    old = {k: v for k, v in provenance.collect().items() if k != "kernel_env"}
    assert "kernel settings" not in dict(provenance_lines(old))
