"""The TPU probe's reasons without a TPU engine: whole sentences, bounded."""

from __future__ import annotations

from distbench.strategies import tpu


class _CP:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def test_probe_reasons_are_clipped_at_sentence_ends(monkeypatch):
    trace = "Traceback (most recent call last):\n  File x\nImportError: libtpu.so: cannot open shared object file\n"
    monkeypatch.setattr(tpu.subprocess, "run", lambda *a, **k: _CP(1, "", "noise " * 200 + "\n" + trace))
    assert tpu.probe_tpu().reason == ("TPU probe crashed (exit 1): ImportError: libtpu.so: cannot open shared "
                                      "object file")
    long = "NO ValueError: Please provide a TPU Name to connect to. " + "It may also be set by TPU_NAME. " * 30
    monkeypatch.setattr(tpu.subprocess, "run", lambda *a, **k: _CP(0, long, ""))
    reason = tpu.probe_tpu().reason
    assert reason.startswith("no TPU found: TPUClusterResolver: ValueError: Please provide a TPU Name to connect to.")
    assert len(reason) <= 500 and reason.endswith("set by TPU_NAME. [...]")
