"""Real launchers across the emulated hosts: Open MPI with the agent as its rsh agent, and
horovodrun (Gloo) with the agent as its ssh; each rank runs in its host's namespace and the
collective crosses the shaped links."""

from __future__ import annotations

import re
import subprocess
import sys

from distbench.cluster import netns
from distbench.launch.commands import horovodrun_command, launcher_env, mpirun_command
from tests.cluster.conftest import needs_netns, ns_inode
from tests.conftest import requires

ALLREDUCE_MPI = """
from mpi4py import MPI
import numpy as np, os
c = MPI.COMM_WORLD
x = np.full(1_000_000, c.rank + 1, np.float32)
y = np.empty_like(x)
c.Allreduce(x, y)
os.write(1, f"RESULT {c.rank} {c.size} {os.readlink('/proc/self/ns/net')} {y[0]} {y[-1]}\\n".encode())
"""

ALLREDUCE_HOROVOD = """
import os
import horovod.tensorflow as hvd, tensorflow as tf
hvd.init()
y = hvd.allreduce(tf.fill([1_000_000], float(hvd.rank() + 1)), op=hvd.Sum)
os.write(1, f"RESULT {hvd.rank()} {hvd.size()} {os.readlink('/proc/self/ns/net')} {float(y[0])} {float(y[-1])}\\n".encode())
"""


def results(text: str) -> dict[int, tuple[str, ...]]:
    """rank -> (size, network namespace, first and last element of the sum) from the ranks' lines."""
    rows = re.findall(r"RESULT (\d+) (\d+) (net:\[\d+\]) ([\d.]+) ([\d.]+)", text)
    return {int(r[0]): tuple(r[1:]) for r in rows}


@needs_netns
@requires(executable="mpirun", module="mpi4py")
def test_mpirun_places_one_rank_per_emulated_host(cluster, tmp_path):
    cluster.set_bandwidth("1gbit")
    argv, env = mpirun_command(2, cluster.hosts_arg(), [sys.executable, "-c", ALLREDUCE_MPI], tmp_path / "out",
                               sys.executable)
    argv = argv[:1] + cluster.mpirun_args() + argv[1:]
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    got = results("\n".join(p.read_text() for p in (tmp_path / "out").rglob("stdout")))  # one file per rank
    expected_ns = [ns_inode(cluster.wrap(k, [])) for k in range(2)]
    assert got == {r: ("2", expected_ns[r], "3.0", "3.0") for r in range(2)}


@needs_netns
@requires(executable="horovodrun", module="horovod")
def test_horovodrun_gloo_runs_one_rank_per_emulated_host(cluster, tmp_path):
    cluster.set_bandwidth("1gbit")
    argv, env = horovodrun_command(2, cluster.hosts_arg(), [sys.executable, "-c", ALLREDUCE_HOROVOD], tmp_path / "out",
                                   60, sys.executable, options=["--network-interface", cluster.iface])
    env = cluster.ssh_env(launcher_env(sys.executable, env))
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    out = "\n".join(p.read_text() for p in (tmp_path / "out").rglob("stdout"))  # one file per rank
    assert res.returncode == 0, out[-2000:] + res.stderr[-3000:]
    expected_ns = [ns_inode(cluster.wrap(k, [])) for k in range(2)]
    assert results(out) == {r: ("2", expected_ns[r], "3.0", "3.0") for r in range(2)}


@needs_netns
@requires(executable="mpirun", module="mpi4py")
def test_mpirun_fails_within_seconds_when_a_hosts_daemon_cannot_reach_it(cluster, tmp_path):
    # host 1 cut off from the bridge: its orted starts but cannot connect back to mpirun. A
    # daemonized orted exits unseen and mpirun waits for it forever (a full make test hung
    # 600 s so); attached, mpirun reports it and fails
    subprocess.run([netns.tool("ip") or "ip", "link", "set", f"{netns.PREFIX}{cluster.id}-v1", "down"], check=True,
                   timeout=30)
    argv, env = mpirun_command(2, cluster.hosts_arg(), [sys.executable, "-c", ALLREDUCE_MPI], tmp_path / "out",
                               sys.executable)
    argv = argv[:1] + cluster.mpirun_args() + argv[1:]
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=90, cwd=tmp_path)
    assert res.returncode != 0
    assert "unable to reliably start one or more daemons" in res.stdout + res.stderr, res.stderr[-2000:]
