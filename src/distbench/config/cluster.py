"""The ``[cluster]`` section's values: ``host:slots`` entries, link rates in tc's units,
the emulated hosts' subnet, and the checks :func:`distbench.config.validate` runs.

Every error is one :class:`~distbench.config.ConfigError` line naming the key, the value
received and the expected form.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from distbench.contracts import ConfigError
from distbench.config.values import UNLIMITED, parse_rate  # noqa: F401 - rates are parsed with the config

HOST_FORM = re.compile(r"([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?):([0-9]+)")
"""``host:slots``: a host name or IPv4 address, a colon, a slot count."""
LAUNCHERS = ("ssh",)
MAX_EMULATED_HOSTS = 64  # interface names hold two digits of the host index


@dataclass
class EmulateConfig:
    """An emulated cluster on this machine (``[cluster] emulate = {...}``): one Linux
    network namespace per host, joined by a bridge, each link rate-limited
    (:mod:`distbench.cluster.emulated`; needs root).

    Attributes:
        hosts: emulated hosts (network namespaces), >= 1.
        slots: processes per host, >= 1.
        bandwidth: each host's link rate in tc units (``"100mbit"``, ``"1gbit"``,
            ``"500kbit"``, ``"64000bit"``) or ``"unlimited"``; a list sweeps the rates.
        subnet: private IPv4 network of the emulated hosts (the bridge takes the first
            address, host k the (k+2)-th); must not overlap a route or address of this machine.
        launcher: how processes start on the hosts: ``agent`` (``ip netns exec`` behind
            ssh's calling convention) or ``ssh`` (a real ``sshd`` per host, reached as
            real hosts are: keys made for the cluster and removed with it).
    """

    hosts: int = 2
    slots: int = 1
    bandwidth: str | list[str] = "unlimited"
    subnet: str = "10.231.0.0/24"
    launcher: str = "agent"


@dataclass
class ClusterConfig:
    """Where the workers run: this machine (the default), real hosts over ssh, or an
    emulated cluster (checked by :func:`distbench.config.cluster.check_cluster`).

    Attributes:
        hosts: real hosts as ``"host:slots"``, e.g. ``["node1:2", "node2:2"]``; empty =
            this machine only.
        launcher: how processes start on the hosts: ``ssh`` (the only one for real hosts).
        ssh_port: the hosts' ssh port.
        python: the interpreter on the hosts ("" = this one, ``sys.executable``).
        workdir: the working directory on the hosts ("" = the current directory).
        emulate: an emulated cluster instead of ``hosts`` (:class:`EmulateConfig`);
            ``None`` = none.
    """

    hosts: list[str] = field(default_factory=list)
    launcher: str = "ssh"
    ssh_port: int = 22
    python: str = ""
    workdir: str = ""
    emulate: EmulateConfig | None = None

    def total_slots(self) -> int:
        """Processes the cluster holds: the sum of the hosts' slots, or emulated hosts x
        slots; 0 when no cluster is configured (this machine only)."""

        return total_slots(self)


@dataclass(frozen=True)
class Host:
    """One host of ``cluster.hosts``: its ``name`` (as ssh and ``-H`` take it) and ``slots``
    (processes it runs)."""

    name: str
    slots: int


def parse_host(key: str, entry: str) -> Host:
    """Parse one ``"host:slots"`` entry.

    Args:
        key: the config key, for the message (e.g. ``cluster.hosts[1]``).
        entry: e.g. ``"node1:2"``.

    Returns:
        The :class:`Host`.

    Raises:
        ConfigError: no slots, zero slots, an empty or malformed host name.
    """
    m = HOST_FORM.fullmatch(entry.strip())
    if m is None:
        raise ConfigError(f'{key} = {entry!r}: expected "host:slots" (a host name or IPv4 address, a colon, '
                          'a slot count >= 1), e.g. "node1:2"')
    slots = int(m.group(2))
    if slots < 1:
        raise ConfigError(f'{key} = {entry!r}: the slot count must be >= 1 (processes on that host), e.g. '
                          f'"{m.group(1)}:1"; leave the host out to give it none')
    return Host(m.group(1), slots)


def parse_hosts(hosts: list[str], key: str = "cluster.hosts") -> list[Host]:
    """Parse a list of ``"host:slots"`` entries; each host may appear once.

    Raises:
        ConfigError: a bad entry (:func:`parse_host`) or a host listed twice.
    """
    out: list[Host] = []
    for i, entry in enumerate(hosts):
        h = parse_host(f"{key}[{i}]", entry)
        first = next((j for j, o in enumerate(out) if o.name == h.name), None)
        if first is not None:
            raise ConfigError(f"{key}: host {h.name!r} is listed twice ({hosts[first]!r} and {entry!r}): list each "
                              f'host once with all its slots, e.g. "{h.name}:{out[first].slots + h.slots}"')
        out.append(h)
    return out


def rates(cluster: ClusterConfig) -> list[str]:
    """The emulated link rates to sweep (``cluster.emulate.bandwidth`` as a list); empty
    when the cluster is not emulated."""
    if cluster.emulate is None:
        return []
    bw = cluster.emulate.bandwidth
    return list(bw) if isinstance(bw, list) else [bw]


def total_slots(cluster: ClusterConfig) -> int:
    """Processes the cluster holds: the sum of ``cluster.hosts``' slots, or emulated hosts x
    slots; 0 when neither is set (this machine only).

    Raises:
        ConfigError: a malformed ``cluster.hosts`` entry.
    """
    if cluster.emulate is not None:
        return cluster.emulate.hosts * cluster.emulate.slots
    return sum(h.slots for h in parse_hosts(cluster.hosts))


def parse_subnet(key: str, subnet: str, hosts: int) -> ipaddress.IPv4Network:
    """The emulated hosts' network: a private IPv4 network with room for the gateway (the
    bridge, first address) and ``hosts`` hosts.

    Raises:
        ConfigError: not an IPv4 network in CIDR form, host bits set, not private
            (RFC 1918), loopback or link-local, or too small.
    """
    try:
        net = ipaddress.IPv4Network(subnet)
    except ValueError as e:
        raise ConfigError(f'{key} = {subnet!r}: expected an IPv4 network in CIDR form, e.g. "10.231.0.0/24" ({e})') \
            from None
    if not net.is_private or net.is_loopback or net.is_link_local or net.prefixlen < 8:
        raise ConfigError(f'{key} = {subnet!r}: expected a private network (within 10.0.0.0/8, 172.16.0.0/12 or '
                          '192.168.0.0/16, prefix /8 or longer) that nothing else on this machine uses, '
                          'e.g. "10.231.0.0/24"')
    if net.num_addresses - 3 < hosts:  # network, gateway and broadcast addresses
        raise ConfigError(f"{key} = {subnet!r} holds {max(0, net.num_addresses - 3)} host addresses, fewer than "
                          f"cluster.emulate.hosts = {hosts}: use a larger network, e.g. a /24")
    return net


EMULATED_LAUNCHERS = ("agent", "ssh")
"""``cluster.emulate.launcher`` values (:class:`distbench.cluster.emulated.EmulatedCluster`)."""


def check_cluster(cluster: ClusterConfig, workers: list[int]) -> None:
    """Check ``[cluster]`` and that every worker count fits into its slots.

    Args:
        cluster: the section.
        workers: ``run.workers``.

    Raises:
        ConfigError: an unknown launcher, a bad port, hosts and emulate both set, a bad
            ``host:slots`` entry or duplicate host, bad emulated hosts/slots/rates/subnet,
            or a worker count above the cluster's slots.
    """
    if cluster.launcher not in LAUNCHERS:
        raise ConfigError(f"cluster.launcher = {cluster.launcher!r}: expected ssh (the launcher for real hosts; "
                          "an emulated cluster uses its own agent)")
    if not 1 <= cluster.ssh_port <= 65535:
        raise ConfigError(f"cluster.ssh_port = {cluster.ssh_port!r}: expected a TCP port in 1..65535")
    for key in ("python", "workdir"):
        value = getattr(cluster, key)
        if value != value.strip() or "\n" in value:
            raise ConfigError(f"cluster.{key} = {value!r}: expected a path without surrounding spaces or newlines")
    em = cluster.emulate
    if em is not None and cluster.hosts:
        raise ConfigError(f"cluster.hosts = {cluster.hosts!r} and cluster.emulate are both set: use real hosts or "
                          "an emulated cluster, not both")
    hosts = parse_hosts(cluster.hosts)
    if em is not None:
        if not 1 <= em.hosts <= MAX_EMULATED_HOSTS:
            raise ConfigError(f"cluster.emulate.hosts = {em.hosts!r}: expected 1..{MAX_EMULATED_HOSTS} emulated hosts")
        if em.slots < 1:
            raise ConfigError(f"cluster.emulate.slots = {em.slots!r}: expected >= 1 processes per emulated host")
        values = rates(cluster)
        if not values:
            raise ConfigError('cluster.emulate.bandwidth = []: give at least one rate, e.g. "1gbit" or '
                              '["100mbit", "1gbit", "unlimited"]')
        seen: dict[int | None, str] = {}
        for i, r in enumerate(values):
            key = "cluster.emulate.bandwidth" + (f"[{i}]" if isinstance(em.bandwidth, list) else "")
            bits = parse_rate(key, r)
            if bits in seen:  # one sweep point twice: its records would read as repeats
                raise ConfigError(f"{key} = {r!r} is the same rate as {seen[bits]!r}: list each rate once "
                                  "(--repeats runs a configuration more than once)")
            seen[bits] = r
        parse_subnet("cluster.emulate.subnet", em.subnet, em.hosts)
        if em.launcher not in EMULATED_LAUNCHERS:
            raise ConfigError(f"cluster.emulate.launcher = {em.launcher!r}: expected one of "
                              f"{', '.join(EMULATED_LAUNCHERS)} (agent: ip netns exec behind ssh's calling convention; "
                              "ssh: a real sshd on every emulated host)")
    slots = total_slots(cluster)
    where = (f"cluster.emulate = {em.hosts} host{'s' * (em.hosts != 1)} x {em.slots} slot{'s' * (em.slots != 1)}"
             if em is not None else "cluster.hosts = " + ", ".join(f"{h.name}:{h.slots}" for h in hosts))
    for n in workers:
        if slots and n > slots:
            raise ConfigError(f"run.workers = {n} exceeds the {slots} slot{'s' * (slots != 1)} of the cluster "
                              f"({where}): lower run.workers or add hosts or slots")
