"""multi_worker_mirrored and tf_ps: launch builders, real 2-worker runs, worker death."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distbench.results.store import read_records
from distbench.strategies.multi_worker_mirrored import free_ports, tf_config, worker_commands
from distbench.launch.tfconfig import accepts_connections
from distbench.strategies.tf_ps import STALL_FLOOR_S, cluster_spec, server_commands, shard_orders, stall_floor, stalled
from distbench.training.schedule import shard_bounds, shard_indices
from tests.conftest import pids_with, distbench


def test_tf_config_and_worker_commands_exact():
    cmds = worker_commands(Path("/r"), "multi_worker_mirrored_w2_r0", [1111, 2222], threads=1,
                           collective="nccl", base_env={"PATH": "/bin"})
    assert len(cmds) == 2
    argv, env = cmds[1]
    assert argv == [sys.executable, "-m", "distbench", "worker", "tf", "--run-dir", "/r", "--key",
                    "multi_worker_mirrored_w2_r0"]
    assert env == {"PATH": "/bin", "TF_CPP_MIN_LOG_LEVEL": "1", "PYTHONUNBUFFERED": "1", "DISTBENCH_THREADS": "1",
                   "DISTBENCH_COLLECTIVE": "nccl",
                   "TF_CONFIG": '{"cluster": {"worker": ["127.0.0.1:1111", "127.0.0.1:2222"]}, '
                                '"task": {"index": 1, "type": "worker"}}'}
    assert json.loads(tf_config({"worker": ["h:1"]}, "worker", 0))["task"] == {"type": "worker", "index": 0}


def test_harness_passes_the_join_timeout():
    (argv, env), _ = worker_commands(Path("/r"), "k", [1111, 2222], threads=1, base_env={}, join_timeout_s=450)
    assert env["DISTBENCH_JOIN_TIMEOUT_S"] == "450" and "--join-timeout" not in argv


def test_tf_ps_stall_bound():
    assert stalled([0.0], 1e6) is None  # before the first epoch ends: the configuration's timeout bounds it
    assert stalled([0.0, 2.0], 2.0 + STALL_FLOOR_S) is None  # the floor
    assert stalled([0.0, 2.0], 2.0 + STALL_FLOOR_S + 1) == STALL_FLOOR_S + 1
    assert stalled([0.0, 10.0, 12.0], 12.0 + 100) is None  # within 10 x the slowest epoch
    assert stalled([0.0, 10.0, 12.0], 12.0 + 101) == 101


def _tf_worker(tmp_path: Path, index: object, *extra: str, env: dict[str, str] | None = None,
               ports: list[int] | None = None) -> subprocess.Popen[str]:
    cluster = {"worker": [f"127.0.0.1:{p}" for p in (ports or [23456, 23457])]}
    tfc = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
    return subprocess.Popen([sys.executable, "-m", "distbench", "worker", "tf", "--run-dir", str(tmp_path / "run"),
                             "--config", "examples/default.toml", *extra],
                            env={**os.environ, "TF_CONFIG": tfc, "DISTBENCH_THREADS": "1", **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])


@pytest.mark.parametrize("index", [2, -1])
def test_task_index_out_of_range_exits_2_before_tensorflow_starts(tmp_path, index):
    fake = tmp_path / "fake" / "tensorflow"  # importing TensorFlow would leave this trace
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    path = os.pathsep.join([str(fake.parent), os.environ.get("PYTHONPATH", "")])
    t0 = time.monotonic()
    p = _tf_worker(tmp_path, index, env={"PYTHONPATH": path})
    out, err = p.communicate(timeout=30)
    # no hang (the fake package's trace, below, is what shows TensorFlow was not imported); 3 s was exceeded with
    # the suite and a fresh clone's suite sharing 2 cores
    assert time.monotonic() - t0 < 20
    assert p.returncode == 2 and out == ""
    assert err == (f"distbench: error: TF_CONFIG task.index = {index}: expected 0..1 (cluster.worker lists 2 "
                   "addresses); set it to this host's position in cluster.worker\n")
    assert not (tmp_path / "imported").exists() and not (tmp_path / "run").exists()


def _wait_until_joining(p: subprocess.Popen[str], address: str) -> float:
    """Wait until the worker's TensorFlow server listens (it is in the join); return when."""
    t0 = time.monotonic()
    while not accepts_connections(address, 0.2):
        assert time.monotonic() - t0 < 180 and p.poll() is None, "the worker never started its server"
        time.sleep(0.2)
    return time.monotonic()


@pytest.mark.integration
def test_worker_whose_peer_never_starts_fails_naming_it(tmp_path):
    ports = free_ports(2)
    p = _tf_worker(tmp_path, 0, "--join-timeout", "5", ports=ports)
    joining = _wait_until_joining(p, f"127.0.0.1:{ports[0]}")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 3 and time.monotonic() - joining < 5 + 5
    # TensorFlow's own threads may log a line (W0000 ...) after ours while the process ends
    assert [ln for ln in err.splitlines() if not re.match(r"[IWEF]\d{4} ", ln)][-1] == (
        f"distbench: error: worker 0: the TensorFlow cluster did not form within 5 s: worker 1 (127.0.0.1:{ports[1]}) "
        "never joined (nothing accepts connections there); start it with the same cluster in TF_CONFIG, or raise "
        "--join-timeout if still starting")
    assert pids_with(str(tmp_path / "run")) == []


@pytest.mark.integration
def test_sigterm_ends_a_worker_waiting_for_its_peer(tmp_path):
    ports = free_ports(2)
    p = _tf_worker(tmp_path, 0, ports=ports)  # the default join timeout: 120 s
    _wait_until_joining(p, f"127.0.0.1:{ports[0]}")
    time.sleep(1)
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=30)
    assert p.returncode == -signal.SIGTERM and time.monotonic() - t0 < 5
    time.sleep(0.5)
    assert pids_with(str(tmp_path / "run")) == []


@pytest.mark.integration
def test_tf_server_validates_tf_config_and_ends_on_sigint(tmp_path):
    ports = free_ports(3)
    cluster = cluster_spec(ports, workers=1, ps_tasks=1)
    argv = [sys.executable, "-m", "distbench", "worker", "tf-server", "--run-dir", str(tmp_path)]
    bad = subprocess.run(argv, env={**os.environ, "TF_CONFIG": tf_config(cluster, "ps", 1)}, capture_output=True,
                         text=True, timeout=30)
    assert bad.returncode == 2 and bad.stderr == (
        "distbench: error: TF_CONFIG task.index = 1: expected 0..0 (cluster.ps lists 1 address); set it to this "
        "host's position in cluster.ps\n")
    p = subprocess.Popen(argv, env={**os.environ, "TF_CONFIG": tf_config(cluster, "ps", 0)}, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    _wait_until_joining(p, cluster["ps"][0])  # serving; its peers never come
    time.sleep(1)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)  # Ctrl-C: server.join() blocks in C++, where KeyboardInterrupt never comes
    out, _ = p.communicate(timeout=30)
    assert p.returncode == -signal.SIGINT and time.monotonic() - t0 < 5, out[-2000:]


def test_tf_ps_workers_read_the_ps_replicas_shards_in_their_order():
    order = shard_orders(1437, 3, 7, 40, 3, 11)  # digits' training split, global batch 120, 3 workers
    assert order.shape == (3, 3 * 11 * 40) and order.dtype == np.int32
    for i in range(3):
        assert (order[i] == shard_indices(1437, 3, 7, 40, i, 3, 11)).all()  # what mpi_ps/spark_ps replica i reads
        lo, hi = shard_bounds(1437, i, 3)
        epoch = order[i, :440]
        assert lo <= epoch.min() and epoch.max() < hi and len(set(epoch.tolist())) == 440  # no row twice in an epoch
    assert not (order[0, :440] == order[0, 440:880]).all()  # each epoch its own permutation


def test_tf_ps_cluster_and_servers_exact():
    cluster = cluster_spec([10, 11, 12, 13], workers=2, ps_tasks=1)
    assert cluster == {"chief": ["127.0.0.1:10"], "worker": ["127.0.0.1:11", "127.0.0.1:12"], "ps": ["127.0.0.1:13"]}
    cmds = server_commands(cluster, threads=1, run_dir=Path("/r"), base_env={})
    assert [c[0] for c in cmds] == ["worker 0", "worker 1", "ps 0"]
    name, argv, env = cmds[2]
    assert argv == [sys.executable, "-m", "distbench", "worker", "tf-server", "--run-dir", "/r"]
    assert json.loads(env["TF_CONFIG"]) == {"cluster": cluster, "task": {"type": "ps", "index": 0}}


@pytest.mark.integration
def test_both_strategies_train_on_two_workers(tmp_path):
    out = tmp_path / "run"
    cp = distbench("run", "--strategies", "single,multi_worker_mirrored,tf_ps", "--workers", "2", "--repeats", "1",
                   "--epochs", "10", "--out", str(out), timeout=900)
    assert cp.returncode == 0, cp.stderr[-3000:]
    recs = {r["strategy"]: r for r in read_records(out)}
    mw, ps = recs["multi_worker_mirrored"], recs["tf_ps"]
    assert mw["status"] == "ok" and ps["status"] == "ok", (mw["reason"], ps["reason"])
    assert mw["final_test_accuracy"] >= 0.85 and ps["final_test_accuracy"] >= 0.8
    assert mw["initial_weights_sha256"] == ps["initial_weights_sha256"] == recs["single"]["initial_weights_sha256"]
    assert mw["details"]["replicas_in_sync_check"] == "passed" and mw["details"]["collective"] == "ring"
    assert mw["steps"] == recs["single"]["steps"] == 200  # same optimizer steps as the baseline
    assert sum(ps["details"]["per_worker_steps"]) == ps["steps"] == 400 and min(ps["details"]["per_worker_steps"]) > 0
    assert "multi_worker_mirrored" in (out / "report.md").read_text()




def _env_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(kv.decode(errors="replace").split("=", 1) for kv in raw if b"=" in kv)


def _training_started(tmp_path: Path, strategy: str, log_name: str | None, timeout_s: int) -> tuple[Path, Any]:
    """Start a 2-worker sweep of ``strategy`` (200 epochs) and return ``(run dir, process)``
    once its first epoch is logged. TensorFlow's ClusterCoordinator has crashed with SIGSEGV
    before tf_ps's first epoch in full ``make test`` runs under load (the record says so, as
    it should; docs/architecture.md, "tf_ps chief, SIGSEGV"): then the configuration is
    started once more. Any other early end fails, naming the output and the records' reasons."""
    for attempt in range(2):
        out = tmp_path / f"run{attempt}"
        proc = subprocess.Popen([sys.executable, "-m", "distbench", "run", "--strategies", strategy, "--workers", "2",
                                 "--epochs", "200", "--timeout", str(timeout_s), "--out", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        key = f"{strategy}_w2_r0"
        log = out / "logs" / key / log_name if log_name else out / "logs" / f"{key}.log"
        t0 = time.monotonic()
        while not (log.exists() and "epoch 1/" in log.read_text(errors="replace")) and proc.poll() is None:
            assert time.monotonic() - t0 < 180, "training never started"
            time.sleep(0.5)
        if proc.poll() is None:
            return out, proc
        output = proc.communicate()[0].decode(errors="replace")
        reasons = [r.get("reason") or "" for r in read_records(out)] if (out / "results.jsonl").exists() else []
        assert attempt == 0 and any("SIGSEGV" in r for r in reasons), \
            f"training never started: {reasons}\n{output[-3000:]}"
    raise AssertionError("unreachable")


@pytest.mark.integration
@pytest.mark.parametrize("strategy,log_name,victim", [
    ("multi_worker_mirrored", "worker0.log", "worker 1"),
    ("tf_ps", None, "worker 1"),
])
def test_killed_worker_gives_failed_record_and_no_leftovers(tmp_path, strategy, log_name, victim):
    out, proc = _training_started(tmp_path, strategy, log_name, 300)
    job, index = victim.split()
    pids = [p for p in pids_with(str(out)) if json.loads(_env_of(p).get("TF_CONFIG", "{}") or "{}").get("task")
            == {"type": job, "index": int(index)}]
    assert len(pids) == 1
    killed_at = time.monotonic()
    os.kill(pids[0], signal.SIGKILL)
    proc.communicate(timeout=240)
    assert time.monotonic() - killed_at < 60  # noticed and cleaned up promptly, not at the timeout
    (rec,) = read_records(out)
    assert rec["status"] == "failed"
    assert f"{victim} failed with signal 9 (SIGKILL)" in rec["reason"]
    time.sleep(1)
    assert pids_with(str(out)) == []  # no process of this run is left


@pytest.mark.integration
def test_user_run_tf_config_workers_write_the_record(tmp_path):
    """What a platform team does on two hosts, here as two local processes."""
    from distbench.strategies.multi_worker_mirrored import free_ports

    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[training]\nepochs = 3\n")
    run_dir = tmp_path / "cluster-run"
    cluster = {"worker": [f"127.0.0.1:{p}" for p in free_ports(2)]}
    procs = []
    for i in range(2):
        env = {**os.environ, "TF_CONFIG": tf_config(cluster, "worker", i), "DISTBENCH_THREADS": "1"}
        # the second task starts in its own directory, as on a host without a shared filesystem
        d = run_dir if i == 0 else tmp_path / "host2"
        procs.append(subprocess.Popen([sys.executable, "-m", "distbench", "worker", "tf", "--run-dir", str(d),
                                       "--config", str(cfg)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT))
    outs = [p.communicate(timeout=300)[0].decode(errors="replace") for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs[0][-2000:] + outs[1][-2000:]
    (rec,) = read_records(run_dir)
    assert rec["status"] == "ok" and rec["strategy"] == "multi_worker_mirrored" and rec["workers"] == 2
    assert rec["final_test_accuracy"] >= 0.85 and rec["provenance"]["launcher"] == "TF_CONFIG (user)"
    assert read_records(tmp_path / "host2") == []  # only the chief records


@pytest.mark.integration
def test_stopped_tf_ps_worker_fails_the_configuration_naming_it(tmp_path):
    """A task that is alive but never answers (SIGSTOP) would hold the coordinator until the
    configuration's timeout; the stall bound ends it soon after the stall floor (15 s for a
    150 s configuration), naming the task."""
    out, proc = _training_started(tmp_path, "tf_ps", None, 150)
    (pid,) = [p for p in pids_with(str(out)) if json.loads(_env_of(p).get("TF_CONFIG", "{}") or "{}").get("task")
              == {"type": "worker", "index": 1}]
    stopped_at = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    proc.communicate(timeout=400)
    assert time.monotonic() - stopped_at < stall_floor(150) + 60  # not the configuration's 150 s timeout
    (rec,) = read_records(out)
    assert rec["status"] == "failed" and rec["failed_process"] == "worker 1", rec["reason"]
    assert "training stalled: no epoch finished for" in rec["reason"]
    assert "worker 1 is stopped (process state T)" in rec["reason"]
    time.sleep(1)
    assert pids_with(str(out)) == []


def test_stall_floor_follows_the_configuration_timeout():
    assert stall_floor(150) == 15 and stall_floor(30) == 10 and stall_floor(900) == STALL_FLOOR_S == 60
