"""Fixtures of the emulated-cluster tests: whether this machine can build one (root,
iproute2, a kernel that allows namespaces: else those tests skip with the exact reason),
a 2-host cluster on a subnet of the tests' own, and checks that nothing is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from distbench.cluster import netns
from distbench.cluster.emulated import EmulatedCluster

NETNS_OK, NETNS_REASON = netns.available()
needs_netns = pytest.mark.skipif(not NETNS_OK, reason=NETNS_REASON)
TEST_SUBNET = "10.231.251.0/24"  # the tests' own: a persistent cluster on the default subnet is left alone
OTHER_SUBNET = "10.231.252.0/24"
HERE = Path(__file__).resolve().parent
TCP_PROBE = HERE / "tcp_probe.py"


def names_left(cluster_id: str) -> list[str]:
    """Namespaces, links and /etc/netns entries of cluster ``cluster_id`` still present."""
    tag = f"{netns.PREFIX}{cluster_id}"
    return [n for n in [*netns.existing_namespaces(), *netns.existing_links(), *netns.existing_etc_dirs()]
            if n.startswith(tag)]


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    """A 2-host emulated cluster (unlimited links) on :data:`TEST_SUBNET`, removed afterwards
    even when the test fails; the test fails if anything of it is left."""
    with EmulatedCluster(2, subnet=TEST_SUBNET) as c:
        cid = c.id
        yield c
    assert names_left(cid) == []
    assert not (netns.state_dir() / f"{cid}.json").exists()


def ns_inode(argv_prefix: list[str] | None = None) -> str:
    """The network namespace (``net:[inode]``) a process started with ``argv_prefix`` runs in."""
    cmd = [*(argv_prefix or []), "readlink", "/proc/self/ns/net"]
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=30).stdout.strip()


def measure_mb_s(c: EmulatedCluster, src: int | None, dst: int, megabytes: int) -> float:
    """MB/s of one TCP stream of ``megabytes`` MB from host ``src`` (``None``: this, the root
    namespace) to host ``dst``, received by a listener on ``dst``'s address; bounded in time."""
    lis = subprocess.Popen(c.wrap(dst, [sys.executable, str(TCP_PROBE), "listen", c.addresses[dst]]),
                           stdout=subprocess.PIPE, text=True)
    try:
        port = lis.stdout.readline().split()[1]
        send = [sys.executable, str(TCP_PROBE), "send", c.addresses[dst], port, str(megabytes)]
        subprocess.run(send if src is None else c.wrap(src, send), check=True, timeout=60)
        out, _ = lis.communicate(timeout=30)
        return float(out.split()[-1])
    finally:
        if lis.poll() is None:
            lis.kill()
            lis.wait()


def persistent_clusters() -> list[str]:
    """Ids of persistent clusters ('distbench cluster up') on this machine: tests that run
    'distbench cluster down' would remove them, so they skip instead."""
    return [s.id for s in netns.read_states() if s.persistent]


def child_env() -> dict[str, str]:
    """The environment of a child Python process that imports this tree's distbench."""
    root = HERE.parents[1]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
