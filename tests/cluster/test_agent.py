"""The remote-exec agent: ssh's command line (as Open MPI and horovodrun call it), run in
the emulated host's namespace with the caller's environment and directory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from distbench.cluster import netns
from distbench.cluster.agent import AgentError, find_namespace, parse_ssh_args
from tests.cluster.conftest import child_env, needs_netns, ns_inode


@pytest.mark.parametrize("args,host,command", [
    # Open MPI's rsh agent: AGENT HOST orted ...
    (["10.0.0.2", "orted", "-mca", "ess", "env"], "10.0.0.2", ["orted", "-mca", "ess", "env"]),
    # horovodrun: ssh -o ... -o ... HOST -p PORT [-o ConnectTimeout=N] 'cd DIR ; CMD'
    (["-o", "PasswordAuthentication=no", "-o", "StrictHostKeyChecking=no", "10.0.0.3", "-p", "22", "-o",
      "ConnectTimeout=10", "cd /x > /dev/null 2>&1 ; true"], "10.0.0.3", ["cd /x > /dev/null 2>&1 ; true"]),
    (["-x", "-tt", "-oBatchMode=yes", "-p2222", "-i", "/k", "root@h1", "ls", "-la"], "h1", ["ls", "-la"]),
    (["-l", "me", "--", "h2", "-p", "x"], "h2", ["-p", "x"]),
    (["h3"], "h3", []),
])
def test_ssh_command_lines_are_split_into_host_and_command(args, host, command):
    assert parse_ssh_args(args) == (host, command)


@pytest.mark.parametrize("args,message", [
    ([], "no host given: expected [ssh options] HOST COMMAND..."),
    (["-o", "A=b"], "no host given"),
    (["-p"], "option -p needs a value (as ssh's)"),
    (["-Z", "h"], "unknown ssh option -Z in '-Z'"),
])
def test_bad_ssh_command_lines(args, message):
    with pytest.raises(AgentError, match=re.escape(message)):
        parse_ssh_args(args)


def test_only_hosts_of_live_clusters_are_found():
    st = netns.State("abc123", 1, "x", False, "10.9.0.0/24", "10.9.0.1", "dbn-abc123", ["dbn-abc123-0"],
                     ["dbn-abc123-v0"], ["10.9.0.2"], 1, "unlimited", "/nonexistent")
    assert find_namespace("10.9.0.2", [st]) == "dbn-abc123-0"
    assert find_namespace("dbn-abc123-0", [st]) == "dbn-abc123-0"
    with pytest.raises(AgentError, match=r"'10.9.0.9' is not a host of a live distbench emulated cluster \(hosts: "
                                         r"10.9.0.2\); the agent reaches emulated hosts only"):
        find_namespace("10.9.0.9", [st])


def agent(cluster, *args: str, env: dict[str, str] | None = None, cwd=None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(cluster.agent), *args], capture_output=True, text=True, timeout=30, env=env, cwd=cwd)


@needs_netns
def test_the_agent_runs_the_command_on_the_host_as_ssh_would(cluster, tmp_path):
    env = {**os.environ, "DISTBENCH_AGENT_TEST": "forwarded"}
    res = agent(cluster, "-o", "StrictHostKeyChecking=no", cluster.addresses[1], "-p", "22",
                "readlink /proc/self/ns/net; ip -4 -o addr show; pwd; echo $DISTBENCH_AGENT_TEST; echo $TMPDIR",
                env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    inode, *rest = res.stdout.splitlines()
    assert inode == ns_inode(cluster.wrap(1, [])) and inode != ns_inode()
    assert f"inet {cluster.addresses[1]}/24" in res.stdout and cluster.addresses[0] not in res.stdout
    assert rest[-3:-1] == [str(tmp_path), "forwarded"]  # the caller's directory and environment
    # but the host's own TMPDIR (Open MPI's session directories must not be shared between hosts)
    tmp1 = rest[-1]
    assert Path(tmp1).is_dir() and Path(tmp1).parent == cluster.agent.parent
    tmp0 = agent(cluster, cluster.addresses[0], "echo $TMPDIR").stdout.strip()
    assert Path(tmp0).is_dir() and tmp0 != tmp1
    # the words are one shell string, as ssh sends them: quoting and expansion happen on the host
    assert agent(cluster, cluster.addresses[0], "echo", "'a  b'", "$((6*7))").stdout == "a  b 42\n"
    assert agent(cluster, cluster.namespaces[0], "exit 7").returncode == 7  # the command's status


@needs_netns
def test_the_agent_refuses_anything_else_with_status_255(cluster):
    res = agent(cluster, "10.231.251.200", "true")
    assert res.returncode == 255
    assert res.stderr == ("distbench-agent: '10.231.251.200' is not a host of a live distbench emulated cluster "
                          "(hosts: 10.231.251.2, 10.231.251.3); the agent reaches emulated hosts only\n")
    res = agent(cluster, cluster.addresses[0])
    assert res.returncode == 255 and "no command for 10.231.251.2" in res.stderr


@needs_netns
def test_python_m_agent_finds_the_host_among_live_clusters(cluster):
    res = subprocess.run([sys.executable, "-m", "distbench.cluster.agent", cluster.addresses[1],
                          "readlink /proc/self/ns/net"], capture_output=True, text=True, timeout=30, env=child_env())
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == ns_inode(cluster.wrap(1, []))


@needs_netns
def test_the_fake_ssh_serves_a_horovodrun_style_call(cluster):
    # exactly how horovodrun's gloo_run starts a rank (horovod/runner/util/remote.py), through a shell
    line = (f"ssh -o PasswordAuthentication=no -o StrictHostKeyChecking=no {cluster.addresses[0]} -p 22  "
            "-o ConnectTimeout=10 'cd /tmp > /dev/null 2>&1 ; export HOROVOD_RANK=0; pwd; echo rank $HOROVOD_RANK; "
            "readlink /proc/self/ns/net'")
    res = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=30, env=cluster.ssh_env())
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["/tmp", "rank 0", ns_inode(cluster.wrap(0, []))]
