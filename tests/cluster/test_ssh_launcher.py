"""The emulated cluster with ``launcher = "ssh"`` (issue 31): a real OpenSSH ``sshd`` in every
host's namespace, reached with the cluster's own keys as real hosts are; every process of
every multi-process strategy of a sweep starts through it; a host whose sshd is stopped is
named in one line; nothing outlives the cluster."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from distbench.cluster import netns
from distbench.cluster.emulated import EmulatedCluster
from tests.cluster.conftest import OTHER_SUBNET, TEST_SUBNET, child_env, names_left, needs_netns, ns_inode, \
    persistent_clusters
from tests.conftest import distbench, pids_with, requires

needs_sshd = pytest.mark.skipif(not os.path.exists("/usr/sbin/sshd") or not shutil.which("ssh"),
                                reason="no OpenSSH server: make setup installs openssh-server")


def ssh(c: EmulatedCluster, host: str, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c.agent), host, command], capture_output=True, text=True, timeout=60)


@needs_netns
@needs_sshd
def test_every_host_runs_its_own_sshd_and_commands_arrive_through_it(tmp_path):
    with EmulatedCluster(2, subnet=TEST_SUBNET, launcher="ssh") as c:
        cid, d = c.id, netns.state_dir() / c.id
        for k, addr in enumerate(c.addresses):
            res = ssh(c, addr, "readlink /proc/self/ns/net; cat /proc/$PPID/comm; echo $TMPDIR; pwd; "
                               "echo ${DISTBENCH_NOT_FORWARDED:-unset}")
            assert res.returncode == 0, res.stderr
            inode, parent, tmpdir, cwd, env = res.stdout.split()
            assert inode == ns_inode(c.wrap(k, [])) != ns_inode()  # in the host's namespace
            assert parent == "sshd"  # started by that host's sshd, not by ip netns exec
            assert tmpdir == str(d / f"tmp-{k}")  # the host's own TMPDIR, set by its sshd
            assert cwd == os.path.expanduser("~") and env == "unset"  # as ssh does: nothing of the caller's
        # the cluster's ssh reaches its hosts only: any other host is refused before a connection
        res = ssh(c, "127.0.0.1", "true")
        assert res.returncode == 255, res
        assert res.stderr.strip() == (f"distbench: 127.0.0.1 is not a host of emulated cluster {cid} (its hosts: "
                                      f"{', '.join(c.addresses)}); its ssh reaches those only"), res.stderr
        assert all(Path(f"/proc/{int((d / f'sshd-{k}.pid').read_text())}").exists() for k in range(2))
        for entry in (c.agent, c.ssh_bin_dir / "ssh"):  # mpirun's rsh agent, horovodrun's ssh: OpenSSH's client
            assert "ssh_config" in entry.read_text() and "distbench.cluster.agent" not in entry.read_text()
        assert "an sshd on every host (port 22)" in "\n".join(c.describe())
    assert names_left(cid) == [] and pids_with(f"{d}/sshd-") == [] and not d.exists()  # keys removed too


@needs_netns
@needs_sshd
def test_a_host_whose_sshd_is_stopped_is_named_in_one_line(tmp_path):
    if persistent_clusters():
        pytest.skip(f"a persistent cluster is up ({', '.join(persistent_clusters())}); this test brings one up "
                    "and down")
    up = distbench("cluster", "up", "--hosts", "2", "--subnet", OTHER_SUBNET, "--launcher", "ssh", timeout=120)
    try:
        assert up.returncode == 0, up.stderr
        st = next(s for s in netns.read_states() if s.subnet == OTHER_SUBNET)
        cfg = tmp_path / "c.toml"
        cfg.write_text(f'[cluster]\nemulate = {{ hosts = 2, subnet = "{OTHER_SUBNET}", launcher = "ssh" }}\n')
        ok = distbench("env", "--cluster", str(cfg), timeout=180, env=child_env())
        assert "over ssh (an sshd on each host)" in ok.stdout and "unreachable" not in ok.stdout, ok.stdout[-2000:]
        # user test: env --cluster passed where distbench run then refused the config (its subnet is taken)
        assert f"persistent cluster {st.id} holds subnet {OTHER_SUBNET}, so 'distbench run' with this config is " \
               "refused while it is up" in ok.stdout, ok.stdout[-2000:]
        run = distbench("run", str(cfg), "--strategies", "horovod", "--out", str(tmp_path / "run"), timeout=120)
        assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
        assert f"overlaps route {OTHER_SUBNET} dev dbn-{st.id} (emulated cluster {st.id}, persistent" in run.stderr
        assert "distbench cluster down" in run.stderr and not (tmp_path / "run").exists()  # nothing written
        pid = int((Path(st.agent_dir) / "sshd-1.pid").read_text())
        os.kill(pid, signal.SIGTERM)  # host 1's sshd stops; the host itself stays
        for _ in range(50):
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.1)
        status = distbench("cluster", "status", timeout=60)
        assert f"  sshd not running on: {st.addresses[1]} (nothing can start there" in status.stdout, status.stdout
        bad = distbench("env", "--cluster", str(cfg), timeout=180, env=child_env())
        assert bad.returncode != 0
        lines = [ln for ln in (bad.stdout + bad.stderr).splitlines() if st.addresses[1] in ln and "unreachable" in ln]
        assert len(lines) == 1 and f"{st.addresses[1]}: unreachable over ssh port 22: " in lines[0], bad.stdout
        assert "Connection refused" in lines[0], lines[0]
        assert not any(st.addresses[0] in ln and "unreachable" in ln for ln in bad.stdout.splitlines())
    finally:
        distbench("cluster", "down", timeout=120)
    assert not [s for s in netns.read_states() if s.subnet == OTHER_SUBNET]


SSH_CLUSTER = f"""
[run]
workers = [2]
[cluster]
emulate = {{ hosts = 2, slots = 1, bandwidth = "1gbit", subnet = "{TEST_SUBNET}", launcher = "ssh" }}
"""


@needs_netns
@needs_sshd
@requires(executable="mpirun", module="horovod")
@requires(executable="java", module="pyspark")
def test_every_multi_process_strategy_starts_through_sshd(tmp_path):
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(SSH_CLUSTER)
    names = "horovod,horovod_mpi,mpi_ps:adag,multi_worker_mirrored,tf_ps,spark_ps:adag"
    res = distbench("run", str(cfg), "--strategies", names, "--epochs", "2", "--repeats", "1",
                    "--out", str(tmp_path / "run"), env=child_env(), timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    records = {r["strategy"]: r for r in map(json.loads, (tmp_path / "run" / "results.jsonl").open())}
    assert set(records) == set(names.split(","))
    hosts = ["10.231.251.2", "10.231.251.3"]
    for name, r in records.items():
        assert r["status"] == "ok", (name, r.get("reason"), (r.get("details") or {}).get("failed_process_log_tail"),
                                     r.get("log_tail", "")[-3000:])
        assert r["details"]["cluster_launcher"] == "ssh", name
        assert set(hosts) <= set(r["hosts"]), (name, r["hosts"])
    cid = records["horovod"]["details"]["cluster_id"]
    namespaces = [f"dbn-{cid}-0", f"dbn-{cid}-1"]
    assert records["horovod"]["details"]["rank_netns"] == namespaces
    assert records["mpi_ps:adag"]["details"]["per_worker_netns"] == namespaces
    assert names_left(cid) == [] and pids_with(f"{netns.state_dir() / cid}/") == []


@needs_netns
@needs_sshd
def test_ending_the_local_ssh_ends_the_remote_process(tmp_path):
    # a Spark worker started over ssh without a terminal ran on after its configuration ended,
    # holding its port: -tt makes the remote side hang up with the connection
    import sys
    import time

    from distbench.cluster.placement import Placement

    with EmulatedCluster(2, subnet=TEST_SUBNET, launcher="ssh") as c:
        pl = Placement("emulated", c.addresses, [1, 1], c.gateway, sys.executable, str(tmp_path), 22, c)
        marker = f"distbench-ssh-test-{c.id}"
        p = subprocess.Popen(pl.wrap(1, [sys.executable, "-c", "import time; time.sleep(600)", marker], {}),
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        deadline = time.monotonic() + 30
        while not [q for q in pids_with(marker) if q != p.pid] and time.monotonic() < deadline:
            time.sleep(0.2)
        remote = [q for q in pids_with(marker) if q != p.pid]
        assert remote, "the remote process did not start"
        os.killpg(p.pid, signal.SIGTERM)  # as a configuration's clean-up ends its process group
        p.wait(timeout=30)
        deadline = time.monotonic() + 15
        while any(Path(f"/proc/{q}").exists() for q in remote) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(Path(f"/proc/{q}").exists() for q in remote), "the remote process outlived its ssh"
