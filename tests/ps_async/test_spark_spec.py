"""Spark specs without a JVM: master URLs, the [spark] conf checks, the barrier slot
count, the reachability probe, and the CLI's exit 2 (no run directory) on bad specs."""

from __future__ import annotations

import os
import socket
import time

import pytest
from click.testing import CliRunner

from distbench import config
from distbench.cli import main
from distbench.config import ConfigError
from distbench.config.spark import MASTER_FORMS, Master, check_conf, parse_master, planned_slots, size_bytes, time_ms
from distbench.ps_async.spark_spec import SparkSpecError, check_planned_slots, probe_master

CORES = len(os.sched_getaffinity(0))


@pytest.mark.parametrize("url,kind,cores,executor_cores,endpoints", [
    ("local", "local", 1, 1, ()),
    ("local[3]", "local", 3, 3, ()),
    ("local[*]", "local", CORES, CORES, ()),
    ("local[2,4]", "local", 2, 2, ()),
    ("local[2 , 4]", "local", 2, 2, ()),
    ("local[*,2]", "local", CORES, CORES, ()),
    ("local-cluster[2,3,1024]", "local-cluster", 6, 3, ()),
    ("spark://h1:7077", "standalone", None, None, (("h1", 7077),)),
    ("spark://h1:7077,h2:7078", "standalone", None, None, (("h1", 7077), ("h2", 7078))),
    ("spark://[::1]:7077", "standalone", None, None, (("::1", 7077),)),
    ("yarn", "yarn", None, None, ()),
    ("k8s://https://api.example:6443", "k8s", None, None, (("api.example", 6443),)),
    ("k8s://http://10.0.0.1:8080", "k8s", None, None, (("10.0.0.1", 8080),)),
    ("k8s://api.example", "k8s", None, None, (("api.example", 443),)),
])
def test_accepted_masters(url, kind, cores, executor_cores, endpoints):
    assert parse_master(url) == Master(url, kind, cores, executor_cores, endpoints)


@pytest.mark.parametrize("url,why", [
    ("lokal[2]", ""), ("local[0]", "must be >= 1"), ("local[2,0]", "must be >= 1"), ("local[ 2]", ""),
    ("local[-1]", ""), ("local[2", ""), ("LOCAL", ""), ("spark://h1", "'h1' is not host:port"),
    ("spark://h1:0", "'h1:0' is not host:port"), ("spark://h1:70770", "is not host:port"),
    ("spark://h1:7077,", "'' is not host:port"), ("yarn-client", ""), ("k8s://", ""), ("k8s://h:0", "port 0"),
    ("mesos://h:5050", ""), ("local-cluster[0,1,1024]", "must be >= 1"), ("local-cluster[2,1]", ""),
])
def test_rejected_masters_list_the_accepted_forms(url, why):
    with pytest.raises(ConfigError) as e:
        parse_master(url)
    msg = str(e.value)
    assert msg.startswith(f"spark.master = {url!r}: ") and msg.endswith(f"expected one of {MASTER_FORMS}")
    assert why in msg and "\n" not in msg


def test_size_and_time_strings():
    assert size_bytes("512m") == 512 * 2**20 and size_bytes("4G") == 4 * 2**30 and size_bytes("1024") == 2**30
    assert size_bytes("2gb") == 2 * 2**30 and size_bytes("0") == 0
    assert size_bytes("1.5g") is None and size_bytes("4 g") is None and size_bytes("lots") is None
    assert time_ms("30s", "s") == 30_000 and time_ms("2min", "s") == 120_000 and time_ms("500", "ms") == 500
    assert time_ms("10", "s") == 10_000 and time_ms("1.5s", "s") is None and time_ms("-1s", "s") is None


@pytest.mark.parametrize("conf,needle", [
    ({"spark.task.cpus": "0"}, "spark.conf spark.task.cpus = '0': expected a positive integer"),
    ({"spark.task.cpus": "two"}, "spark.task.cpus = 'two': expected a positive integer"),
    ({"spark.executor.cores": "-2"}, "spark.executor.cores = '-2': expected a positive integer"),
    ({"spark.executor.instances": "1.5"}, "spark.executor.instances = '1.5': expected a positive integer"),
    ({"spark.cores.max": ""}, "spark.cores.max = '': expected a positive integer"),
    ({"spark.executor.memory": "4gigs"}, "spark.executor.memory = '4gigs': expected a JVM size"),
    ({"spark.executor.memory": "1.5g"}, "spark.executor.memory = '1.5g': expected a JVM size"),
    ({"spark.executor.memory": "4"}, "spark.executor.memory = '4': Spark needs at least 450m"),
    ({"spark.driver.memory": "2gb"}, "spark.driver.memory = '2gb': expected a JVM size, an integer with unit k, m, g"),
    ({"spark.driver.memory": "1024"}, "spark.driver.memory = '1024': expected a JVM size"),
    ({"spark.driver.memory": "100m"}, "spark.driver.memory = '100m': Spark needs at least 450m"),
    ({"spark.driver.maxResultSize": "1 g"}, "spark.driver.maxResultSize = '1 g': expected a size"),
    ({"spark.network.timeout": "soon"}, "spark.network.timeout = 'soon': expected a positive duration"),
    ({"spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "0s"}, "maxConcurrentTasksCheck.interval = '0s'"),
    ({"spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "0"}, "maxConcurrentTasksCheck.maxFailures = '0'"),
    ({"spark.executor.heartbeatInterval": "200s"}, "heartbeatInterval (200000 ms) must be less than spark.network.timeout"),
    ({"spark.dynamicAllocation.enabled": "yes"}, "spark.dynamicAllocation.enabled = 'yes': expected \"true\" or"),
    ({"spark.dynamicAllocation.enabled": "true"}, "barrier stages (one task per replica, all at once) do not run"),
    ({"spark.task.cpus": "3", "spark.executor.cores": "2"},
     "spark.task.cpus = 3 is more than the 2 cores of one executor (spark.executor.cores)"),
    ({"spark.executor.cores": "4", "spark.cores.max": "2"}, "spark.executor.cores = 4 is more than spark.cores.max = 2"),
    ({"spark.master": "local[2]"}, "set the master with [spark] master"),
    ({"spark.submit.deployMode": "cluster"}, "only \"client\" works"),
])
def test_bad_spark_conf(conf, needle):
    with pytest.raises(ConfigError) as e:
        config.from_dict({"spark": {"master": "spark://127.0.0.1:7077", "conf": conf}})
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_master_dependent_conf_checks():
    with pytest.raises(ConfigError, match=r"spark.task.cpus = 2 is more than the 1 core of one executor "
                                          r"\(master 'local\[1\]'\)"):
        check_conf(parse_master("local[1]"), {"spark.task.cpus": "2"})
    check_conf(parse_master("local[2]"), {"spark.task.cpus": "2", "spark.executor.cores": "1"})  # local ignores it
    with pytest.raises(ConfigError, match=r"more than the 1 core of one executor \(master 'local-cluster"):
        check_conf(parse_master("local-cluster[2,1,1024]"), {"spark.task.cpus": "2"})
    check_conf(parse_master("local[2]"), {"spark.dynamicAllocation.enabled": "true"})  # no-op in local mode
    with pytest.raises(ConfigError, match="no such executable here"):
        check_conf(parse_master("local[2]"), {"spark.pyspark.python": "/nonexistent/python3"})
    check_conf(parse_master("yarn"), {"spark.pyspark.python": "/opt/cluster-only/python3"})  # on the executors


def test_good_spark_config_passes():
    cfg = config.from_dict({"spark": {"master": "local[2]", "conf": {
        "spark.task.cpus": 1, "spark.executor.memory": "512m", "spark.driver.memory": "2G",
        "spark.driver.maxResultSize": "0", "spark.network.timeout": "300s", "spark.executor.heartbeatInterval": "20s",
        "spark.dynamicAllocation.enabled": False}}})
    assert cfg.spark.conf["spark.task.cpus"] == "1" and cfg.spark.conf["spark.dynamicAllocation.enabled"] == "False"


@pytest.mark.parametrize("url,conf,count,exact", [
    ("local", {}, 1, True),
    ("local[2]", {}, 2, True),
    ("local[2]", {"spark.task.cpus": "2"}, 1, True),
    ("local[5]", {"spark.task.cpus": "2"}, 2, True),
    ("local[3,2]", {}, 3, True),
    ("local[*]", {}, CORES, False),
    ("local-cluster[2,3,1024]", {"spark.task.cpus": "2"}, 2, False),  # 2 workers x (3 // 2)
    ("local-cluster[2,3,1024]", {"spark.executor.cores": "1"}, 6, False),  # 2 workers x 3 executors x 1
    ("local-cluster[2,3,1024]", {"spark.cores.max": "4", "spark.executor.cores": "1"}, 4, False),
    ("spark://h:7077", {"spark.cores.max": "6", "spark.executor.cores": "2"}, 6, False),
    ("spark://h:7077", {"spark.cores.max": "5", "spark.executor.cores": "2", "spark.task.cpus": "2"}, 2, False),
    ("spark://h:7077", {"spark.cores.max": "5", "spark.task.cpus": "2"}, 2, False),
    ("yarn", {"spark.executor.instances": "3", "spark.executor.cores": "4", "spark.task.cpus": "2"}, 6, False),
    ("k8s://https://h:6443", {"spark.executor.instances": "2"}, 2, False),
])
def test_planned_slots(url, conf, count, exact):
    slots = planned_slots(parse_master(url), conf)
    assert (slots.count, slots.exact) == (count, exact)


@pytest.mark.parametrize("url,conf", [("spark://h:7077", {}), ("spark://h:7077", {"spark.executor.cores": "2"}),
                                      ("yarn", {"spark.executor.cores": "2"}), ("k8s://h", {})])
def test_cluster_slots_unknown_until_spark_says(url, conf):
    assert planned_slots(parse_master(url), conf) is None
    check_planned_slots(parse_master(url), conf, 100)  # left to the live check


def test_slot_message_names_what_spark_offers():
    with pytest.raises(SparkSpecError) as e:
        check_planned_slots(parse_master("local[2]"), {"spark.task.cpus": "2"}, 2)
    assert str(e.value) == ("Spark master 'local[2]' offers 1 barrier task slot (2 cores of local[2] // "
                            "spark.task.cpus 2) but 2 replicas must run at once: give it more executor cores, "
                            "lower spark.task.cpus, or lower the workers")
    with pytest.raises(SparkSpecError, match=r"offers at most 4 barrier task slots \(spark.cores.max 8 // "
                                             r"spark.executor.cores 4 = 2 executor\(s\) x \(4 cores // "
                                             r"spark.task.cpus 2\)\) but 5 replicas"):
        check_planned_slots(parse_master("spark://h:7077"), {"spark.cores.max": "8", "spark.executor.cores": "4",
                                                             "spark.task.cpus": "2"}, 5)
    check_planned_slots(parse_master("local[4]"), {"spark.task.cpus": "2"}, 2)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_probe_names_an_unreachable_master_fast():
    port = _closed_port()
    t0 = time.monotonic()
    with pytest.raises(SparkSpecError) as e:
        probe_master(parse_master(f"spark://127.0.0.1:{port}"), timeout_s=2.0)
    assert time.monotonic() - t0 < 2.5
    assert str(e.value).startswith(f"Spark master 'spark://127.0.0.1:{port}' is unreachable (127.0.0.1:{port}: ")
    with socket.socket() as live:  # a standby that refuses and a master that answers: reachable
        live.bind(("127.0.0.1", 0))
        live.listen()
        probe_master(parse_master(f"spark://127.0.0.1:{port},127.0.0.1:{live.getsockname()[1]}"))
    probe_master(parse_master("local[2]"))
    probe_master(parse_master("yarn"))


@pytest.mark.parametrize("toml,needle", [
    ('[spark]\nmaster = "lokal[2]"\n[run]\nstrategies = ["spark_ps:adag"]\n',
     f"spark.master = 'lokal[2]': expected one of {MASTER_FORMS}"),
    ('[spark]\nconf = { "spark.task.cpus" = "0" }\n', "spark.task.cpus = '0': expected a positive integer"),
    ('[spark]\nconf = { "spark.executor.memory" = "lots" }\n', "spark.executor.memory = 'lots': expected a JVM size"),
    ('[spark]\nmaster = "local[1]"\nconf = { "spark.task.cpus" = "2" }\n', "more than the 1 core of one executor"),
])
def test_cli_exits_2_with_one_line_and_no_run_directory(tmp_path, toml, needle):
    cfg = tmp_path / "c.toml"
    cfg.write_text(toml)
    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["run", str(cfg), "--out", str(out)])
    assert res.exit_code == 2, (res.output, res.exception)
    assert res.output == f"distbench: error: {res.output.split('error: ', 1)[1]}" and res.output.count("\n") == 1
    assert needle in res.output and not out.exists()
