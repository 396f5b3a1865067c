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


def test_a_process_on_a_real_host_starts_over_ssh_with_a_terminal_and_the_forwarded_environment():
    pl = Placement("ssh", ["node1", "node2"], [1, 1], "launcher", python="/py", workdir="/w d", ssh_port=2222)
    env = {"TF_CONFIG": '{"a": 1}', "TF_ENABLE_ONEDNN_OPTS": "0", "SPARK_LOCAL_IP": "node2", "HOME": "/root",
           "PYSPARK_PYTHON": "/py"}
    argv = pl.wrap(1, ["/py", "-m", "x"], env)
    # -tt: ending the local ssh hangs the remote process up (a Spark worker ran on, holding its port)
    assert argv[:7] == ["ssh", "-tt", "-o", "BatchMode=yes", "-p", "2222", "node2"]
    assert argv[7] == ("cd '/w d' && env PYSPARK_PYTHON=/py SPARK_LOCAL_IP=node2 'TF_CONFIG={\"a\": 1}' "
                       "TF_ENABLE_ONEDNN_OPTS=0 /py -m x")  # the kernel settings too; not HOME
    assert pl.describe({"worker 1": 1})["cluster_launcher"] == "ssh"
    assert "cluster_launcher" not in Placement().describe({"worker 0": 0})
