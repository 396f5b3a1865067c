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

PACKAGES = ("distbench", "tensorflow", "keras", "numpy", "horovod", "pyspark", "mpi4py", "pyzmq", "scikit-learn")


def package_versions() -> dict[str, str | None]:
    """Installed version of each package in :data:`PACKAGES` (``None`` if absent)."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


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
        ``memory_bytes``, ``gpus``, ``hostname``, ``git_commit``, ``seed``.
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
    }


def hardware_key(prov: dict[str, Any]) -> str:
    """A short key identifying the hardware a record ran on (host, CPU, cores, GPUs)."""
    return f"{prov.get('hostname')}|{prov.get('cpu_model')}|{prov.get('cpu_count')}|{len(prov.get('gpus') or [])}"
