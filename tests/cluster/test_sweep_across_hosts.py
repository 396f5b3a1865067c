"""``distbench run`` on an emulated 2-host cluster: the workers of horovod and mpi_ps:adag,
and keras_jax:multi_process's JAX processes, run in the hosts' namespaces (each process reports its own), the records name the hosts,
and nothing is left behind, also after the sweep is SIGKILLed in the middle of a
configuration. Bad cluster specs end ``distbench run`` with one line and exit 2 before
anything is written."""

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

from distbench.cluster import netns
from tests.cluster.conftest import TEST_SUBNET, child_env, needs_netns, persistent_clusters
from tests.conftest import distbench, pids_with, requires

TWO_HOSTS = f"""
[run]
workers = [2]
[cluster]
emulate = {{ hosts = 2, slots = 1, bandwidth = "1gbit", subnet = "{TEST_SUBNET}" }}
"""


def names_of(cluster_id: str) -> list[str]:
    """Namespaces and links of emulated cluster ``cluster_id`` still present."""
    tag = f"{netns.PREFIX}{cluster_id}"
    return [n for n in [*netns.existing_namespaces(), *netns.existing_links()] if n.startswith(tag)]


@needs_netns
@requires(executable="mpirun", module="horovod")
def test_horovod_and_mpi_ps_run_across_two_emulated_hosts(tmp_path):
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(TWO_HOSTS)
    res = distbench("run", str(cfg), "--strategies", "horovod,mpi_ps:adag", "--epochs", "2",
                    "--out", str(tmp_path / "run"), env=child_env(), timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    records = {r["strategy"]: r for r in map(json.loads, (tmp_path / "run" / "results.jsonl").open())}
    assert set(records) == {"horovod", "mpi_ps:adag"}
    hosts = ["10.231.251.2", "10.231.251.3"]  # the first address is the bridge: the launching host
    for r in records.values():
        assert r["status"] == "ok" and r["bandwidth"] == "1gbit", r.get("error")
        assert r["config_id"].endswith("_bw1gbit")
        assert set(hosts) <= set(r["hosts"])
    cid = records["horovod"]["details"]["cluster_id"]
    namespaces = [f"dbn-{cid}-0", f"dbn-{cid}-1"]
    # where each process was, as the process itself saw it (/proc/self/ns/net)
    assert records["horovod"]["details"]["rank_netns"] == namespaces
    assert records["horovod"]["details"]["placement"] == {"rank 0": hosts[0], "rank 1": hosts[1]}
    assert records["mpi_ps:adag"]["details"]["per_worker_netns"] == namespaces
    assert records["mpi_ps:adag"]["details"]["placement"]["server (rank 0)"] == "10.231.251.1"
    assert records["horovod"]["final_test_accuracy"] > 0.8
    # the emulated hosts share this machine's cores: each rank gets cores // all ranks, as
    # mpi_ps's processes do, not the cores of its "host" (which oversubscribed them)
    cores = os.cpu_count() or 1
    assert records["horovod"]["details"]["intra_op_threads"] == max(1, cores // 2)
    assert names_of(cid) == []  # removed with the sweep


@needs_netns
@requires(module="jax")
def test_keras_jax_multi_process_runs_one_process_per_emulated_host(tmp_path):
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(TWO_HOSTS)
    res = distbench("run", str(cfg), "--strategies", "keras_jax:multi_process", "--epochs", "2",
                    "--out", str(tmp_path / "run"), env=child_env(), timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (r,) = map(json.loads, (tmp_path / "run" / "results.jsonl").open())
    assert r["status"] == "ok", (r["reason"], r.get("log_tail", "")[-2000:])
    d = r["details"]
    hosts = ["10.231.251.2", "10.231.251.3"]
    cid = d["cluster_id"]
    # each process's namespace as the process itself saw it; process 0 coordinates from host 0
    assert d["process_netns"] == [f"dbn-{cid}-0", f"dbn-{cid}-1"]
    assert d["placement"] == {"jax process 0": hosts[0], "jax process 1": hosts[1]}
    assert d["coordinator"] == f"{hosts[0]}:23600" and d["replicas_in_sync_check"] == "passed"
    assert "Gloo across 2 processes" in d["collective"] and r["final_test_accuracy"] > 0.8
    assert names_of(cid) == []


def _cmdline(pid: int) -> str:
    """A process's command line, empty once it has ended (a launcher's short-lived helpers end
    between the namespace's pid list and this read: CI saw FileNotFoundError)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


@needs_netns
@requires(executable="horovodrun", module="horovod")
def test_a_sigkilled_sweep_leaves_nothing_after_cluster_down(tmp_path):
    if persistent_clusters():
        pytest.skip(f"a persistent cluster is up ({', '.join(persistent_clusters())}); 'distbench cluster down' "
                    "would remove it")
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(TWO_HOSTS)
    run_dir = tmp_path / "run"
    sweep = subprocess.Popen([sys.executable, "-m", "distbench", "run", str(cfg), "--strategies", "horovod",
                              "--epochs", "100000", "--out", str(run_dir)], env=child_env(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    ranks: list[int] = []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and len(ranks) < 2:  # both ranks training in their namespaces
            ours = [s for s in netns.read_states() if s.owner_pid == sweep.pid]
            ranks = [p for s in ours for ns in s.namespaces for p in netns.namespace_pids(ns)
                     if str(run_dir) in _cmdline(p)]
            assert sweep.poll() is None, "the sweep ended before its ranks started"
            time.sleep(1)
        assert len(ranks) >= 2, "the ranks did not start in the emulated hosts in time"
        cid = ours[0].id
        os.kill(sweep.pid, signal.SIGKILL)  # only the sweep: no handler runs
        sweep.wait(timeout=30)
        assert names_of(cid), "SIGKILL cannot be caught: the namespaces are still there"
        res = distbench("cluster", "down", timeout=120)
        assert res.returncode == 0, res.stderr
        assert f"removed cluster {cid}" in res.stdout
        assert names_of(cid) == []
        deadline = time.monotonic() + 60  # the sweep's own children die with it (PR_SET_PDEATHSIG)
        while time.monotonic() < deadline and pids_with(str(run_dir)):
            time.sleep(1)
        assert pids_with(str(run_dir)) == []
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
            sweep.wait(timeout=30)
        for st in netns.read_states():
            if st.owner_pid == sweep.pid:
                netns.destroy(st)
        for p in pids_with(str(run_dir)):
            os.kill(p, signal.SIGKILL)


@pytest.mark.parametrize("cluster,message", [
    ('hosts = ["node1"]', "'node1'"),
    ('hosts = ["node1:0"]', "'node1:0'"),
    ('hosts = ["node1:1", "node1:1"]', "node1"),
    ('hosts = ["node1:1"]', "workers"),
])
def test_bad_cluster_specs_are_one_line_and_exit_2_before_anything_is_written(tmp_path, cluster, message):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(f"[run]\nworkers = [2]\n[cluster]\n{cluster}\n")
    res = distbench("run", str(cfg), "--out", str(tmp_path / "run"), timeout=60)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("distbench: error:") and message in lines[0], res.stderr
    assert not (tmp_path / "run").exists()


def test_unreachable_hosts_are_named_within_a_bounded_time(tmp_path):
    # only names that never resolve and a closed loopback port: no traffic leaves this machine
    cfg = tmp_path / "hosts.toml"
    cfg.write_text('[run]\nworkers = [2]\n[cluster]\nhosts = ["nohost.invalid:1", "127.0.0.1:1"]\nssh_port = 1\n')
    t0 = time.monotonic()
    res = distbench("run", str(cfg), "--out", str(tmp_path / "run"), timeout=120)
    assert res.returncode == 2, res.stderr
    assert time.monotonic() - t0 < 60
    line = res.stderr.strip()
    assert "\n" not in line and "nohost.invalid: unreachable" in line and "127.0.0.1: unreachable" in line, line
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv to drop "
                    "CAP_NET_ADMIN from a child")
def test_emulate_without_cap_net_admin_is_one_line_and_exit_2(tmp_path):
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(TWO_HOSTS)
    res = subprocess.run(["setpriv", "--bounding-set=-net_admin", "--inh-caps=-net_admin", sys.executable, "-m",
                          "distbench", "run", str(cfg), "--out", str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=60, env=child_env())
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip() == ("distbench: error: unavailable: emulated cluster needs root (CAP_NET_ADMIN) to "
                                  "create network namespaces")
    assert not (tmp_path / "run").exists()
