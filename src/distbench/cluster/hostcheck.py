"""``distbench env --cluster cfg.toml``: check every host of ``[cluster]`` before a sweep.

Each host runs a small probe with the configured interpreter in the configured working
directory, through ssh (real hosts: ``BatchMode``, a connect timeout, and a bound on the
whole call) or through the agent (emulated hosts), all hosts at once. The probe prints
one JSON line: its Python and package versions (read from package metadata, nothing
heavy is imported), its network namespace, and whether it can bind the port the
parameter server will use (``ps.port``, or any port when that is 0). Every problem is one
line naming the host: unreachable (with ssh's reason), no answer in time, a failed
``cd``/interpreter, a version that differs from this machine's, a port in use.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from distbench.config import ExperimentConfig

COMPARED = ("distbench", "tensorflow", "keras", "horovod")
"""Packages whose versions must match this machine's on every host."""
MARK = "DISTBENCH-HOSTCHECK "
PROBE = r"""
import importlib.metadata as md, json, os, platform, socket, sys
out = {"python": platform.python_version(), "executable": sys.executable, "cwd": os.getcwd(), "versions": {}}
try:
    out["netns"] = os.readlink("/proc/self/ns/net")
except OSError:
    out["netns"] = None
for name in sys.argv[2:]:
    try:
        out["versions"][name] = md.version(name)
    except md.PackageNotFoundError:
        out["versions"][name] = None
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try:
    s.bind(("", int(sys.argv[1])))
    out["port"], out["port_error"] = s.getsockname()[1], None
except OSError as e:
    out["port"], out["port_error"] = int(sys.argv[1]), e.strerror or str(e)
finally:
    s.close()
print("%s" + json.dumps(out), flush=True)
""" % MARK
CONNECT_TIMEOUT_S = 5


@dataclass
class HostCheck:
    """What one host answered.

    Attributes:
        host: the host as configured (name or address).
        problems: one line each (empty: the host is ready).
        info: the probe's answer (versions, python, netns, port), empty when none came.
    """

    host: str
    problems: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)


def local_versions() -> dict[str, str | None]:
    """This machine's versions of :data:`COMPARED` and Python, as the probe reports them."""
    import importlib.metadata as md

    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in COMPARED:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def probe_command(python: str, workdir: str, port: int) -> str:
    """The shell string each host runs: ``cd WORKDIR && PYTHON -c PROBE PORT PACKAGES...``."""
    words = [python, "-c", PROBE, str(port), *COMPARED]
    return f"cd {shlex.quote(workdir)} && " + " ".join(shlex.quote(w) for w in words)


def ssh_argv(host: str, port: int, command: str, ssh: str = "ssh") -> list[str]:
    """ssh to a real host without prompts (``BatchMode``) and with a connect timeout
    (``ssh``: the client, e.g. an emulated cluster's, :attr:`~distbench.cluster.emulated.EmulatedCluster.agent`)."""
    return [ssh, "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}", "-p", str(port), host, command]


def judge(host: str, rc: int | None, out: str, err: str, local: dict[str, str | None], how: str,
          timeout_s: float, ps_port: int) -> HostCheck:
    """Turn one probe's exit status and output into a :class:`HostCheck`.

    Args:
        host: the host.
        rc: exit status, ``None`` when it timed out.
        out, err: its output.
        local: :func:`local_versions`.
        how: how it was reached, for messages (``ssh port 22``, ``the agent``).
        timeout_s: the bound, for the message.
        ps_port: the port probed (0 = any).
    """
    chk = HostCheck(host)
    last = next((line.strip() for line in reversed(err.strip().splitlines()) if line.strip()), "")
    if rc is None:
        chk.problems.append(f"{host}: no answer within {timeout_s:g} s over {how}")
        return chk
    line = next((ln for ln in out.splitlines() if ln.startswith(MARK)), None)
    if rc == 255 and line is None:
        chk.problems.append(f"{host}: unreachable over {how}: {last or 'exit 255'}")
        return chk
    if rc != 0 or line is None:
        chk.problems.append(f"{host}: the probe failed (exit {rc}): {last or out.strip()[-200:] or 'no output'}")
        return chk
    chk.info = info = json.loads(line[len(MARK):])
    there = {"python": info.get("python"), **info.get("versions", {})}
    for name, here in local.items():
        if there.get(name) != here:
            chk.problems.append(f"{host}: {name} {there.get(name) or 'missing'} there, {here or 'missing'} here")
    if info.get("port_error"):
        what = f"port {ps_port}" if ps_port else "a TCP port"
        chk.problems.append(f"{host}: cannot bind {what}: {info['port_error']}")
    return chk


def _run(argv: list[str], timeout_s: float) -> tuple[int | None, str, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, "", ""
    except OSError as e:
        return 255, "", f"cannot start {argv[0]}: {e.strerror or e}"
    return p.returncode, p.stdout, p.stderr


def check_hosts(targets: list[tuple[str, list[str]]], how: str, timeout_s: float, ps_port: int) -> list[HostCheck]:
    """Run each ``(host, argv)`` probe at once, each bounded by ``timeout_s``, and judge them."""
    local = local_versions()
    with ThreadPoolExecutor(max_workers=min(32, len(targets)) or 1) as pool:
        results = list(pool.map(lambda t: _run(t[1], timeout_s), targets))
    return [judge(h, rc, out, err, local, how, timeout_s, ps_port) for (h, _), (rc, out, err) in zip(targets, results)]


def check_cluster_hosts(cfg: ExperimentConfig, timeout_s: float = 30.0) -> tuple[str, list[HostCheck]]:
    """Check every host of ``cfg.cluster``: real hosts over ssh, emulated ones through the
    agent or their sshd (a persistent emulated cluster on the same subnet is used, with a
    problem saying that ``distbench run`` refuses the config while it holds the subnet;
    else one is built for the check and removed).

    Returns:
        ``(what was checked, one HostCheck per host)``.

    Raises:
        ConfigError: ``[cluster]`` names no hosts; the emulated cluster cannot be built here.
    """
    from distbench.config.cluster import parse_hosts
    from distbench.config import ConfigError

    cl = cfg.cluster
    python = cl.python or sys.executable
    workdir = cl.workdir or os.getcwd()
    command = probe_command(python, workdir, cfg.ps.port)
    if cl.emulate is None:
        hosts = parse_hosts(cl.hosts)
        if not hosts:
            raise ConfigError("env --cluster: the config's [cluster] has no hosts and no emulate table: add e.g. "
                              'hosts = ["node1:2", "node2:2"] or emulate = { hosts = 2 }')
        how = f"ssh port {cl.ssh_port}"
        targets = [(h.name, ssh_argv(h.name, cl.ssh_port, command)) for h in hosts]
        return (f"{len(hosts)} host{'s' * (len(hosts) != 1)} over ssh (port {cl.ssh_port}), {python} in {workdir}",
                check_hosts(targets, how, timeout_s, cfg.ps.port))
    from distbench.cluster import netns
    from distbench.cluster.emulated import ClusterUnavailable, EmulatedCluster, live_clusters

    if not netns.has_net_admin():  # the agent enters namespaces: root even for a cluster that is up
        raise ClusterUnavailable(netns.NEEDS_ROOT)
    up = next((s for s in live_clusters() if s.persistent and s.subnet == cl.emulate.subnet), None)
    cluster = EmulatedCluster.attach(up) if up else EmulatedCluster.from_config(cl).create()
    try:
        ssh = cluster.launcher == "ssh"
        targets = [(a, ssh_argv(a, 22, command, str(cluster.agent)) if ssh else [str(cluster.agent), a, command])
                   for a in cluster.addresses]
        via = "over ssh (an sshd on each host)" if ssh else "through the agent"
        what = (f"{len(targets)} emulated hosts of cluster {cluster.id} "
                f"({'persistent' if up else 'built for this check'}) {via}, {python} in {workdir}")
        checks = check_hosts(targets, "ssh port 22" if ssh else "the agent", timeout_s, cfg.ps.port)
        if up is not None:  # what distbench run would meet: it builds its own cluster, never uses this one
            em = cl.emulate
            differ = [f"{k} {getattr(em, k)!r} (the cluster's: {v!r})" for k, v in
                      (("hosts", len(up.namespaces)), ("slots", up.slots), ("launcher", up.launcher))
                      if getattr(em, k) != v]
            checks[0].problems.append(
                f"persistent cluster {up.id} holds subnet {up.subnet}, so 'distbench run' with this config is refused "
                "while it is up (a sweep builds its own cluster): distbench cluster down, or set "
                "cluster.emulate.subnet" + (f"; it differs from the config: {', '.join(differ)}" if differ else ""))
        here = os.readlink("/proc/self/ns/net")
        for chk in checks:
            if chk.info and chk.info.get("netns") == here:
                chk.problems.append(f"{chk.host}: ran in this machine's network namespace, not the emulated host's")
        return what, checks
    finally:
        if not up:
            cluster.close()
