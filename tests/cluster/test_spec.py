"""The [cluster] section: host:slots parsing, link rates, subnets, exclusivity and slots
versus workers; every error is one line, and the CLI turns it into exit status 2."""

from __future__ import annotations

import pytest

from distbench import config as config_mod
from distbench.config.cluster import Host, parse_host, parse_hosts, parse_rate, rates
from distbench.config import ConfigError
from tests.conftest import distbench


def load(cluster: dict, **sections: dict) -> config_mod.ExperimentConfig:
    return config_mod.from_dict({"cluster": cluster, **sections})


def test_hosts_parse_and_total_slots():
    assert parse_hosts(["node1:2", "10.0.0.7:3", "gpu-box.lan:1"]) == [
        Host("node1", 2), Host("10.0.0.7", 3), Host("gpu-box.lan", 1)]
    cfg = load({"hosts": ["node1:2", "node2:2"]})
    assert cfg.cluster.total_slots() == 4
    assert cfg.cluster.launcher == "ssh" and cfg.cluster.ssh_port == 22
    assert config_mod.ExperimentConfig().cluster.total_slots() == 0  # this machine only


def test_emulate_table_defaults_and_rates():
    cfg = load({"emulate": {"hosts": 3, "slots": 2, "bandwidth": ["100mbit", "1gbit", "unlimited"]}},
               run={"workers": [2, 4]})
    em = cfg.cluster.emulate
    assert (em.hosts, em.slots, em.subnet) == (3, 2, "10.231.0.0/24")
    assert cfg.cluster.total_slots() == 6
    assert rates(cfg.cluster) == ["100mbit", "1gbit", "unlimited"]
    assert rates(load({"emulate": {"bandwidth": "20mbit"}}).cluster) == ["20mbit"]
    assert rates(config_mod.ExperimentConfig().cluster) == []


def test_the_section_survives_the_json_round_trip_of_a_run_directory():
    cfg = load({"emulate": {"hosts": 2, "bandwidth": ["1gbit", "unlimited"]}})
    again = config_mod.from_dict(cfg.to_dict())
    assert again.cluster == cfg.cluster
    assert config_mod.from_dict(config_mod.ExperimentConfig().to_dict()).cluster.emulate is None


@pytest.mark.parametrize("rate,bits", [("20mbit", 20_000_000), ("1gbit", 10**9), ("1.5Mbit", 1_500_000),
                                       ("64000bit", 64000), ("500kbit", 500_000), ("unlimited", None)])
def test_rates_in_tc_units(rate, bits):
    assert parse_rate("bw", rate) == bits


@pytest.mark.parametrize("cluster,run,message", [
    ({"hosts": ["node1"]}, {}, 'cluster.hosts[0] = \'node1\': expected "host:slots" (a host name or IPv4 address, a '
                               'colon, a slot count >= 1), e.g. "node1:2"'),
    ({"hosts": ["node1:2", "node2:0"]}, {}, 'cluster.hosts[1] = \'node2:0\': the slot count must be >= 1 (processes on '
                                            'that host), e.g. "node2:1"; leave the host out to give it none'),
    ({"hosts": ["node1:2", "node1:1"]}, {}, "cluster.hosts: host 'node1' is listed twice ('node1:2' and 'node1:1'): "
                                            'list each host once with all its slots, e.g. "node1:3"'),
    ({"hosts": [":2"]}, {}, 'cluster.hosts[0] = \':2\': expected "host:slots"'),
    ({"hosts": [""]}, {}, 'cluster.hosts[0] = \'\': expected "host:slots"'),
    ({"hosts": ["node1:two"]}, {}, 'cluster.hosts[0] = \'node1:two\': expected "host:slots"'),
    ({"hosts": ["node1:2", "node2:1"]}, {"workers": [2, 4]},
     "run.workers = 4 exceeds the 3 slots of the cluster (cluster.hosts = node1:2, node2:1): lower run.workers or "
     "add hosts or slots"),
    ({"emulate": {"hosts": 2, "slots": 1}}, {"workers": [4]},
     "run.workers = 4 exceeds the 2 slots of the cluster (cluster.emulate = 2 hosts x 1 slot)"),
    ({"hosts": ["a:1"], "emulate": {"hosts": 2}}, {"workers": [1]},
     "cluster.hosts = ['a:1'] and cluster.emulate are both set: use real hosts or an emulated cluster, not both"),
    ({"launcher": "pdsh"}, {}, "cluster.launcher = 'pdsh': expected ssh"),
    ({"ssh_port": 0}, {}, "cluster.ssh_port = 0: expected a TCP port in 1..65535"),
    ({"emulate": {"bandwidth": "1gbyte"}}, {}, "cluster.emulate.bandwidth = '1gbyte': expected a link rate in tc's "
                                               "units (a positive number and bit, kbit, mbit or gbit)"),
    ({"emulate": {"bandwidth": ["1gbit", "0mbit"]}}, {}, "cluster.emulate.bandwidth[1] = '0mbit': expected a link rate"),
    ({"emulate": {"bandwidth": []}}, {}, "cluster.emulate.bandwidth = []: give at least one rate"),
    ({"emulate": {"bandwidth": ["1gbit", "1000mbit"]}}, {}, "cluster.emulate.bandwidth[1] = '1000mbit' is the same rate "
                                                            "as '1gbit': list each rate once"),
    ({"emulate": {"hosts": 0}}, {"workers": [1]}, "cluster.emulate.hosts = 0: expected 1..64 emulated hosts"),
    ({"emulate": {"slots": 0}}, {"workers": [1]}, "cluster.emulate.slots = 0: expected >= 1 processes per emulated host"),
    ({"emulate": {"subnet": "8.8.8.0/24"}}, {}, "cluster.emulate.subnet = '8.8.8.0/24': expected a private network"),
    ({"emulate": {"subnet": "10.1.2.3/24"}}, {}, "cluster.emulate.subnet = '10.1.2.3/24': expected an IPv4 network in "
                                                 "CIDR form"),
    ({"emulate": {"hosts": 8, "subnet": "10.1.2.0/29"}}, {"workers": [1]},
     "cluster.emulate.subnet = '10.1.2.0/29' holds 5 host addresses, fewer than cluster.emulate.hosts = 8"),
    ({"emulate": 3}, {}, "cluster.emulate = 3: expected a table with the keys hosts, slots, bandwidth, subnet"),
    ({"emulate": {"latency": "10ms"}}, {}, "unknown key 'cluster.emulate.latency' (value '10ms'); allowed keys in "
                                           "[cluster.emulate]: hosts, slots, bandwidth, subnet"),
    ({"hots": []}, {}, "unknown key 'cluster.hots'"),
])
def test_bad_cluster_specs_are_one_line_errors(cluster, run, message):
    with pytest.raises(ConfigError) as e:
        load(cluster, run=run)
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


def test_parse_host_strips_spaces_but_keeps_the_form_strict():
    assert parse_host("k", " node1:4 ") == Host("node1", 4)
    for bad in ("node1:", "node1:2:3", "user@node1:2", "node 1:2", "-node:1"):
        with pytest.raises(ConfigError, match='expected "host:slots"'):
            parse_host("k", bad)


@pytest.mark.parametrize("toml,message", [
    ('[cluster]\nhosts = ["node1"]\n', "cluster.hosts[0] = 'node1': expected \"host:slots\""),
    ('[cluster]\nhosts = ["node1:0"]\n', "cluster.hosts[0] = 'node1:0': the slot count must be >= 1"),
    ('[cluster]\nhosts = ["node1:1", "node1:1"]\n', "cluster.hosts: host 'node1' is listed twice"),
    ('[cluster]\nhosts = ["node1:1", "node2:1"]\n[run]\nworkers = [4]\n',
     "run.workers = 4 exceeds the 2 slots of the cluster"),
])
def test_the_cli_exits_2_with_one_line(tmp_path, toml, message):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(toml)
    for args in (["run", str(cfg), "--out", str(tmp_path / "run")], ["env", "--cluster", str(cfg)]):
        res = distbench(*args, timeout=120)
        assert res.returncode == 2, res.stderr
        assert res.stderr.startswith(f"distbench: error: {message}"), res.stderr
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert not (tmp_path / "run").exists()
