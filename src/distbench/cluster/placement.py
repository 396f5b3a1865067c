"""Where a configuration's processes run: this machine, real hosts over ssh, or emulated hosts.

A strategy asks its :class:`Placement` "run this argv as process k" and gets the argv to
start (``wrap``), the address others reach process k at (``address``), the launchers'
``-H`` list and options (``hosts_arg``, ``mpirun_args``, ``horovodrun_args``), and the
address of the launching host as the workers see it (``driver``). Nothing else in a
strategy knows whether a host is real, emulated or this machine.

Process k goes to host ``k`` modulo the hosts, one slot after another: processes 0..s0-1
to host 0's ``s0`` slots, the next ``s1`` to host 1, ... (``mpirun -map-by slot``'s rule),
wrapping around when there are more processes than slots. Single-process strategies and
the launching side (the Spark driver, the parameter server of ``spark_ps``, ``tf_ps``'s
coordinator and ps tasks, ``mpi_ps``'s server rank) stay on the launching host.
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
from dataclasses import dataclass, field
from typing import Any

from distbench.config import ClusterConfig, ConfigError
from distbench.contracts import PlacementKind

CLUSTER_ID_ENV = "DISTBENCH_CLUSTER_ID"
"""The id of the emulated cluster of the sweep (set by ``distbench run`` for its children)."""
REMOTE_ENV = ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL", "PYTHONUNBUFFERED", "TF_CONFIG", "KERAS_BACKEND",
              "OMP_NUM_THREADS", "TF_ENABLE_ONEDNN_OPTS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
              "TF_XLA_FLAGS", "CUDA_VISIBLE_DEVICES", "JAVA_HOME", "SPARK_LOCAL_IP", "SPARK_NO_DAEMONIZE")
"""Variables a process started over ssh gets from the launching side (ssh passes none):
those of its own code and the kernel settings every configuration's processes share
(provenance's ``kernel_env``), and what a Spark standalone worker needs."""
REMOTE_PREFIXES = ("DISTBENCH_", "HOROVOD_", "PYSPARK_")


@dataclass
class Placement:
    """The hosts of a configuration's worker processes.

    Attributes:
        kind: a :class:`~distbench.contracts.PlacementKind`: ``local`` (this machine), ``ssh``
            (real hosts) or ``emulated``.
        hosts: the hosts' names or addresses, as ``-H`` and ssh take them.
        slots: processes per host, in the same order.
        driver: the launching host's address as the workers reach it (``127.0.0.1``; the
            bridge's address of an emulated cluster; this host's name on a real cluster).
        python: the interpreter on the hosts.
        workdir: the working directory on the hosts.
        ssh_port: the hosts' ssh port.
        cluster: the emulated cluster (``kind == "emulated"``).
    """

    kind: PlacementKind = PlacementKind.LOCAL
    hosts: list[str] = field(default_factory=lambda: ["localhost"])
    slots: list[int] = field(default_factory=lambda: [0])
    driver: str = "127.0.0.1"
    python: str = sys.executable
    workdir: str = ""
    ssh_port: int = 22
    cluster: Any = None

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_config(cls, cluster: ClusterConfig, env: dict[str, str] | None = None) -> "Placement":
        """The placement ``[cluster]`` describes: the sweep's emulated cluster (attached by
        :data:`CLUSTER_ID_ENV`), real hosts, or this machine.

        Raises:
            ConfigError: an emulated cluster is configured but none is running for this sweep.
        """
        env = dict(os.environ if env is None else env)
        python, workdir = cluster.python or sys.executable, cluster.workdir or os.getcwd()
        if cluster.emulate is not None:
            from distbench.cluster import netns
            from distbench.cluster.emulated import EmulatedCluster

            cid = env.get(CLUSTER_ID_ENV, "")
            state = next((s for s in netns.read_states() if s.id == cid), None)
            if state is None:
                raise ConfigError(f"[cluster] emulate is set but no emulated cluster {cid or '(none named)'} is "
                                  f"running for this sweep ({CLUSTER_ID_ENV}); run it through 'distbench run'")
            em = EmulatedCluster.attach(state)
            return cls(PlacementKind.EMULATED, em.addresses, [em.slots] * len(em.addresses), em.gateway, python,
                       workdir, cluster.ssh_port, em)
        if cluster.hosts:
            from distbench.config.cluster import parse_hosts

            hosts = parse_hosts(cluster.hosts)
            return cls(PlacementKind.SSH, [h.name for h in hosts], [h.slots for h in hosts], socket.getfqdn(),
                       python, workdir, cluster.ssh_port)
        return cls(python=sys.executable, workdir=os.getcwd())

    @property
    def is_local(self) -> bool:
        """Every process runs on this machine, in this network namespace."""
        return self.kind == PlacementKind.LOCAL

    # ---------------------------------------------------------------- placing processes
    def host_of(self, k: int) -> int:
        """The host index of process ``k`` (slots filled in order, wrapping around)."""
        if self.is_local:
            return 0
        total = sum(self.slots)
        k %= total
        for i, s in enumerate(self.slots):
            if k < s:
                return i
            k -= s
        return 0  # unreachable

    def address(self, k: int) -> str:
        """The address other processes reach process ``k`` at."""
        return "127.0.0.1" if self.is_local else self.hosts[self.host_of(k)]

    def wrap(self, k: int, argv: list[str], env: dict[str, str]) -> list[str]:
        """``argv`` (with ``env``) run as process ``k``: unchanged on this machine; in the
        host's namespace on an emulated cluster (environment and directory kept); over
        ssh on a real host, where the forwarded variables (:data:`REMOTE_ENV`, every
        ``DISTBENCH_*``/``HOROVOD_*``) are set in the remote command and the working
        directory is :attr:`workdir` (the emulated cluster's hosts with ``launcher = "ssh"``
        are reached the same way, through the cluster's own ``ssh``)."""
        if self.is_local:
            return argv
        if self.kind == PlacementKind.EMULATED and not self.over_ssh:
            return self.cluster.wrap(self.host_of(k), argv)
        exported = {k2: v for k2, v in env.items() if k2 in REMOTE_ENV or k2.startswith(REMOTE_PREFIXES)}
        remote = " ".join([f"cd {shlex.quote(self.workdir)} &&", "env",
                           *(shlex.quote(f"{k2}={v}") for k2, v in sorted(exported.items())),
                           *(shlex.quote(a) for a in argv)])
        ssh, port = (str(self.cluster.agent), 22) if self.kind == PlacementKind.EMULATED else ("ssh", self.ssh_port)
        # -tt: a terminal for the remote command, so that ending the local ssh (the
        # configuration's clean-up ends its process group) hangs it up and the remote
        # process gets SIGHUP; without one it ran on, holding its ports (a Spark worker)
        return [ssh, "-tt", "-o", "BatchMode=yes", "-p", str(port), self.hosts[self.host_of(k)], remote]

    @property
    def over_ssh(self) -> bool:
        """Processes on other hosts start through a real ``sshd``: real hosts, or an
        emulated cluster with ``launcher = "ssh"``."""
        return (self.kind == PlacementKind.SSH
                or (self.kind == PlacementKind.EMULATED and self.cluster.launcher == "ssh"))

    def hosts_arg(self, processes: int, driver_first: bool = False) -> str:
        """The ``-H`` value for ``processes`` processes (``localhost:N`` on this machine).

        Args:
            driver_first: put one slot of the launching host first (rank 0 there: the
                parameter server of ``mpi_ps``), then the hosts.
        """
        if self.is_local:
            return f"localhost:{processes}"
        entries = [f"{h}:{s}" for h, s in zip(self.hosts, self.slots)]
        return ",".join(([f"{self.driver}:1"] if driver_first else []) + entries)

    def mpirun_args(self) -> list[str]:
        """Extra ``mpirun`` options: an emulated cluster's (:meth:`EmulatedCluster.mpirun_args
        <distbench.cluster.emulated.EmulatedCluster.mpirun_args>`); on real hosts
        ``--leave-session-attached`` (a daemon that cannot reach ``mpirun`` back fails the
        job with its error instead of leaving ``mpirun`` waiting for it until the
        configuration's timeout) and, for an ssh port other than 22, ssh's ``-p``."""
        if self.kind == PlacementKind.EMULATED:
            return self.cluster.mpirun_args()
        if self.kind != PlacementKind.SSH:
            return []
        port = [] if self.ssh_port == 22 else ["--mca", "plm_rsh_args", f"-p {self.ssh_port}"]
        return ["--leave-session-attached", *port]

    def horovodrun_args(self, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        """Extra ``horovodrun`` options and its environment: an emulated cluster's network
        interface and its ``ssh`` (the agent) first on ``PATH``; a real cluster's ssh port."""
        if self.kind == PlacementKind.EMULATED:
            return ["--network-interface", self.cluster.iface], self.cluster.ssh_env(env)
        if self.kind == PlacementKind.SSH:
            return ["-p", str(self.ssh_port)], env
        return [], env

    def describe(self, processes: dict[str, int], driver: list[str] = (),
                 found: dict[str, str] | None = None) -> dict[str, Any]:
        """``details`` fields: ``cluster_hosts`` (the hosts the processes ran on; the record's
        top-level ``hosts``), ``placement`` (process name -> host), e.g.
        ``{"worker 1": "10.231.0.3"}``, ``cluster_kind``, ``cluster_launcher`` (``ssh``:
        started through an sshd; ``agent``: the emulated cluster's agent) off this
        machine and, emulated, ``cluster_id``.

        Args:
            processes: process name -> process index, placed by :meth:`host_of`.
            driver: processes on the launching host.
            found: process name -> where it reported it ran (a network namespace of an
                emulated host, or a host name), for processes a scheduler placed (Spark
                tasks); an emulated host's namespace is written as its address.
        """
        placement = {name: (self.address(k) if not self.is_local else "localhost") for name, k in processes.items()}
        for name, where in (found or {}).items():
            ns = list(getattr(self.cluster, "namespaces", []))
            placement[name] = self.hosts[ns.index(where)] if where in ns else where
        placement.update({name: (self.driver if not self.is_local else "localhost") for name in driver})
        hosts = sorted(set(placement.values())) if not self.is_local else [socket.gethostname()]
        out = {"cluster_hosts": hosts, "placement": placement, "cluster_kind": self.kind}
        if not self.is_local:
            out["cluster_launcher"] = "ssh" if self.over_ssh else "agent"
        if self.kind == PlacementKind.EMULATED:
            out["cluster_id"] = self.cluster.id
        return out
