"""``distbench cluster up|down|status`` and ``distbench env --cluster``: the command-line
side of :mod:`distbench.cluster` (the ``distbench`` group adds :data:`cluster_group`).

``up`` builds a persistent emulated cluster and returns (it stays until ``down``;
``bandwidth RATE`` reshapes its links);
``down`` removes distbench's own namespaces, veths and bridges (persistent clusters,
clusters whose owner died, names no state file claims; ``--all`` also those of running
sweeps); ``status`` lists them. A sweep's own emulated clusters are temporary.
"""

from __future__ import annotations

import json
import sys

import click

from distbench.config import ConfigError
from distbench.entrypoints import user_errors


def _require_root() -> None:
    from distbench.cluster import netns
    from distbench.cluster.emulated import ClusterUnavailable

    if not netns.has_net_admin():
        raise ClusterUnavailable(netns.NEEDS_ROOT)


@click.group("cluster")
def cluster_group() -> None:
    """Emulated clusters on this machine: one network namespace per host, rate-limited
    links (needs root; latency and loss are not emulated)."""


@cluster_group.command("up")
@click.option("--hosts", type=int, help="Emulated hosts [default: the config's, else 2].")
@click.option("--slots", type=int, help="Processes per host [default: the config's, else 1].")
@click.option("--bandwidth", help="Each link's rate in tc units (e.g. 100mbit, 1gbit) or 'unlimited' "
                                  "[default: the config's first rate, else unlimited].")
@click.option("--subnet", help="Private IPv4 network of the hosts [default: the config's, else 10.231.0.0/24].")
@click.option("--launcher", type=click.Choice(["agent", "ssh"]),
              help="How processes start on the hosts: agent (ip netns exec) or ssh (an sshd on each host) "
                   "[default: the config's, else agent].")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="Read [cluster] emulate from this config file; the flags override it.")
@user_errors
def up(hosts: int | None, slots: int | None, bandwidth: str | None, subnet: str | None,
       launcher: str | None, config_file: str | None) -> None:
    """Build a persistent emulated cluster and print how to launch on it; it stays until
    'distbench cluster down'."""
    from distbench import config as config_mod
    from distbench.cluster.emulated import EmulatedCluster
    from distbench.config.cluster import MAX_EMULATED_HOSTS

    cfg = config_mod.load(config_file) if config_file else None
    if cfg is not None and cfg.cluster.hosts:
        raise ConfigError(f"{config_file}: [cluster] lists real hosts (cluster.hosts); 'cluster up' builds an "
                          "emulated cluster: give it a config with [cluster] emulate, or no --config")
    em = (cfg.cluster.emulate if cfg is not None else None) or config_mod.EmulateConfig()
    for flag, v, lo, hi in (("--hosts", hosts, 1, MAX_EMULATED_HOSTS), ("--slots", slots, 1, 1024)):
        if v is not None and not lo <= v <= hi:
            raise ConfigError(f"{flag} {v}: expected {lo}..{hi}")
    rate = bandwidth or (em.bandwidth[0] if isinstance(em.bandwidth, list) else em.bandwidth)
    _require_root()
    cluster = EmulatedCluster(hosts or em.hosts, slots or em.slots, rate, subnet or em.subnet,
                              persistent=True, launcher=launcher or em.launcher).create()
    for line in cluster.describe():
        click.echo(line)
    click.echo("remove it with: distbench cluster down")


@cluster_group.command("bandwidth")
@click.argument("rate")
@click.option("--id", "cluster_id", help="The cluster (default: the only persistent one).")
@user_errors
def bandwidth(rate: str, cluster_id: str | None) -> None:
    """Reshape every link of a persistent emulated cluster to RATE (tc units, e.g. 100mbit,
    or 'unlimited')."""
    from distbench.cluster.emulated import EmulatedCluster, live_clusters
    from distbench.config.cluster import parse_rate

    parse_rate("RATE", rate)
    _require_root()
    ups = [s for s in live_clusters() if s.persistent and cluster_id in (None, s.id)]
    if len(ups) != 1:
        have = ", ".join(s.id for s in live_clusters() if s.persistent) or "none"
        raise ConfigError(f"{'--id ' + cluster_id if cluster_id else 'bandwidth'}: expected exactly one persistent "
                          f"emulated cluster (persistent clusters: {have}); start one with 'distbench cluster up' "
                          "or pass --id")
    EmulatedCluster.attach(ups[0]).set_bandwidth(rate)
    click.echo(f"emulated cluster {ups[0].id}: every link now {rate}")


@cluster_group.command("down")
@click.option("--all", "everything", is_flag=True,
              help="Also remove the clusters of running sweeps (they fail).")
@user_errors
def down(everything: bool) -> None:
    """Remove distbench's emulated clusters on this machine: persistent ones, those whose
    owner died, and any distbench-named namespace, veth or bridge no state file claims.
    Clusters of running sweeps are kept unless --all."""
    from distbench.cluster import netns
    from distbench.cluster.emulated import live_clusters

    _require_root()
    lines = netns.cleanup_leftovers(live=everything, persistent=True)
    for line in lines:
        click.echo(line)
    kept = live_clusters()
    for st in kept:
        click.echo(f"kept cluster {st.id}: {st.owner_text()} (--all removes it)")
    if not lines and not kept:
        click.echo("no distbench emulated cluster on this machine")
    if any("still present" in line for line in lines):
        sys.exit(1)


@cluster_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@user_errors
def status(as_json: bool) -> None:
    """List distbench's emulated clusters on this machine and any stray distbench names."""
    from dataclasses import asdict

    from distbench.cluster import netns
    from distbench.cluster.emulated import describe, sshd_down

    states = netns.read_states()
    ns_now, links_now = set(netns.existing_namespaces()), set(netns.existing_links())
    claimed = {n for s in states for n in [*s.namespaces, *s.links, s.bridge]}
    stray = sorted((ns_now | links_now) - claimed)
    if as_json:
        click.echo(json.dumps({"clusters": [{**asdict(s), "owner_alive": s.owner_alive(),
                                             "missing": [n for n in s.namespaces if n not in ns_now],
                                             "sshd_down": sshd_down(s)}
                                            for s in states], "stray": stray}, indent=2))
        return
    for st in states:
        for line in describe(st):
            click.echo(line)
        missing = [n for n in st.namespaces if n not in ns_now]
        if missing:
            click.echo(f"  missing: {', '.join(missing)} (remove the rest with: distbench cluster down)")
        if sshd_down(st):
            click.echo(f"  sshd not running on: {', '.join(sshd_down(st))} (nothing can start there; bring the "
                       "cluster down and up again)")
    if stray:
        click.echo(f"stray (no state file; distbench cluster down removes them): {', '.join(stray)}")
    if not states and not stray:
        click.echo("no distbench emulated cluster on this machine")


def env_cluster(config_file: str, as_json: bool, timeout_s: float) -> int:
    """``distbench env --cluster CFG``: check every host of the config's ``[cluster]``,
    print one line per host (problems each on their own line), return the exit status
    (0 all ready, 1 a problem).

    Raises:
        ConfigError: a bad config, no hosts, an emulated cluster that cannot be built here.
    """
    from distbench import config as config_mod
    from distbench.cluster.hostcheck import check_cluster_hosts

    cfg = config_mod.load(config_file)
    what, checks = check_cluster_hosts(cfg, timeout_s)
    if as_json:
        click.echo(json.dumps({"checked": what, "hosts": [{"host": c.host, "ok": not c.problems,
                                                           "problems": c.problems, "info": c.info}
                                                          for c in checks]}, indent=2))
    else:
        click.echo(f"cluster: {what}")
        for c in checks:
            if c.problems:
                for p in c.problems:
                    click.echo(f"  problem: {p}")
                continue
            v = c.info.get("versions", {})
            pkgs = ", ".join(f"{k} {v[k]}" for k in v if v[k])
            click.echo(f"  {c.host}: ok: Python {c.info.get('python')}, {pkgs}; binds TCP port {c.info.get('port')}")
    return 1 if any(c.problems for c in checks) else 0
