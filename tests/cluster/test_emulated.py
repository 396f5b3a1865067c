"""The emulated cluster: namespaces, bridge, veths, shaped links, and removal on exit, on
an exception, on SIGTERM, and after its owner was SIGKILLed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from distbench.cli import main
from distbench.cluster import netns
from distbench.cluster.emulated import ClusterUnavailable, EmulatedCluster, require_available, subnet_conflict
from distbench.config import ConfigError
from tests.cluster.conftest import (HERE, OTHER_SUBNET, TEST_SUBNET, child_env, measure_mb_s, names_left,
                                    needs_netns, ns_inode, persistent_clusters)
from tests.conftest import distbench, pids_with


def run(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout


# -- no root needed ------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,message", [
    ({"hosts": 0}, "emulated hosts = 0: expected 1..64"),
    ({"slots": 0}, "emulated slots = 0: expected >= 1 processes per host"),
    ({"bandwidth": "fast"}, "bandwidth = 'fast': expected a link rate in tc's units"),
    ({"subnet": "192.168.1.0/30", "hosts": 2}, "subnet = '192.168.1.0/30' holds 1 host addresses, fewer than"),
])
def test_bad_arguments_are_config_errors(kwargs, message):
    with pytest.raises(ConfigError) as e:
        EmulatedCluster(**kwargs)
    assert str(e.value).startswith(message)


def test_without_root_it_is_unavailable_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(netns, "has_net_admin", lambda: False)
    assert netns.available() == (False, "unavailable: emulated cluster needs root (CAP_NET_ADMIN) to create "
                                        "network namespaces")
    with pytest.raises(ClusterUnavailable, match="needs root"):
        require_available()
    cfg = tmp_path / "em.toml"
    cfg.write_text("[cluster]\nemulate = { hosts = 2 }\n")
    for args in (["cluster", "up", "--hosts", "2"], ["cluster", "down"], ["env", "--cluster", str(cfg)]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2, (args, res.output)
        assert res.output == ("distbench: error: unavailable: emulated cluster needs root (CAP_NET_ADMIN) to create "
                              "network namespaces\n")


def test_using_a_cluster_before_creating_it_is_an_error():
    c = EmulatedCluster(2)
    with pytest.raises(netns.ClusterError, match="not created"):
        c.wrap(0, ["true"])


# -- root ----------------------------------------------------------------------------------------
@needs_netns
def test_two_hosts_are_built_as_described(cluster):
    cid = cluster.id
    assert cluster.namespaces == [f"dbn-{cid}-0", f"dbn-{cid}-1"]
    assert cluster.addresses == ["10.231.251.2", "10.231.251.3"] and cluster.gateway == "10.231.251.1"
    assert cluster.iface == f"dbn-{cid}" and cluster.subnet == TEST_SUBNET
    assert cluster.hosts_arg() == "10.231.251.2:1,10.231.251.3:1" and cluster.hosts_arg(4).endswith(".3:4")
    assert set(cluster.namespaces) <= set(netns.existing_namespaces())
    assert {f"dbn-{cid}", f"dbn-{cid}-v0", f"dbn-{cid}-v1"} <= set(netns.existing_links())
    bridge = json.loads(run("ip", "-j", "-4", "addr", "show", "dev", cluster.iface))[0]
    assert [(a["local"], a["prefixlen"]) for a in bridge["addr_info"]] == [("10.231.251.1", 24)]
    for k, ns in enumerate(cluster.namespaces):
        links = {x["ifname"]: x for x in json.loads(run("ip", "-n", ns, "-j", "-4", "addr", "show"))}
        assert set(links) == {"lo", cluster.iface}
        assert [a["local"] for a in links[cluster.iface]["addr_info"]] == [cluster.addresses[k]]
        assert "UP" in links["lo"]["flags"] and "UP" in links[cluster.iface]["flags"]
        routes = json.loads(run("ip", "-n", ns, "-j", "-4", "route", "show"))
        assert [r["dst"] for r in routes] == [TEST_SUBNET]  # no default route: the subnet only
    state = json.loads((netns.state_dir() / f"{cid}.json").read_text())
    assert state["owner_pid"] == os.getpid() and state["persistent"] is False
    assert state["namespaces"] == cluster.namespaces
    assert cluster.mpirun_args() == ["--leave-session-attached", "--mca", "plm_rsh_agent", str(cluster.agent), "--mca", "plm_rsh_no_tree_spawn",
                                     "1", "--mca", "oob_tcp_if_include", TEST_SUBNET, "--mca", "btl", "tcp,self",
                                     "--mca", "btl_tcp_if_include", TEST_SUBNET]
    assert cluster.ssh_env({"PATH": "/usr/bin"})["PATH"] == f"{cluster.ssh_bin_dir}:/usr/bin"


@needs_netns
def test_wrap_runs_in_the_host_namespace_whose_hostname_is_its_address(cluster):
    here = ns_inode()
    inodes = [ns_inode(cluster.wrap(k, [])) for k in range(2)]
    assert len({here, *inodes}) == 3
    code = "import socket; print(socket.gethostbyname(socket.gethostname()))"
    for k in range(2):
        assert run(*cluster.wrap(k, [sys.executable, "-c", code])).strip() == cluster.addresses[k]


@needs_netns
def test_shaped_links_limit_the_throughput_in_both_directions(cluster):
    cluster.set_bandwidth("20mbit")  # 2.5 MB/s
    for k, ns in enumerate(cluster.namespaces):
        assert "tbf" in run("tc", "qdisc", "show", "dev", f"{cluster.iface}-v{k}")
        assert "rate 20Mbit" in run("tc", "-n", ns, "qdisc", "show", "dev", cluster.iface)
    t0 = time.monotonic()
    host_to_host = measure_mb_s(cluster, 0, 1, 4)
    root_to_host = measure_mb_s(cluster, None, 1, 4)
    host_to_root_side = measure_mb_s(cluster, 1, 0, 4)
    assert time.monotonic() - t0 < 30
    for mb_s in (host_to_host, root_to_host, host_to_root_side):
        assert 1.5 < mb_s < 3.0, (host_to_host, root_to_host, host_to_root_side)
    cluster.set_bandwidth("unlimited")
    assert "tbf" not in run("tc", "qdisc", "show", "dev", f"{cluster.iface}-v0")
    assert measure_mb_s(cluster, 0, 1, 64) > 25  # ~1-3 GB/s here: at least 10x the shaped rate
    assert json.loads(cluster.state.path.read_text())["bandwidth"] == "unlimited"


@needs_netns
def test_an_exception_in_the_block_removes_everything():
    with pytest.raises(RuntimeError, match="boom"):
        with EmulatedCluster(2, bandwidth="1gbit", subnet=TEST_SUBNET) as c:
            cid = c.id
            assert names_left(cid)
            raise RuntimeError("boom")
    assert names_left(cid) == []
    assert not (netns.state_dir() / f"{cid}.json").exists() and not (netns.state_dir() / cid).exists()


@needs_netns
def test_leaving_the_block_ends_processes_still_running_on_the_hosts():
    with EmulatedCluster(2, subnet=TEST_SUBNET) as c:
        p = subprocess.Popen(c.wrap(1, ["sleep", "600"]))
        time.sleep(0.3)
        assert netns.namespace_pids(c.namespaces[1]) == [p.pid]
        cid = c.id
    assert p.wait(timeout=10) == -signal.SIGTERM
    assert names_left(cid) == []


@needs_netns
def test_a_subnet_in_use_is_refused_naming_the_user(cluster):
    with pytest.raises(ConfigError) as e:
        EmulatedCluster(2, subnet="10.231.251.0/25").create()
    assert str(e.value).startswith(f"emulated subnet 10.231.251.0/25 overlaps route {TEST_SUBNET} dev {cluster.iface} "
                                   f"(emulated cluster {cluster.id}, owner pid {os.getpid()} (running))")
    assert subnet_conflict(__import__("ipaddress").IPv4Network(OTHER_SUBNET)) is None
    assert len([s for s in netns.read_states() if s.subnet == "10.231.251.0/25"]) == 0  # nothing half made


def start_owner(subnet: str, launcher: str = "agent") -> tuple[subprocess.Popen[str], str]:
    # default SIGINT in the owner: a backgrounded 'make test' hands its children SIGINT ignored
    p = subprocess.Popen([sys.executable, str(HERE / "owner_proc.py"), subnet, launcher], stdout=subprocess.PIPE,
                         text=True,
                         env=child_env(), preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    cid = p.stdout.readline().strip()
    assert cid, "the owner process did not build its cluster"
    return p, cid


def reap(p: subprocess.Popen[str], cid: str) -> None:
    """Test clean-up: end the owner and remove its cluster whatever happened."""
    if p.poll() is None:
        p.kill()
    p.wait(timeout=30)
    for st in netns.read_states():
        if st.id == cid:
            netns.destroy(st)


@needs_netns
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_sigint_of_the_owner_removes_its_cluster(sig):
    p, cid = start_owner(TEST_SUBNET)
    try:
        assert len(names_left(cid)) == 7  # 2 namespaces, 2 veths, the bridge, 2 /etc/netns entries
        p.send_signal(sig)
        assert p.wait(timeout=30) != 0
        assert names_left(cid) == []
        assert not (netns.state_dir() / f"{cid}.json").exists()
    finally:
        reap(p, cid)


@needs_netns
def test_after_a_sigkill_the_next_creation_removes_the_leftovers():
    p, cid = start_owner(TEST_SUBNET)
    try:
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        assert len(names_left(cid)) == 7  # SIGKILL cannot be caught: all still there
        with EmulatedCluster(1, subnet=TEST_SUBNET) as c:  # the same subnet: only possible once they are gone
            assert names_left(cid) == [] and c.id != cid
        assert not (netns.state_dir() / f"{cid}.json").exists()
    finally:
        reap(p, cid)


@needs_netns
def test_after_a_sigkill_a_plain_distbench_run_removes_the_leftovers(tmp_path):
    # issue 31: they stayed through the next plain run, which README said removed them; with
    # the ssh launcher an sshd runs in every host's namespace as well
    p, cid = start_owner(OTHER_SUBNET, "ssh")
    try:
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        assert len(names_left(cid)) == 7
        # each host's sshd (its pid file names it; a probe connection's child may still be exiting)
        sshd = [int((netns.state_dir() / cid / f"sshd-{k}.pid").read_text()) for k in range(2)]
        assert all(Path(f"/proc/{q}").exists() for q in sshd)
        res = distbench("run", "--strategies", "single", "--epochs", "1", "--repeats", "1", "--out",
                        str(tmp_path / "run"), timeout=300)
        assert res.returncode == 0, res.stderr[-2000:]
        assert f"distbench: removed cluster {cid} (owner pid {p.pid} (dead); 2 namespaces" in res.stderr
        assert names_left(cid) == [] and not (netns.state_dir() / f"{cid}.json").exists()
        assert pids_with(f"{netns.state_dir() / cid}/sshd-") == []
    finally:
        reap(p, cid)


@needs_netns
def test_after_a_sigkill_cluster_down_removes_the_leftovers():
    if persistent_clusters():
        pytest.skip(f"a persistent cluster is up ({', '.join(persistent_clusters())}); 'distbench cluster down' "
                    "would remove it")
    p, cid = start_owner(OTHER_SUBNET)
    try:
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        res = distbench("cluster", "down", timeout=60)
        assert res.returncode == 0, res.stderr
        assert f"removed cluster {cid} (owner pid {p.pid} (dead); 2 namespaces, subnet {OTHER_SUBNET})" in res.stdout
        assert names_left(cid) == []
        assert not [n for n in run("ip", "netns", "list").split() if n.startswith(f"dbn-{cid}")]
    finally:
        reap(p, cid)


@needs_netns
def test_cluster_down_keeps_a_running_sweeps_cluster_and_removes_stray_names(cluster):
    if persistent_clusters():
        pytest.skip(f"a persistent cluster is up ({', '.join(persistent_clusters())}); 'distbench cluster down' "
                    "would remove it")
    run("ip", "netns", "add", "dbn-stray0-0")  # a name with the prefix that no state file claims
    try:
        res = distbench("cluster", "down", timeout=60)
        assert res.returncode == 0, res.stderr
        assert "removed dbn-stray0-0 (no state file claimed them)" in res.stdout
        assert f"kept cluster {cluster.id}: owner pid {os.getpid()} (running) (--all removes it)" in res.stdout
        assert "dbn-stray0-0" not in netns.existing_namespaces() and names_left(cluster.id)
    finally:
        subprocess.run(["ip", "netns", "del", "dbn-stray0-0"], capture_output=True)


@needs_netns
def test_cluster_up_status_bandwidth_down():
    if persistent_clusters():
        pytest.skip(f"a persistent cluster is up ({', '.join(persistent_clusters())}); this test would remove it")
    try:
        res = distbench("cluster", "up", "--hosts", "2", "--slots", "2", "--bandwidth", "50mbit", "--subnet",
                        OTHER_SUBNET, timeout=60)
        assert res.returncode == 0, res.stderr
        cid = res.stdout.split()[2].rstrip(":")
        assert res.stdout.startswith(f"emulated cluster {cid}: 2 hosts x 2 slots, 50mbit per link")
        assert "-H 10.231.252.2:2,10.231.252.3:2" in res.stdout and "remove it with: distbench cluster down" in res.stdout
        assert len(names_left(cid)) == 7  # still there after 'up' returned
        if shutil.which("mpirun"):  # the printed mpirun line works as printed (the user test: not as root)
            line = next(ln for ln in res.stdout.splitlines() if ln.strip().startswith("mpirun"))
            launched = subprocess.run(line.strip().replace(" ...", " -np 2 true"), shell=True, capture_output=True,
                                      text=True, timeout=120)
            assert launched.returncode == 0, line + "\n" + launched.stdout[-1500:] + launched.stderr[-1500:]
        status = json.loads(distbench("cluster", "status", "--json", timeout=60).stdout)
        mine = next(c for c in status["clusters"] if c["id"] == cid)
        assert mine["persistent"] and mine["missing"] == [] and mine["bandwidth"] == "50mbit"
        res = distbench("cluster", "bandwidth", "unlimited", timeout=60)
        assert res.stdout == f"emulated cluster {cid}: every link now unlimited\n"
        assert "tbf" not in run("tc", "qdisc", "show", "dev", f"dbn-{cid}-v0")
        res = distbench("cluster", "down", timeout=60)
        assert f"removed cluster {cid} (persistent (distbench cluster up); 2 namespaces" in res.stdout
        assert names_left(cid) == []
        assert distbench("cluster", "status", timeout=60).stdout == "no distbench emulated cluster on this machine\n"
    finally:
        for st in netns.read_states():
            if st.persistent and st.subnet == OTHER_SUBNET:
                netns.destroy(st)


def test_a_zombie_owner_counts_as_dead():
    # the user test: right after a sweep was SIGKILLed, 'cluster down' kept its cluster
    # ("owner pid N (running)") until the dead sweep was reaped
    p = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 30
        while Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert netns.process_start(p.pid) is None
    finally:
        p.wait()
    assert netns.process_start(os.getpid()) is not None
