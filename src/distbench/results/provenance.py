"""Provenance: what produced a record (versions, machine, code, seed)."""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

PACKAGES = ("distbench", "tensorflow", "keras", "jax", "jaxlib", "numpy", "horovod", "pyspark", "mpi4py", "pyzmq",
            "scikit-learn")


def package_versions() -> dict[str, str | None]:
    """Installed version of each package in :data:`PACKAGES` (``None`` if absent)."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


KERNEL_ENV = ("TF_ENABLE_ONEDNN_OPTS", "OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
              "TF_XLA_FLAGS", "CUDA_VISIBLE_DEVICES")
"""Environment variables that change TensorFlow's kernels or thread pools (oneDNN on or
off moved a plain ``model.fit`` epoch by a quarter on the benchmarks' CNN). Every
configuration's processes inherit the sweep's environment, so one set applies to all
strategies of a run; the record names the values (``None``: unset, TensorFlow's default)."""


def kernel_settings() -> dict[str, str | None]:
    """The :data:`KERNEL_ENV` variables as this process sees them (``None`` when unset)."""
    return {k: os.environ.get(k) for k in KERNEL_ENV}


def cpu_model() -> str:
    """The CPU model name from ``/proc/cpuinfo`` (or ``platform.processor()``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpus() -> list[str]:
    """GPUs listed by ``nvidia-smi -L`` (empty if there is none or no driver)."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        cp = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [ln.strip() for ln in cp.stdout.splitlines() if ln.strip()] if cp.returncode == 0 else []


def git_commit() -> str | None:
    """The git commit of the distbench source tree, with ``-dirty`` if modified; None if unknown."""
    src = Path(__file__).resolve().parents[3]
    try:
        rev = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
        return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return None


def collect(seed: int | None = None) -> dict[str, Any]:
    """Provenance of this process's machine and software.

    Returns:
        dict with ``versions``, ``python``, ``os``, ``cpu_model``, ``cpu_count``,
        ``memory_bytes``, ``gpus``, ``hostname``, ``git_commit``, ``seed``, ``kernel_env``
        (:func:`kernel_settings`).
    """
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = None
    return {
        "versions": package_versions(),
        "python": sys.version.split()[0],
        "os": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": mem,
        "gpus": gpus(),
        "hostname": socket.gethostname(),
        "git_commit": git_commit(),
        "seed": seed,
        "kernel_env": kernel_settings(),
    }


def hardware_key(prov: dict[str, Any]) -> str:
    """A short key identifying the hardware a record ran on (host, CPU, cores, GPUs)."""
    return f"{prov.get('hostname')}|{prov.get('cpu_model')}|{prov.get('cpu_count')}|{len(prov.get('gpus') or [])}"
