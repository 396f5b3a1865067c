"""An emulated cluster on this machine: one Linux network namespace per host, a bridge
joining them to the root namespace, and a rate limit on every link.

Layout (``id`` is 6 hex digits, ``k`` the host index, ``S`` the subnet)::

    root namespace: bridge dbn-<id>, address S.1 (the launcher, e.g. mpirun, reaches every host)
      ├─ veth dbn-<id>-v0  <->  namespace dbn-<id>-0: interface dbn-<id>, address S.2, lo up
      └─ veth dbn-<id>-v1  <->  namespace dbn-<id>-1: interface dbn-<id>, address S.3, lo up

The hosts' interface carries the bridge's name, so one interface name (for Gloo's
``HOROVOD_GLOO_IFACE``, ``horovodrun --network-interface``) is right on the launcher and
on every host; Open MPI takes the subnet (``btl_tcp_if_include``/``oob_tcp_if_include``).
The namespaces have no default route: they reach the subnet only. Each veth carries a
``tbf`` qdisc on both ends, so both directions of each host's link run at the rate (a
star: hosts sending to one host share its link). Latency and loss are not emulated
(no ``netem``).

Commands run "on" host k through :meth:`EmulatedCluster.wrap` (``ip netns exec``) or
through the generated agent (:mod:`distbench.cluster.agent`), which Open MPI takes as
its rsh agent and ``horovodrun`` as ``ssh`` on ``PATH``. With ``launcher = "ssh"`` every
host runs a real OpenSSH ``sshd`` on its address instead, and the same two entry points
are OpenSSH's client with the cluster's own keys and ``ssh_config`` (its hosts only):
every launch then goes through ssh as on real hosts (:meth:`EmulatedCluster._start_sshd`).
"""

from __future__ import annotations

import ipaddress
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import distbench
from distbench.cluster import netns
from distbench.cluster.netns import PREFIX, ClusterError, State, run
from distbench.config.cluster import MAX_EMULATED_HOSTS, UNLIMITED, parse_rate, parse_subnet
from distbench.config import ClusterConfig, ConfigError, EmulateConfig

DEFAULT_SUBNET = EmulateConfig.subnet
AGENT = "distbench-agent"
SSHD = "/usr/sbin/sshd"  # Debian's openssh-server (make setup installs it)
SSHD_READY_S = 15.0  # for every host's sshd to listen
TBF_LATENCY = "50ms"  # longest a packet may wait in the bucket's queue
_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class ClusterUnavailable(ConfigError):
    """This machine cannot build the emulated cluster the configuration asks for (no root,
    no ``ip``/``tc``, or the kernel refuses): exit 2 with the reason."""


EMULATED_VETH_BPS = 2e9
"""Bytes/s one TCP stream reaches over this machine's unshaped emulated bridge (1.9-2.1 GB/s
measured, docs/cluster.md): an emulated link cannot run faster, and the bytes a full token
bucket lets through cross at this rate, not at once."""


def tbf_burst_bytes(bits: int) -> int:
    """The token bucket of a link shaped to ``bits`` bit/s, bytes: 4 ms at the rate, at least
    64 KiB (a whole TSO/GSO segment, so no packet is split or stalls the bucket). A full
    bucket lets that many bytes through at the veth's own speed, not at the rate (the cost
    model charges only what exceeds it on an emulated link)."""
    return max(64 * 1024, bits // 8 // 250)


def tbf_args(bits: int) -> list[str]:
    """``tc qdisc replace ... root`` arguments shaping to ``bits`` bit/s: the bucket of
    :func:`tbf_burst_bytes`; packets wait in its queue for at most :data:`TBF_LATENCY`."""
    return ["tbf", "rate", f"{bits}bit", "burst", str(tbf_burst_bytes(bits)), "latency", TBF_LATENCY]


def hosts_text(st: State, k: int) -> str:
    """Host ``k``'s ``/etc/hosts`` (``ip netns exec`` mounts ``/etc/netns/<ns>/hosts`` over
    it): this machine's entries, but its hostname resolves to the host's own address, as
    on a real host (Gloo binds to the hostname's address where no interface is named:
    Horovod 0.28.1's process-set contexts do so), and every namespace name to its host."""
    me = socket.gethostname()
    lines = [f"# distbench emulated cluster {st.id}, host {k}"]
    try:
        for line in Path("/etc/hosts").read_text().splitlines():
            words = line.split("#", 1)[0].split()
            names = [w for w in words[1:] if w != me]
            if names:
                lines.append(" ".join([words[0], *names]))
    except OSError:
        lines.append("127.0.0.1 localhost")
    lines.append(f"{st.addresses[k]} {me}")
    lines += [f"{a} {ns}" for a, ns in zip(st.addresses, st.namespaces)]
    return "\n".join(lines) + "\n"


def subnet_conflict(net: ipaddress.IPv4Network) -> str | None:
    """The route or address of this machine's root namespace that ``net`` overlaps (the
    default route excepted), or ``None``."""
    routes = json.loads(run(["ip", "-4", "-j", "route", "show", "table", "all"]).stdout or "[]")
    for r in routes:
        dst = r.get("dst", "default")
        try:
            other = ipaddress.IPv4Network(dst, strict=False)
        except ValueError:
            continue
        if other.prefixlen and other.overlaps(net):
            return f"route {dst} dev {r.get('dev', '?')}"
    for link in json.loads(run(["ip", "-4", "-j", "addr", "show"]).stdout or "[]"):
        for a in link.get("addr_info", []):
            other = ipaddress.IPv4Network(f"{a['local']}/{a['prefixlen']}", strict=False)
            if other.overlaps(net):
                return f"address {a['local']}/{a['prefixlen']} on {link.get('ifname', '?')}"
    return None


def require_free_subnet(net: ipaddress.IPv4Network) -> None:
    """Raise unless ``net`` is free on this machine (:func:`subnet_conflict`).

    Raises:
        ConfigError: naming what overlaps it (a route, an address, or the emulated cluster,
            e.g. a persistent one, whose bridge holds it) and how to choose another.
    """
    conflict = subnet_conflict(net)
    if conflict:
        owner = next((s for s in netns.read_states() if s.bridge in conflict), None)
        whose = f" (emulated cluster {owner.id}, {owner.owner_text()})" if owner else ""
        down = "; or remove it: distbench cluster down" if owner is not None and owner.persistent else ""
        raise ConfigError(f"emulated subnet {net} overlaps {conflict}{whose} on this machine: set "
                          'cluster.emulate.subnet (distbench cluster up: --subnet) to an unused private network, '
                          f'e.g. "10.232.0.0/24"{down}')


def require_available() -> None:
    """Raise unless an emulated cluster can be built here (:func:`netns.available`).

    Raises:
        ClusterUnavailable: with the exact reason, e.g. ``unavailable: emulated cluster
            needs root (CAP_NET_ADMIN) to create network namespaces``.
    """
    ok, reason = netns.available()
    if not ok:
        raise ClusterUnavailable(reason)


def agent_script(state_file: Path) -> str:
    """The agent executable of one cluster: a ``/bin/sh`` script running
    :func:`distbench.cluster.agent.main` with this interpreter (isolated: the caller's
    ``PYTHONPATH`` is neither needed nor altered, it reaches the command unchanged)."""
    src = str(Path(distbench.__file__).resolve().parent.parent)
    code = "import sys; sys.path.insert(0, sys.argv.pop(1)); from distbench.cluster.agent import main; main()"
    return ("#!/bin/sh\n# distbench emulated cluster: run a command on one of its hosts, as ssh would\n"
            f"exec {shlex.quote(sys.executable)} -I -S -c {shlex.quote(code)} {shlex.quote(src)} "
            f"--state {shlex.quote(str(state_file))} \"$@\"\n")


def sshd_config(st: State, k: int, tmpdir: Path) -> str:
    """Host ``k``'s ``sshd_config``: listening on the host's address only, public-key
    authentication with the cluster's key alone (no password, no PAM), the cluster's own
    host key, and ``TMPDIR`` set for every session to the host's own directory (a real host
    has its own ``/tmp``; see :func:`distbench.cluster.agent.host_tmpdir`)."""
    d = Path(st.agent_dir)
    return "\n".join([
        f"# distbench emulated cluster {st.id}, host {k}",
        f"ListenAddress {st.addresses[k]}", "Port 22", f"HostKey {d / 'ssh_host_ed25519_key'}",
        f"AuthorizedKeysFile {d / 'authorized_keys'}", f"PidFile {d / f'sshd-{k}.pid'}",
        "PubkeyAuthentication yes", "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
        "PermitRootLogin prohibit-password", f"AllowUsers {_user()}",
        "StrictModes no",  # the keys live in distbench's state directory, not in ~/.ssh
        "MaxStartups 256", "MaxSessions 256",  # every rank of a launch connects at once
        "PrintMotd no", "PrintLastLog no", "X11Forwarding no", "AllowTcpForwarding no", "LogLevel ERROR",
        f"SetEnv TMPDIR={tmpdir}",
    ]) + "\n"


def ssh_config(st: State) -> str:
    """The ``ssh_config`` of the cluster's ``ssh`` (:attr:`EmulatedCluster.agent`): its key,
    its hosts' keys (strict checking, no prompt), and every other host refused before any
    connection (a ``ProxyCommand`` that names the cluster's hosts and fails), so nothing
    reaches beyond the cluster."""
    d = Path(st.agent_dir)
    names = " ".join([*st.addresses, *st.namespaces])
    return "\n".join([
        f"# distbench emulated cluster {st.id}: only its hosts are reachable",
        f"Host {names}", f"    User {_user()}", f"    IdentityFile {d / 'id_ed25519'}", "    IdentitiesOnly yes",
        f"    UserKnownHostsFile {d / 'known_hosts'}", "    GlobalKnownHostsFile /dev/null",
        "    StrictHostKeyChecking yes", "    BatchMode yes", "    ConnectTimeout 10", "    LogLevel ERROR",
        "Host * " + " ".join(f"!{n}" for n in names.split()), "    LogLevel QUIET",
        f"    ProxyCommand /bin/sh -c 'echo \"distbench: %h is not a host of emulated cluster {st.id} (its hosts: "
        f"{', '.join(st.addresses)}); its ssh reaches those only\" >&2; exit 255'",
    ]) + "\n"


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.geteuid()).pw_name


def ssh_script(st: State) -> str:
    """The cluster's ``ssh``: OpenSSH's client with :func:`ssh_config`."""
    ssh = shutil.which("ssh") or "/usr/bin/ssh"
    return (f"#!/bin/sh\n# distbench emulated cluster {st.id}: OpenSSH with this cluster's keys, its hosts only\n"
            f"exec {shlex.quote(ssh)} -F {shlex.quote(str(Path(st.agent_dir) / 'ssh_config'))} \"$@\"\n")


class EmulatedCluster:
    """A cluster of ``hosts`` network namespaces on this machine (a context manager).

    ``with EmulatedCluster(2, bandwidth="1gbit") as c:`` creates it; leaving the block,
    an exception, SIGTERM or SIGHUP (when no handler of the program's own is set; SIGINT
    raises KeyboardInterrupt anyway) remove everything, including processes still
    running in the namespaces. A SIGKILLed owner leaves a state file behind, which the
    next creation (or ``distbench cluster down``) uses to remove what it names.

    Args:
        hosts: emulated hosts, 1..64.
        slots: processes per host (for :meth:`hosts_arg`).
        bandwidth: each link's rate in tc units, or ``"unlimited"``.
        subnet: a private IPv4 network nothing on this machine uses.
        persistent: keep it after this process ends (``distbench cluster up``).
        launcher: ``agent`` (commands run through :mod:`distbench.cluster.agent`) or
            ``ssh``: an OpenSSH ``sshd`` in every host's namespace on its address, with a
            host key and a client key made for the cluster (in its state directory,
            removed with it), reached through :attr:`agent`, an ``ssh`` with the
            cluster's ``ssh_config`` (:func:`ssh_config`).

    Raises:
        ConfigError: bad hosts, slots, bandwidth, subnet or launcher.
    """

    def __init__(self, hosts: int = 2, slots: int = 1, bandwidth: str = UNLIMITED,
                 subnet: str = DEFAULT_SUBNET, persistent: bool = False, launcher: str = "agent") -> None:
        if not 1 <= hosts <= MAX_EMULATED_HOSTS:
            raise ConfigError(f"emulated hosts = {hosts}: expected 1..{MAX_EMULATED_HOSTS}")
        if slots < 1:
            raise ConfigError(f"emulated slots = {slots}: expected >= 1 processes per host")
        parse_rate("bandwidth", bandwidth)
        from distbench.config.cluster import EMULATED_LAUNCHERS

        if launcher not in EMULATED_LAUNCHERS:
            raise ConfigError(f"emulated launcher = {launcher!r}: expected one of {', '.join(EMULATED_LAUNCHERS)}")
        self.hosts, self.slots, self.persistent, self.launcher = hosts, slots, persistent, launcher
        self._sshd: list[subprocess.Popen[bytes]] = []
        self.net = parse_subnet("subnet", subnet, hosts)
        self.bandwidth = bandwidth
        self.state: State | None = None
        self._old_handlers: dict[int, Any] = {}

    @classmethod
    def from_config(cls, cluster: ClusterConfig, bandwidth: str | None = None,
                    persistent: bool = False) -> EmulatedCluster:
        """The cluster of ``[cluster] emulate`` at ``bandwidth`` (default: its first rate).

        Raises:
            ConfigError: the configuration has no ``emulate`` table.
        """
        em = cluster.emulate
        if em is None:
            raise ConfigError("[cluster] has no emulate table: add e.g. emulate = { hosts = 2, slots = 1, "
                              'bandwidth = "1gbit" }')
        first = em.bandwidth[0] if isinstance(em.bandwidth, list) else em.bandwidth
        return cls(em.hosts, em.slots, bandwidth or first, em.subnet, persistent, em.launcher)

    @classmethod
    def attach(cls, state: State) -> EmulatedCluster:
        """The live cluster a state file describes (e.g. a persistent one), to use or
        reshape; :meth:`close` on it removes it."""
        c = cls(len(state.namespaces), state.slots, state.bandwidth, state.subnet, state.persistent, state.launcher)
        c.state = state
        return c

    # -- what users of the cluster need -------------------------------------------------
    def _st(self) -> State:
        if self.state is None:
            raise ClusterError("the emulated cluster is not created: use it inside 'with EmulatedCluster(...)'")
        return self.state

    @property
    def id(self) -> str:
        """The cluster id (6 hex digits, in every name it created)."""
        return self._st().id

    @property
    def addresses(self) -> list[str]:
        """Host k's IPv4 address is ``addresses[k]``."""
        return list(self._st().addresses)

    @property
    def namespaces(self) -> list[str]:
        """Host k's network namespace is ``namespaces[k]``."""
        return list(self._st().namespaces)

    @property
    def gateway(self) -> str:
        """The bridge's address: the launcher's address as the hosts see it."""
        return self._st().gateway

    @property
    def subnet(self) -> str:
        """The hosts' network, e.g. ``10.231.0.0/24`` (Open MPI's ``*_tcp_if_include``)."""
        return str(self.net)

    @property
    def iface(self) -> str:
        """The interface name inside every namespace, also the bridge's name in the root
        namespace (Gloo's ``HOROVOD_GLOO_IFACE``, ``horovodrun --network-interface``)."""
        return self._st().bridge

    @property
    def agent(self) -> Path:
        """The remote-exec agent: ``AGENT [ssh options] HOST COMMAND...`` runs COMMAND on
        the host of that address or namespace name (Open MPI's ``plm_rsh_agent``); with the
        ``ssh`` launcher, OpenSSH's client with the cluster's ``ssh_config``."""
        return Path(self._st().agent_dir) / AGENT

    @property
    def ssh_bin_dir(self) -> Path:
        """A directory holding the agent as ``ssh``: first on ``PATH``, ``horovodrun``'s
        ssh calls run on the emulated hosts."""
        return Path(self._st().agent_dir) / "bin"

    def hosts_arg(self, slots: int | None = None) -> str:
        """The ``-H`` value of ``mpirun``/``horovodrun``, e.g. ``10.231.0.2:1,10.231.0.3:1``.

        Args:
            slots: per host (default: the cluster's).
        """
        return ",".join(f"{a}:{slots or self.slots}" for a in self.addresses)

    def wrap(self, k: int, argv: list[str]) -> list[str]:
        """``argv`` run on host ``k`` (``ip netns exec``; environment and working directory
        are kept, the program replaces ``ip``, so its pid is the process's).

        Raises:
            IndexError: no host ``k``.
        """
        ns = self.namespaces[k]
        return [netns.tool("ip") or "ip", "netns", "exec", ns, *argv]

    def mpirun_args(self) -> list[str]:
        """``mpirun`` options for this cluster: the agent as rsh agent (every daemon started
        from here, no tree spawn), and ranks talking over TCP only, on the hosts' subnet (the
        emulated hosts share this machine's memory: Open MPI's shared-memory transport
        would bypass the shaped links), and ``--leave-session-attached``: without it each
        host's ``orted`` daemonizes, and one that then cannot connect back to ``mpirun``
        exits where nobody sees it while ``mpirun`` waits for it forever; attached, its
        error reaches ``mpirun``'s output and ``mpirun`` fails within seconds ("ORTE was
        unable to reliably start one or more daemons")."""
        return ["--leave-session-attached",
                "--mca", "plm_rsh_agent", str(self.agent), "--mca", "plm_rsh_no_tree_spawn", "1",
                "--mca", "oob_tcp_if_include", self.subnet, "--mca", "btl", "tcp,self",
                "--mca", "btl_tcp_if_include", self.subnet]

    def ssh_env(self, env: dict[str, str] | None = None) -> dict[str, str]:
        """``env`` (default ``os.environ``) with :attr:`ssh_bin_dir` first on ``PATH``."""
        out = dict(os.environ if env is None else env)
        out["PATH"] = os.pathsep.join([str(self.ssh_bin_dir), *filter(None, out.get("PATH", "").split(os.pathsep))])
        return out

    def describe(self) -> list[str]:
        """Lines for people: hosts, addresses, rate, and how to launch on them."""
        return describe(self._st())

    # -- life cycle -----------------------------------------------------------------------
    def create(self) -> EmulatedCluster:
        """Build the cluster (after removing clusters of dead owners).

        Raises:
            ClusterUnavailable: no root, no ``ip``/``tc``, or the kernel refuses namespaces.
            ConfigError: the subnet overlaps a route or address of this machine.
            ClusterError: an ``ip``/``tc`` command failed (everything made is removed).
        """
        require_available()
        with netns.locked():
            netns.cleanup_leftovers()
            require_free_subnet(self.net)
            cid = netns.new_id()
            hosts = list(self.net.hosts())
            me = os.getpid()
            self.state = State(
                id=cid, owner_pid=None if self.persistent else me,
                owner_start=None if self.persistent else netns.process_start(me), persistent=self.persistent,
                subnet=str(self.net), gateway=str(hosts[0]), bridge=f"{PREFIX}{cid}",
                namespaces=[f"{PREFIX}{cid}-{k}" for k in range(self.hosts)],
                links=[f"{PREFIX}{cid}-v{k}" for k in range(self.hosts)],
                addresses=[str(hosts[k + 1]) for k in range(self.hosts)], slots=self.slots,
                bandwidth=UNLIMITED, agent_dir=str(netns.state_dir() / cid), launcher=self.launcher)
            self.state.write()  # before any name exists: a killed creation is still cleaned up
            try:
                self._build()
                self.set_bandwidth(self.bandwidth)
                self._write_agent()
                if self.launcher == "ssh":
                    self._start_sshd()
            except BaseException:
                netns.destroy(self.state)
                self._reap_sshd()
                self.state = None
                raise
        if not self.persistent:
            self._catch_signals()
        return self

    def _build(self) -> None:
        st = self._st()
        plen = self.net.prefixlen
        run(["ip", "link", "add", st.bridge, "type", "bridge", "nf_call_iptables", "0"])
        run(["ip", "addr", "add", f"{st.gateway}/{plen}", "dev", st.bridge])
        run(["ip", "link", "set", st.bridge, "up"])
        for ns, link, addr in zip(st.namespaces, st.links, st.addresses):
            run(["ip", "netns", "add", ns])
            run(["ip", "link", "add", link, "type", "veth", "peer", "name", st.bridge, "netns", ns])
            run(["ip", "link", "set", link, "master", st.bridge, "up"])
            run(["ip", "-n", ns, "addr", "add", f"{addr}/{plen}", "dev", st.bridge])
            run(["ip", "-n", ns, "link", "set", st.bridge, "up"])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
        for k, ns in enumerate(st.namespaces):
            d = netns.ETC_NETNS / ns
            d.mkdir(parents=True, exist_ok=True)
            (d / "hosts").write_text(hosts_text(st, k))

    def _write_agent(self) -> None:
        st = self._st()
        self.ssh_bin_dir.mkdir(parents=True, exist_ok=True)
        text = ssh_script(st) if self.launcher == "ssh" else agent_script(st.path)
        for p in (self.agent, self.ssh_bin_dir / "ssh"):
            p.write_text(text)
            p.chmod(0o755)

    def _start_sshd(self) -> None:
        """Make the cluster's keys and start an ``sshd`` on every host (in its namespace, on
        its address, port 22); wait until each accepts connections.

        Raises:
            ClusterUnavailable: no ``sshd`` or ``ssh-keygen`` here.
            ClusterError: a key could not be made, or an ``sshd`` did not listen in
                :data:`SSHD_READY_S` (its log's last line named).
        """
        from distbench.cluster.agent import host_tmpdir

        st = self._st()
        d = Path(st.agent_dir)
        sshd, keygen = shutil.which("sshd") or SSHD, shutil.which("ssh-keygen")
        if not os.path.exists(sshd) or not keygen or not shutil.which("ssh"):
            raise ClusterUnavailable('cluster.emulate.launcher = "ssh" needs OpenSSH (sshd, ssh, ssh-keygen): install '
                                     'openssh-server and openssh-client (make setup does), or use launcher = "agent"')
        for name, comment in (("id_ed25519", "client"), ("ssh_host_ed25519_key", "host")):
            run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", f"distbench emulated cluster {st.id} {comment}",
                 "-f", str(d / name)])
        (d / "authorized_keys").write_text((d / "id_ed25519.pub").read_text())
        host_key = " ".join((d / "ssh_host_ed25519_key.pub").read_text().split()[:2])
        (d / "known_hosts").write_text("".join(f"{a},{ns} {host_key}\n"
                                               for a, ns in zip(st.addresses, st.namespaces)))
        (d / "ssh_config").write_text(ssh_config(st))
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
        for k, ns in enumerate(st.namespaces):
            conf = d / f"sshd-{k}.conf"
            conf.write_text(sshd_config(st, k, host_tmpdir(st, ns)))
            with open(d / f"sshd-{k}.log", "ab") as log:
                self._sshd.append(subprocess.Popen(self.wrap(k, [sshd, "-D", "-e", "-f", str(conf)]),
                                                   stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                                   start_new_session=True))
        deadline = time.monotonic() + SSHD_READY_S
        for k, addr in enumerate(st.addresses):
            while True:
                try:
                    socket.create_connection((addr, 22), timeout=1.0).close()
                    break
                except OSError:
                    if self._sshd[k].poll() is not None or time.monotonic() > deadline:
                        tail = (d / f"sshd-{k}.log").read_text(errors="replace").strip().splitlines()
                        raise ClusterError(f"sshd on emulated host {addr} ({st.namespaces[k]}) did not listen on "
                                           f"port 22 within {SSHD_READY_S:g} s: {tail[-1] if tail else 'no output'} "
                                           f"(log: {d / f'sshd-{k}.log'})") from None
                    time.sleep(0.05)

    def _reap_sshd(self) -> None:
        """Collect the exit status of this process's ``sshd`` children (their namespaces'
        clean-up ended them)."""
        for p in self._sshd:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
        self._sshd.clear()

    def set_bandwidth(self, rate: str) -> None:
        """Shape every link (both ends of each veth) to ``rate`` (tc units);
        ``"unlimited"`` removes the shaping.

        Raises:
            ConfigError: a malformed rate.
            ClusterError: ``tc`` failed.
        """
        st = self._st()
        bits = parse_rate("bandwidth", rate)
        for ns, link in zip(st.namespaces, st.links):
            for where, dev in (([], link), (["-n", ns], st.bridge)):  # root end, host end
                if bits is None:
                    run(["tc", *where, "qdisc", "del", "dev", dev, "root"], check=False)  # none there: fine
                else:
                    run(["tc", *where, "qdisc", "replace", "dev", dev, "root", *tbf_args(bits)])
        self.bandwidth = st.bandwidth = rate
        st.write()

    def close(self) -> None:
        """Remove the cluster: processes in its namespaces, its links, namespaces, agent
        scripts and state file. Idempotent.

        Raises:
            ClusterError: something could not be removed (named; the state file stays, so
                the next creation or ``distbench cluster down`` retries).
        """
        self._restore_signals()
        if self.state is None:
            return
        problems = netns.destroy(self.state)
        self._reap_sshd()
        if problems:
            raise ClusterError(f"emulated cluster {self.state.id} not fully removed: " + "; ".join(problems))
        self.state = None

    def __enter__(self) -> EmulatedCluster:
        return self.create()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is None:
            self.close()
            return
        try:
            self.close()
        except ClusterError as e:  # do not hide the exception that ended the block
            print(f"distbench: warning: {e}", file=sys.stderr)

    def _catch_signals(self) -> None:
        """SIGTERM/SIGHUP with no handler of the program's own raise KeyboardInterrupt, so
        the ``with`` block unwinds and removes the cluster (only in the main thread)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in _SIGNALS:
            if signal.getsignal(sig) == signal.SIG_DFL:
                self._old_handlers[sig] = signal.signal(sig, _raise_interrupt)

    def _restore_signals(self) -> None:
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old)
        self._old_handlers.clear()


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def sshd_down(st: State) -> list[str]:
    """The addresses of the hosts of ``st`` whose ``sshd`` is not running (its pid file names
    no live process); empty for a cluster with the ``agent`` launcher."""
    if st.launcher != "ssh":
        return []
    down = []
    for k, addr in enumerate(st.addresses):
        try:
            alive = Path(f"/proc/{int((Path(st.agent_dir) / f'sshd-{k}.pid').read_text())}").exists()
        except (OSError, ValueError):
            alive = False
        if not alive:
            down.append(addr)
    return down


def describe(st: State) -> list[str]:
    """Lines describing the cluster of state ``st``: hosts and addresses, rate, owner, and
    the options to launch on it."""
    agent = Path(st.agent_dir) / AGENT
    rate = f"{st.bandwidth} per link" if st.bandwidth != UNLIMITED else "unlimited links"
    lines = [f"emulated cluster {st.id}: {len(st.namespaces)} hosts x {st.slots} slot{'s' * (st.slots != 1)}, {rate} "
             f"({netns.RATE_ONLY}); {st.owner_text()}"]
    lines += [f"  host {k}: {a} (namespace {ns})" for k, (a, ns) in enumerate(zip(st.addresses, st.namespaces))]
    if st.launcher == "ssh":
        lines.append(f"  an sshd on every host (port 22); {agent} is ssh with the cluster's key and ssh_config")
    hosts = ",".join(f"{a}:{st.slots}" for a in st.addresses)
    lines += [f"  interface {st.bridge} in every namespace; the bridge {st.bridge} has {st.gateway}",
              f"  run on host 0:  {agent} {st.addresses[0] if st.addresses else 'HOST'} COMMAND",
              f"  mpirun{' --allow-run-as-root' if os.geteuid() == 0 else ''} -H {hosts} "
              + " ".join(EmulatedCluster.attach(st).mpirun_args()) + " ...",
              f"  PATH={Path(st.agent_dir) / 'bin'}:$PATH horovodrun -H {hosts} --network-interface {st.bridge} ..."]
    return lines


def live_clusters() -> list[State]:
    """State of every emulated cluster whose owner runs or that is persistent."""
    return [s for s in netns.read_states() if s.persistent or s.owner_alive()]

