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


def test_without_any_sign_of_a_tpu_the_probe_is_not_run(monkeypatch, tmp_path):
    from distbench import config

    for v in tpu.TPU_ENV:
        monkeypatch.delenv(v, raising=False)
    (tmp_path / "dev" / "vfio").mkdir(parents=True)
    (tmp_path / "dev" / "vfio" / "vfio").write_text("")  # the control node alone is no device
    assert tpu.tpu_signs(str(tmp_path)) == []
    (tmp_path / "dev" / "accel0").write_text("")
    assert tpu.tpu_signs(str(tmp_path)) == [str(tmp_path / "dev" / "accel0")]
    monkeypatch.setenv("TPU_NAME", "my-tpu")
    assert tpu.tpu_signs(str(tmp_path))[0] == "TPU_NAME"

    calls = []
    monkeypatch.setattr(tpu.subprocess, "run", lambda *a, **k: calls.append(a) or _CP(0, "OK grpc://x", ""))
    monkeypatch.setattr(tpu, "tpu_signs", lambda root="/": [])
    a = tpu.TPU().is_available(config.load(None), 2)
    assert not a.ok and calls == [] and "TPUClusterResolver has nothing to connect to" in a.reason
    monkeypatch.setattr(tpu, "tpu_signs", lambda root="/": ["TPU_NAME"])
    assert tpu.TPU().is_available(config.load(None), 2).ok and len(calls) == 1
