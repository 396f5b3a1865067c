"""What a placement adds to the launchers' command lines on real hosts (no host is contacted)."""

from __future__ import annotations

from distbench.cluster.placement import Placement


def test_mpirun_on_real_hosts_keeps_its_daemons_attached_and_uses_the_configured_ssh_port():
    hosts = Placement("ssh", ["node1", "node2"], [1, 1], "launcher")
    assert hosts.mpirun_args() == ["--leave-session-attached"]
    other_port = Placement("ssh", ["node1", "node2"], [1, 1], "launcher", ssh_port=2222)
    assert other_port.mpirun_args() == ["--leave-session-attached", "--mca", "plm_rsh_args", "-p 2222"]
    assert other_port.horovodrun_args({})[0] == ["-p", "2222"]
    assert Placement().mpirun_args() == []  # this machine: no daemons to start
