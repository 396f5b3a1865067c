"""Linux network-namespace plumbing of the emulated cluster: ``ip``/``tc`` commands, the
state files that record what each cluster created, its removal, and the probe.

Every name distbench creates starts with :data:`PREFIX` (namespaces ``dbn-<id>-<k>``,
the bridge ``dbn-<id>``, the root ends of the veth pairs ``dbn-<id>-v<k>``, each host's
``/etc/netns/dbn-<id>-<k>/hosts``). Before any
of them exists, the cluster's state file (``<state dir>/<id>.json``: the owner process,
whether it is persistent, every name) is written, so a cluster whose owner died, even by
SIGKILL, is found and removed by :func:`cleanup_leftovers`; so is any name with the
prefix that no state file claims. Creation, probing and clean-up hold one lock
(``<state dir>/.lock``), so they never see each other half done.

Only the link rate is emulated (``tc`` token bucket, ``tbf``); latency and loss are not
(they need ``netem``, missing on the machines distbench was verified on).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

from distbench.procinfo import current_namespace  # noqa: F401 - part of this module's API

PREFIX = "dbn-"
STATE_DIR_ENV = "DISTBENCH_NETNS_STATE_DIR"
RATE_ONLY = "only the link rate is emulated (tc tbf); latency and loss are not (no netem)"
CAP_NET_ADMIN = 12
ETC_NETNS = Path("/etc/netns")  # ip netns exec mounts /etc/netns/<ns>/* over /etc/*
NEEDS_ROOT = "unavailable: emulated cluster needs root (CAP_NET_ADMIN) to create network namespaces"
_lock_depth = 0
_lock_fd: int | None = None


class ClusterError(RuntimeError):
    """An ``ip`` or ``tc`` command of the emulated cluster failed; the message names the
    command and its error output."""


def tool(name: str) -> str | None:
    """The path of ``ip`` or ``tc``: on ``PATH``, else in ``/usr/sbin`` or ``/sbin`` (often
    missing from a non-login ``PATH``); ``None`` when absent."""
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.access(p, os.X_OK)),
                                      None)


def run(argv: list[str], check: bool = True, timeout_s: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run ``ip ...`` or ``tc ...`` (``argv[0]`` is the tool's name, resolved by :func:`tool`).

    Returns:
        The completed process (text output).

    Raises:
        ClusterError: the tool is missing, or ``check`` and the command failed or took
            longer than ``timeout_s``.
    """
    exe = tool(argv[0])
    if exe is None:
        raise ClusterError(f"unavailable: emulated cluster needs the '{argv[0]}' program (iproute2)")
    try:
        p = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ClusterError(f"'{' '.join(argv)}' did not finish in {timeout_s:g} s") from None
    if check and p.returncode != 0:
        err = " ".join((p.stderr or p.stdout).split())
        raise ClusterError(f"'{' '.join(argv)}' failed (exit {p.returncode}): {err}")
    return p


def has_net_admin() -> bool:
    """True when this process may create network namespaces: ``CAP_NET_ADMIN`` in its
    effective capabilities (``/proc/self/status``; root in a container started without it
    has not), or, where ``/proc`` does not say, root."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_NET_ADMIN & 1)
    except OSError:
        pass
    return os.geteuid() == 0


def state_dir() -> Path:
    """Where the state files live: ``$DISTBENCH_NETNS_STATE_DIR``, else
    ``/run/distbench-netns`` (root), else ``$XDG_RUNTIME_DIR/distbench-netns``, else
    ``/tmp/distbench-netns-<uid>``; created if missing."""
    env = os.environ.get(STATE_DIR_ENV)
    if env:
        d = Path(env)
    elif os.geteuid() == 0:
        d = Path("/run/distbench-netns")
    elif os.environ.get("XDG_RUNTIME_DIR"):
        d = Path(os.environ["XDG_RUNTIME_DIR"]) / "distbench-netns"
    else:
        d = Path(f"/tmp/distbench-netns-{os.getuid()}")
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    return d


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """Hold the state directory's lock (re-entrant within this process): creation,
    probing and clean-up of emulated clusters never interleave across processes."""
    global _lock_depth, _lock_fd
    if _lock_depth == 0:
        _lock_fd = os.open(state_dir() / ".lock", os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(_lock_fd, fcntl.LOCK_EX)
    _lock_depth += 1
    try:
        yield
    finally:
        _lock_depth -= 1
        if _lock_depth == 0 and _lock_fd is not None:
            os.close(_lock_fd)  # releases the flock
            _lock_fd = None


def process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (``/proc/<pid>/stat`` field 22, clock ticks since
    boot), which tells a live owner from a later process that reuses its pid; ``None``
    when there is no such process or it has exited and awaits its parent (a zombie: a
    SIGKILLed sweep is dead before its parent reaps it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields[19]


@dataclass
class State:
    """What one emulated cluster created, as recorded in its state file.

    Attributes:
        id: short random id in every name (6 hex digits).
        owner_pid, owner_start: the process that removes it on exit (``None`` when
            persistent) and its start time (:func:`process_start`).
        persistent: made by ``distbench cluster up``; removed only by ``distbench cluster down``.
        subnet: the emulated hosts' network (CIDR).
        gateway: the bridge's address (the launching side, in the root namespace).
        bridge: the bridge's name; the hosts' interface has the same name.
        namespaces: host k's namespace is ``namespaces[k]``.
        links: the root ends of the veth pairs (host k's is ``links[k]``).
        addresses: host k's address is ``addresses[k]``.
        slots: processes per host.
        bandwidth: the current link rate (tc units or ``unlimited``).
        agent_dir: the directory of the generated agent scripts (and, with the ``ssh``
            launcher, the cluster's keys, ``ssh_config``, and each host's ``sshd`` config and log).
        created_unix: creation time, Unix seconds.
        launcher: ``agent`` or ``ssh`` (a real ``sshd`` in every host's namespace).
    """

    id: str
    owner_pid: int | None
    owner_start: str | None
    persistent: bool
    subnet: str
    gateway: str
    bridge: str
    namespaces: list[str]
    links: list[str]
    addresses: list[str]
    slots: int
    bandwidth: str
    agent_dir: str
    created_unix: float = field(default_factory=time.time)
    launcher: str = "agent"

    @property
    def path(self) -> Path:
        """The state file."""
        return state_dir() / f"{self.id}.json"

    def owner_alive(self) -> bool:
        """True while the owner process runs (a persistent cluster has none: False)."""
        return self.owner_pid is not None and process_start(self.owner_pid) == self.owner_start

    def owner_text(self) -> str:
        """``persistent``, ``owner pid N (running)`` or ``owner pid N (dead)``."""
        if self.persistent:
            return "persistent (distbench cluster up)"
        return f"owner pid {self.owner_pid} ({'running' if self.owner_alive() else 'dead'})"

    def write(self) -> None:
        """Write the state file atomically."""
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(self.path)

    @classmethod
    def read(cls, path: Path) -> State:
        """Read a state file.

        Raises:
            ClusterError: unreadable or not a state file.
        """
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError) as e:
            raise ClusterError(f"{path}: not a distbench emulated-cluster state file ({e})") from None


def new_id() -> str:
    """A fresh cluster id (6 hex digits) that no state file uses."""
    while True:
        cid = secrets.token_hex(3)
        if not (state_dir() / f"{cid}.json").exists():
            return cid


def read_states() -> list[State]:
    """Every readable state file in :func:`state_dir`, oldest first (unreadable ones are skipped)."""
    out = []
    for p in state_dir().glob("*.json"):
        with contextlib.suppress(ClusterError):
            out.append(State.read(p))
    return sorted(out, key=lambda s: s.created_unix)


def existing_namespaces() -> list[str]:
    """Network namespaces whose name starts with :data:`PREFIX`."""
    out = run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(PREFIX)]


def existing_etc_dirs() -> list[str]:
    """Namespaces with a ``/etc/netns/<name>`` directory whose name starts with :data:`PREFIX`."""
    try:
        return sorted(p.name for p in ETC_NETNS.iterdir() if p.name.startswith(PREFIX))
    except OSError:
        return []


def existing_links() -> list[str]:
    """Links in this (the root) namespace whose name starts with :data:`PREFIX`."""
    out = run(["ip", "-o", "link", "show"], check=False).stdout
    names = (m.group(1) for m in re.finditer(r"^\d+:\s+([^:@\s]+)", out, re.MULTILINE))
    return [n for n in names if n.startswith(PREFIX)]


def namespace_pids(ns: str) -> list[int]:
    """Processes running in namespace ``ns``."""
    out = run(["ip", "netns", "pids", ns], check=False).stdout
    return [int(t) for t in out.split() if t.isdigit()]


def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (dead, waiting for its parent to reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def kill_namespace_processes(ns: str, grace_s: float = 2.0) -> None:
    """SIGTERM every process in namespace ``ns`` (all started through the cluster), wait up
    to ``grace_s``, SIGKILL those left: a process inside would keep the namespace alive."""
    pids = namespace_pids(ns)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while pids and time.monotonic() < deadline:
            time.sleep(0.05)
            pids = [p for p in pids if _running(p)]
        if not pids:
            return


def remove_names(namespaces: list[str], links: list[str]) -> list[str]:
    """Delete ``links`` (a veth's root end takes its namespace end with it; the bridge
    last) and ``namespaces``, after ending the processes inside; missing ones are fine.

    Returns:
        One line per name still present afterwards (empty when all are gone).
    """
    present_ns = set(existing_namespaces())
    for ns in namespaces:
        if ns in present_ns:
            kill_namespace_processes(ns)
    for link in sorted(links, key=lambda n: n.count("-") == 1):  # veths before the bridge
        run(["ip", "link", "del", link], check=False)
    for ns in namespaces:
        run(["ip", "netns", "del", ns], check=False)
        shutil.rmtree(ETC_NETNS / ns, ignore_errors=True)
    with contextlib.suppress(OSError):
        ETC_NETNS.rmdir()  # only when empty: made for distbench's hosts files
    left_ns, left_links = set(existing_namespaces()), set(existing_links())
    return ([f"namespace {n} is still present" for n in namespaces if n in left_ns]
            + [f"link {n} is still present" for n in links if n in left_links])


def destroy(state: State) -> list[str]:
    """Remove everything ``state`` names, its agent scripts, and (when nothing is left) its
    state file.

    Returns:
        One line per name still present (the state file is kept for a later clean-up).
    """
    with locked():
        problems = remove_names(state.namespaces, [*state.links, state.bridge])
        if not problems:
            shutil.rmtree(state.agent_dir, ignore_errors=True)
            state.path.unlink(missing_ok=True)
        return problems


def cleanup_leftovers(live: bool = False, persistent: bool = False) -> list[str]:
    """Remove emulated clusters whose owner process is dead, and every name with
    :data:`PREFIX` that no state file claims.

    Args:
        live: also remove clusters whose owner still runs.
        persistent: also remove persistent clusters (``distbench cluster up``).

    Returns:
        One line per removed cluster or name, and per problem.
    """
    lines: list[str] = []
    with locked():
        states = read_states()
        kept: list[State] = []
        for st in states:
            if (st.persistent and not persistent) or (st.owner_alive() and not live):
                kept.append(st)
                continue
            owner = st.owner_text()
            problems = destroy(st)
            lines += [f"cluster {st.id}: {p}" for p in problems] or [
                f"removed cluster {st.id} ({owner}; {len(st.namespaces)} namespaces, subnet {st.subnet})"]
        claimed_ns = {n for s in kept for n in s.namespaces}
        claimed_links = {n for s in kept for n in [*s.links, s.bridge]}
        stray_ns = sorted({*existing_namespaces(), *existing_etc_dirs()} - claimed_ns)
        stray_links = [n for n in existing_links() if n not in claimed_links]
        if stray_ns or stray_links:
            problems = remove_names(stray_ns, stray_links)
            lines += problems or [f"removed {', '.join(stray_ns + stray_links)} (no state file claimed them)"]
    return lines


def reap_dead_clusters() -> list[str]:
    """What ``distbench run`` and ``distbench env`` do first: remove the emulated clusters
    whose owner died (a SIGKILLed sweep: namespaces, links, bridge and every process
    started in them, the agents included), with :func:`cleanup_leftovers`. Clusters of
    running sweeps and persistent ones are kept. Without root, or with no state file of a
    dead owner, nothing is done (no subprocess: a state-directory listing).

    Returns:
        :func:`cleanup_leftovers`'s lines (empty when nothing was left).
    """
    if os.geteuid() != 0:
        return []
    if not any(not st.persistent and not st.owner_alive() for st in read_states()):
        return []
    return cleanup_leftovers()


def _probe() -> tuple[bool, str]:
    """Create a namespace, a veth pair into it and a tbf qdisc, then remove them (under a
    state file, so a killed probe leaves nothing a clean-up misses)."""
    cid = new_id()
    st = State(cid, os.getpid(), process_start(os.getpid()), False, "", "", f"{PREFIX}{cid}",
               [f"{PREFIX}{cid}-0"], [f"{PREFIX}{cid}-v0"], [], 0, "", str(state_dir() / cid))
    st.write()
    try:
        run(["ip", "netns", "add", st.namespaces[0]])
        run(["ip", "link", "add", st.links[0], "type", "veth", "peer", "name", st.bridge, "netns", st.namespaces[0]])
        run(["tc", "qdisc", "add", "dev", st.links[0], "root", "tbf", "rate", "1mbit", "burst", "32kbit",
             "latency", "50ms"])
        return True, f"network namespaces, veth pairs and tc tbf work; {RATE_ONLY}"
    except ClusterError as e:
        return False, f"unavailable: emulated cluster cannot be built here: {e}"
    finally:
        destroy(st)


def available() -> tuple[bool, str]:
    """Whether an emulated cluster can be built here, and why not.

    Checks root (or ``CAP_NET_ADMIN``), the ``ip`` and ``tc`` programs, and then really
    creates (and removes) a namespace, a veth pair and a ``tbf`` qdisc.

    Returns:
        ``(ok, reason)``; e.g. ``(False, "unavailable: emulated cluster needs root
        (CAP_NET_ADMIN) to create network namespaces")``.
    """
    if not has_net_admin():
        return False, NEEDS_ROOT
    for name in ("ip", "tc"):
        if tool(name) is None:
            return False, f"unavailable: emulated cluster needs the '{name}' program (iproute2)"
    with locked():
        return _probe()
