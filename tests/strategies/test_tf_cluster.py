"""TF_CONFIG validation (exact messages), the task it describes, and the cluster probes."""

from __future__ import annotations

import json
import socket

import pytest

from distbench.config import ConfigError
from distbench.launch.tfconfig import (TFTask, accepts_connections, join_failure, parse_tf_config,
                                             silent_peers, tf_config)

W2 = {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}
EXAMPLE = '{"cluster": {"worker": ["host1:2222", "host2:2222"]}, "task": {"type": "worker", "index": 0}}'
ADDR = 'expected "host:port" with a non-empty host and a port 1..65535'
INDEX = "expected an integer 0..1 (this host's position in cluster.worker), written without quotes"


def tc(**kw: object) -> str:
    d: dict[str, object] = {"cluster": W2, "task": {"type": "worker", "index": 0}}
    d.update(kw)
    return json.dumps(d)


@pytest.mark.parametrize("raw,message", [
    (None, f"TF_CONFIG is not set: expected JSON like {EXAMPLE} ('distbench worker tf'); export it on every host "
           "with that host's task"),
    ("  ", f"TF_CONFIG = '  ': expected JSON like {EXAMPLE} ('distbench worker tf'); export it on every host "
           "with that host's task"),
    ("{", 'TF_CONFIG = "{" is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1)); '
          f"expected JSON like {EXAMPLE}; quote it in single quotes in the shell"),
    ("[1]", f"TF_CONFIG = [1]: expected a JSON object like {EXAMPLE}"),
    (tc(clster=1), "TF_CONFIG has unknown key(s) 'clster': expected only cluster, task, environment, rpc_layer; "
                   "remove them or fix their spelling"),
    (tc(cluster=None), 'TF_CONFIG cluster = null: expected an object of job name -> address list, e.g. '
                       '{"worker": ["host1:2222", "host2:2222"]}'),
    (tc(cluster={}), 'TF_CONFIG cluster = {}: expected an object of job name -> address list, e.g. '
                     '{"worker": ["host1:2222", "host2:2222"]}'),
    (tc(cluster={"ps": ["h:1"], "worker": ["h:2"]}),
     "TF_CONFIG cluster has job 'ps': 'distbench worker tf' accepts jobs chief, worker; remove it or fix its name"),
    (tc(cluster={"worker": []}), 'TF_CONFIG cluster.worker = []: expected a non-empty list of "host:port" strings, '
                                 'e.g. ["host1:2222", "host2:2222"]'),
    (tc(cluster={"worker": "h:1"}), 'TF_CONFIG cluster.worker = "h:1": expected a non-empty list of "host:port" '
                                    'strings, e.g. ["host1:2222", "host2:2222"]'),
    (tc(cluster={"worker": ["h:1", 5]}), f'TF_CONFIG cluster.worker[1] = 5: {ADDR} (a number, not a string), '
                                         'e.g. "host1:2222"'),
    (tc(cluster={"worker": ["h"]}), f'TF_CONFIG cluster.worker[0] = "h": {ADDR} (no \':port\'), e.g. "host1:2222"'),
    (tc(cluster={"worker": [" :1"]}), f'TF_CONFIG cluster.worker[0] = " :1": {ADDR} (no host), e.g. "host1:2222"'),
    (tc(cluster={"worker": ["h:0"]}), f"TF_CONFIG cluster.worker[0] = \"h:0\": {ADDR} (port '0' is not an integer "
                                      '1..65535), e.g. "host1:2222"'),
    (tc(cluster={"worker": ["h:65536"]}), f"TF_CONFIG cluster.worker[0] = \"h:65536\": {ADDR} (port '65536' is not "
                                          'an integer 1..65535), e.g. "host1:2222"'),
    (tc(cluster={"worker": ["h:+1"]}), f"TF_CONFIG cluster.worker[0] = \"h:+1\": {ADDR} (port '+1' is not an "
                                       'integer 1..65535), e.g. "host1:2222"'),
    (tc(cluster={"worker": ["h:"]}), f"TF_CONFIG cluster.worker[0] = \"h:\": {ADDR} (port '' is not an integer "
                                     '1..65535), e.g. "host1:2222"'),
    (tc(cluster={"chief": ["h:1"], "worker": ["h:1"]}),
     "TF_CONFIG cluster lists 'h:1' twice (chief[0] and worker[0]): every task needs its own address; give each a "
     "different port or host"),
    (tc(cluster={"chief": ["h:1", "h:2"], "worker": ["h:3"]}),
     "TF_CONFIG cluster.chief lists 2 addresses: expected one chief; move the others to cluster.worker"),
    (tc(task=[0]), "TF_CONFIG task = [0]: expected an object like {\"type\": \"worker\", \"index\": 0} naming this "
                   "host's task"),
    (tc(task={"type": "worker", "index": 0, "trial": 1}),
     "TF_CONFIG task has unknown key(s) 'trial': expected only type and index; remove them or fix their spelling"),
    (tc(task={"index": 0}), "TF_CONFIG task.type is missing: 'distbench worker tf' runs a task of type 'worker' or "
                            "'chief'; set task.type to one of them"),
    (tc(task={"type": "ps", "index": 0}), "TF_CONFIG task.type = \"ps\": 'distbench worker tf' runs a task of type "
                                          "'worker' or 'chief'; set task.type to one of them"),
    (tc(task={"type": "chief", "index": 0}), "TF_CONFIG task.type = 'chief' but the cluster has no 'chief' job (it "
                                             "has worker); add cluster.chief or fix task.type"),
    (tc(task={"type": "worker"}), f"TF_CONFIG task.index is missing: {INDEX}"),
    (tc(task={"type": "worker", "index": "1"}), f'TF_CONFIG task.index = "1" (a string): {INDEX}'),
    (tc(task={"type": "worker", "index": True}), f"TF_CONFIG task.index = true (a boolean): {INDEX}"),
    (tc(task={"type": "worker", "index": 1.0}), f"TF_CONFIG task.index = 1.0 (a number with a fraction): {INDEX}"),
    (tc(task={"type": "worker", "index": 2}), "TF_CONFIG task.index = 2: expected 0..1 (cluster.worker lists 2 "
                                              "addresses); set it to this host's position in cluster.worker"),
    (tc(task={"type": "worker", "index": -1}), "TF_CONFIG task.index = -1: expected 0..1 (cluster.worker lists 2 "
                                               "addresses); set it to this host's position in cluster.worker"),
    (tc(rpc_layer=""), "TF_CONFIG rpc_layer = \"\": expected a non-empty string (e.g. 'grpc') or no rpc_layer key"),
    (tc(environment=None), "TF_CONFIG environment = null: expected a non-empty string (e.g. 'cloud') or no "
                           "environment key"),
])
def test_each_bad_tf_config_names_its_problem(raw, message):
    with pytest.raises(ConfigError) as e:
        parse_tf_config(raw, "worker tf")
    assert str(e.value) == message
    assert "\n" not in str(e.value)


def test_tf_server_entry_accepts_ps_and_refuses_chief_tasks():
    cluster = {"chief": ["h:1"], "worker": ["h:2"], "ps": ["h:3"]}
    assert parse_tf_config(tf_config(cluster, "ps", 0), "worker tf-server") == TFTask(cluster, "ps", 0)
    with pytest.raises(ConfigError, match=r"^TF_CONFIG task.type = \"chief\": 'distbench worker tf-server' runs a "
                                          r"task of type 'worker' or 'ps'; set task.type to one of them$"):
        parse_tf_config(tf_config(cluster, "chief", 0), "worker tf-server")
    with pytest.raises(ConfigError, match=r"^TF_CONFIG cluster has job 'ps': 'distbench worker tf' accepts jobs"):
        parse_tf_config(tf_config(cluster, "worker", 0), "worker tf")


def test_good_configs_and_the_task_they_describe():
    t = parse_tf_config(tc(task={"type": "worker", "index": 1}, environment="cloud"))
    assert t == TFTask(W2, "worker", 1, "grpc")
    assert (t.name, t.address, t.replicas, t.rank) == ("worker 1", "127.0.0.1:2", 2, 1)
    assert t.peers() == [("worker 0", "127.0.0.1:1")]
    assert parse_tf_config(t.to_json()) == t  # what 'worker tf' hands to its TensorFlow child
    cluster = {"chief": ["[::1]:7"], "worker": ["a:65535", "b:1"]}
    c = parse_tf_config(json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}, "rpc_layer": "grpc+x"}))
    assert (c.rank, c.replicas, c.rpc_layer) == (1, 3, "grpc+x")  # the chief is rank 0, as in TensorFlow
    assert parse_tf_config(c.to_json()) == c
    assert parse_tf_config(tf_config(cluster, "chief", 0)).rank == 0


def test_probes_tell_a_listening_peer_from_a_missing_one():
    with socket.socket() as listening, socket.socket() as closed:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        closed.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        up, down = (f"127.0.0.1:{s.getsockname()[1]}" for s in (listening, closed))
        task = TFTask({"worker": ["127.0.0.1:9", up, down]}, "worker", 0)
        assert accepts_connections(up) and not accepts_connections(down)
        assert silent_peers(task, timeout_s=1.0) == [("worker 2", down)]
    assert join_failure(task, 5, [("worker 2", down)]) == (
        f"worker 0: the TensorFlow cluster did not form within 5 s: worker 2 ({down}) never joined (nothing accepts "
        "connections there); start it with the same cluster in TF_CONFIG, or raise --join-timeout if still starting")
    assert join_failure(task, 7.5, []) == (
        "worker 0: the TensorFlow cluster did not form within 7.5 s: every peer accepts connections but the cluster "
        "did not form; check that every task runs with the same cluster in TF_CONFIG, or raise --join-timeout")
