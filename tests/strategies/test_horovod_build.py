"""Horovod against the installed TensorFlow, without touching the real install: fake
virtualenvs whose package metadata says which TensorFlow is installed and which one
Horovod was built against (``horovod/metadata.json``), for ``scripts/build_horovod.sh
--check``, ``make setup`` (dry run), the probe, its on-disk cache and ``distbench env``."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distbench import env as env_mod
from distbench.strategies import horovod as H
from tests.conftest import ROOT, requires

SCRIPT = ROOT / "scripts" / "build_horovod.sh"


def fake_site(site: Path, tensorflow: str | None, built_against: str | None, library: bool = True) -> Path:
    """A site-packages folder with a fake ``tensorflow`` distribution (metadata only) and a
    fake ``horovod`` 0.28.1 package whose ``metadata.json`` names ``built_against``."""
    for d in site.glob("*.dist-info"):
        shutil.rmtree(d)
    if tensorflow:
        (site / f"tensorflow-{tensorflow}.dist-info").mkdir(parents=True)
        (site / f"tensorflow-{tensorflow}.dist-info" / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: tensorflow\nVersion: {tensorflow}\n")
    (site / "horovod-0.28.1.dist-info").mkdir(parents=True)
    (site / "horovod-0.28.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: horovod\nVersion: 0.28.1\n")
    pkg = site / "horovod"
    (pkg / "tensorflow").mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    meta = {"dummy": "none"} if built_against is None else {"tensorflow": built_against, "dummy": "none"}
    (pkg / "metadata.json").write_text(json.dumps(meta))
    lib = pkg / "tensorflow" / "mpi_lib.so"
    if library:
        lib.write_bytes(b"\x7fELF fake")
    elif lib.exists():
        lib.unlink()
    return pkg


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A fake virtualenv: ``bin/python`` runs this interpreter with the fake site first."""
    v = tmp_path / "venv"
    (v / "bin").mkdir(parents=True)
    (v / "site").mkdir()
    py = v / "bin" / "python"
    py.write_text(f"#!/bin/sh\nPYTHONPATH={v / 'site'} exec {sys.executable} \"$@\"\n")
    py.chmod(0o755)
    return v


def stamp(venv: Path, tensorflow: str) -> None:
    mpi = int(bool(shutil.which("mpicxx") and shutil.which("mpirun")))
    (venv / ".horovod-build-stamp").write_text(
        f"horovod=0.28.1 tensorflow={tensorflow} python={platform.python_version()} mpi={mpi}\n")


def check(venv: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), "--check", str(venv)], capture_output=True, text=True, timeout=60)


def test_on_a_gpu_machine_the_check_names_what_the_nccl_build_lacks(venv, tmp_path):
    site = venv / "site"
    fake_site(site, "2.21.0", "2.21.0")
    stamp(venv, "2.21.0")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("nvidia-smi", '[ "$1" = -L ] && echo "GPU 0: NVIDIA H100 (UUID: GPU-a)"'),
                       ("nvcc", 'echo "Cuda compilation tools, release 13.0, V13.0.88"')):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    cp = subprocess.run(["bash", str(SCRIPT), "--check", str(venv)], capture_output=True, text=True, timeout=60,
                        env=env)
    # a CUDA 13 nvcc cannot build for TensorFlow's CUDA 12; no nvidia-nccl-cu12 in this venv: both named, and
    # the CPU-operations build is what the stamp then asks for (a CPU Horovod built before must be rebuilt once)
    assert cp.returncode == 3, cp.stdout + cp.stderr
    assert f"{bin_dir / 'nvcc'} is CUDA 13" in cp.stdout and "pip install nvidia-nccl-cu12" in cp.stdout
    assert "building the CPU operations" in cp.stdout and "gpu_ops=none'" in cp.stdout


def test_build_script_check_sees_a_tensorflow_change(venv):
    site = venv / "site"
    fake_site(site, "2.21.0", "2.21.0")
    stamp(venv, "2.21.0")
    cp = check(venv)
    assert cp.returncode == 0 and "up to date" in cp.stdout, cp.stdout + cp.stderr
    fake_site(site, "2.22.0", "2.21.0")  # pip install -U tensorflow
    cp = check(venv)
    assert cp.returncode == 3, cp.stdout + cp.stderr
    assert "TensorFlow 2.22.0 is installed but Horovod was built against TensorFlow 2.21.0" in cp.stdout
    fake_site(site, "2.22.0rc1", "2.22.0-rc1")  # TensorFlow's own spelling of the same release
    stamp(venv, "2.22.0rc1")
    assert check(venv).returncode == 0
    fake_site(site, "2.21.0", "2.21.0")  # Horovod rebuilt by something else than the script: stamp is stale
    cp = check(venv)
    assert cp.returncode == 3 and "build stamp says" in cp.stdout
    fake_site(site, "2.21.0", None)
    stamp(venv, "2.21.0")
    assert "built without TensorFlow" in check(venv).stdout
    fake_site(site, "2.21.0", "2.21.0", library=False)
    assert "mpi_lib*.so) is missing" in check(venv).stdout


def test_build_script_up_to_date_run_builds_nothing_and_is_fast(venv):
    fake_site(venv / "site", "2.21.0", "2.21.0")
    stamp(venv, "2.21.0")
    cp = subprocess.run(["bash", str(SCRIPT), str(venv)], capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0 and "nothing to do" in cp.stdout, cp.stdout + cp.stderr
    assert not (venv / "horovod-build.log").exists()  # no build started


@requires(executable="make")
def test_make_setup_always_asks_the_build_script(venv):
    """With the pip stamp up to date, `make setup` still runs the (cheap) Horovod check."""
    (venv / ".distbench-installed").touch()
    cp = subprocess.run(["make", "-n", "-C", str(ROOT), "setup", f"VENV={venv}"], capture_output=True, text=True,
                        timeout=60)
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert f"bash scripts/build_horovod.sh {venv}" in lines, cp.stdout
    assert not any("pip install" in ln for ln in lines), cp.stdout


def test_pairing_from_metadata(tmp_path, monkeypatch):
    pkg = fake_site(tmp_path, None, "2.21.0")
    monkeypatch.setattr(H.importlib.metadata, "version",
                        lambda name: {"horovod": "0.28.1", "tensorflow": "2.21.0"}[name])
    p = H.tensorflow_pairing(pkg)
    assert p.describe() == "Horovod 0.28.1 built against TensorFlow 2.21.0; installed 2.21.0" and p.problem() == ""
    monkeypatch.setattr(H.importlib.metadata, "version",
                        lambda name: {"horovod": "0.28.1", "tensorflow": "2.22.0"}[name])
    p = H.tensorflow_pairing(pkg)
    assert p.describe() == "Horovod 0.28.1 built against TensorFlow 2.21.0; installed 2.22.0"
    assert p.problem() == ("Horovod 0.28.1 was built against TensorFlow 2.21.0 but TensorFlow 2.22.0 is installed "
                           "(its compiled ops only load with the TensorFlow they were built against): rebuild it "
                           "with 'make setup' (or 'bash scripts/build_horovod.sh .venv')")
    (pkg / "metadata.json").unlink()
    p = H.tensorflow_pairing(pkg)
    assert "TensorFlow it was built against unknown" in p.describe() and p.problem() == ""  # the import probe decides

    def missing(name: str) -> str:
        raise H.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(H.importlib.metadata, "version", missing)
    assert "TensorFlow is not installed" in H.tensorflow_pairing(pkg).problem()


def test_probe_reports_the_mismatch_without_running_the_import_probe(tmp_path, monkeypatch):
    pkg = fake_site(tmp_path, None, "2.21.0")
    monkeypatch.setattr(H, "horovod_package_dir", lambda: pkg)
    monkeypatch.setattr(H, "installed_tensorflow", lambda: "2.22.0")
    monkeypatch.setattr(H, "_PROBES", {})
    monkeypatch.setattr(H, "cached_build_probe", lambda *a, **k: pytest.fail("the import probe must not run"))
    for controller in ("gloo", "mpi"):
        a = H.probe(controller)
        assert not a.ok and "built against TensorFlow 2.21.0 but TensorFlow 2.22.0 is installed" in a.reason
        assert "make setup" in a.reason and "scripts/build_horovod.sh .venv" in a.reason
    monkeypatch.setattr(H, "horovod_package_dir", lambda: None)  # unknown location: the import probe decides
    monkeypatch.setattr(H, "_PROBES", {sys.executable: H.Availability(False, "from the import probe")})
    monkeypatch.setattr(H, "find_horovodrun", lambda: "/x/horovodrun")
    assert H.probe("gloo").reason == "from the import probe"


def test_build_probe_cache_key_has_the_tensorflow_version(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    out = tmp_path / "out.txt"
    out.write_text('distbench-horovod-build {"version": "0.28.1", "controllers": {"Gloo": true}}\n')
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho x >> {calls}\ncat {out}\n")
    fake.chmod(0o755)
    pkg = fake_site(tmp_path / "site", None, "2.21.0")
    monkeypatch.setattr(H, "installed_tensorflow", lambda: "2.21.0")
    assert H.cached_build_probe(str(fake), pkg, tmp_path / "cache").ok
    assert H.cached_build_probe(str(fake), pkg, tmp_path / "cache").ok and calls.read_text().count("x") == 1
    monkeypatch.setattr(H, "installed_tensorflow", lambda: "2.22.0")  # another TensorFlow: probed again
    assert H.cached_build_probe(str(fake), pkg, tmp_path / "cache").ok and calls.read_text().count("x") == 2
    (pkg / "metadata.json").write_text('{"tensorflow": "2.22.0"}')  # Horovod rebuilt for it: probed again
    assert H.cached_build_probe(str(fake), pkg, tmp_path / "cache").ok and calls.read_text().count("x") == 3


def test_env_shows_the_pairing(tmp_path, monkeypatch):
    pkg = fake_site(tmp_path, None, "2.21.0")
    monkeypatch.setattr(H, "horovod_package_dir", lambda: pkg)
    monkeypatch.setattr(H.importlib.metadata, "version",
                        lambda name: {"horovod": "0.28.1", "tensorflow": "2.22.0"}[name])
    assert env_mod.engine_builds() == ["Horovod 0.28.1 built against TensorFlow 2.21.0; installed 2.22.0"]
    monkeypatch.setattr(H, "horovod_package_dir", lambda: None)
    assert env_mod.engine_builds() == []
