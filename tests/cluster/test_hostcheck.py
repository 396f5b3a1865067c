"""``distbench env --cluster``: every host probed (reachable, same versions, free port), each
problem one line naming the host, unreachable hosts within a bounded time."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from distbench.cluster.hostcheck import MARK, judge, local_versions, probe_command
from tests.cluster.conftest import TEST_SUBNET, needs_netns
from tests.conftest import distbench, requires

LOCAL = {"python": "3.11.7", "distbench": "0.1.0", "tensorflow": "2.21.0", "keras": "3.15.1", "horovod": "0.28.1"}


def answer(**changes: object) -> str:
    info = {"python": "3.11.7", "executable": "/x/python", "cwd": "/w", "netns": "net:[1]", "port": 5000,
            "port_error": None, "versions": {k: v for k, v in LOCAL.items() if k != "python"}}
    info.update(changes)
    return "some banner\n" + MARK + json.dumps(info) + "\n"


@pytest.mark.parametrize("rc,out,err,problems", [
    (0, answer(), "", []),
    (None, "", "", ["node1: no answer within 30 s over ssh port 22"]),
    (255, "", "ssh: connect to host node1 port 22: Connection refused\n",
     ["node1: unreachable over ssh port 22: ssh: connect to host node1 port 22: Connection refused"]),
    (1, "", "bash: line 1: cd: /nope: No such file or directory\n",
     ["node1: the probe failed (exit 1): bash: line 1: cd: /nope: No such file or directory"]),
    (127, "", "bash: /opt/py/bin/python: No such file or directory\n",
     ["node1: the probe failed (exit 127): bash: /opt/py/bin/python: No such file or directory"]),
    (0, answer(python="3.10.12", versions={"distbench": "0.1.0", "tensorflow": "2.20.0", "keras": "3.15.1",
                                           "horovod": None}),
     "", ["node1: python 3.10.12 there, 3.11.7 here", "node1: tensorflow 2.20.0 there, 2.21.0 here",
          "node1: horovod missing there, 0.28.1 here"]),
    (0, answer(port_error="Address already in use"), "", ["node1: cannot bind port 5000: Address already in use"]),
])
def test_each_problem_is_one_line_naming_the_host(rc, out, err, problems):
    assert judge("node1", rc, out, err, LOCAL, "ssh port 22", 30, 5000).problems == problems


def test_the_probe_reports_versions_and_a_port_in_use(tmp_path):
    busy = socket.socket()
    busy.bind(("", 0))
    busy.listen(1)
    try:
        port = busy.getsockname()[1]
        for p, error in ((0, None), (port, "Address already in use")):
            res = subprocess.run(["bash", "-c", probe_command(sys.executable, str(tmp_path), p)], capture_output=True,
                                 text=True, timeout=60)
            chk = judge("here", res.returncode, res.stdout, res.stderr, local_versions(), "bash", 60, p)
            assert chk.info["cwd"] == str(tmp_path) and chk.info["port_error"] == error
            assert chk.problems == ([] if error is None else [f"here: cannot bind port {port}: {error}"])
    finally:
        busy.close()


@requires(executable="ssh")
def test_a_refused_ssh_host_fails_fast_naming_it(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[cluster]\nhosts = ["127.0.0.1:2"]\nssh_port = 1\n')  # loopback, a closed port
    res = distbench("env", "--cluster", str(cfg), timeout=120)
    assert res.returncode == 1, res.stderr
    assert "problem: 127.0.0.1: unreachable over ssh port 1: ssh: connect to host 127.0.0.1 port 1: Connection " \
           "refused" in res.stdout


@needs_netns
def test_the_emulated_hosts_are_checked_through_the_agent(tmp_path):
    cfg = tmp_path / "em.toml"
    cfg.write_text(f'[cluster]\nemulate = {{ hosts = 2, bandwidth = "1gbit", subnet = "{TEST_SUBNET}" }}\n')
    res = distbench("env", "--cluster", str(cfg), "--json", timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    out = json.loads(res.stdout)
    assert "built for this check" in out["checked"]
    assert [h["host"] for h in out["hosts"]] == ["10.231.251.2", "10.231.251.3"]
    assert all(h["ok"] for h in out["hosts"])
    assert len({h["info"]["netns"] for h in out["hosts"]}) == 2  # two namespaces, neither this one
    assert not [p for p in (subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
                if p.startswith("dbn-") and any(p.startswith(f"dbn-{c}") for c in out["checked"].split())]
    cfg.write_text(f'[cluster]\nworkdir = "{tmp_path}/nope"\nemulate = {{ hosts = 2, subnet = "{TEST_SUBNET}" }}\n')
    res = distbench("env", "--cluster", str(cfg), timeout=120)
    assert res.returncode == 1
    assert res.stdout.count(f"cd: {tmp_path}/nope: No such file or directory") == 2


@needs_netns
@requires(executable="ssh")
def test_an_unreachable_host_fails_within_a_bounded_time_naming_it(cluster, tmp_path):
    subprocess.run(["ip", "-n", cluster.namespaces[1], "link", "set", cluster.iface, "down"], check=True)  # silent
    host = cluster.addresses[1]
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[cluster]\nhosts = ["{host}:2"]\n')
    t0 = time.monotonic()
    res = distbench("env", "--cluster", str(cfg), timeout=120)
    took = time.monotonic() - t0
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"problem: {host}: unreachable over ssh port 22: ssh: connect to host {host} port 22: " in res.stdout
    assert took < 25, took
