"""The remote-exec agent of the emulated cluster: ``ssh``'s calling convention, a network
namespace instead of a connection.

``distbench-agent [ssh options] HOST COMMAND...`` runs ``COMMAND`` on the emulated host
``HOST`` (its address or namespace name; a ``user@`` is ignored) as ssh would run it on
a real host: the words of ``COMMAND`` joined by spaces are one shell string, run with
``bash -c`` (``/bin/sh`` without bash), here with ``ip netns exec`` in the host's
namespace. Unlike ssh, the caller's environment and working directory are kept: on one
machine they are the right ones, except ``TMPDIR``, which is the host's own
(:func:`host_tmpdir`), as a real host's ``/tmp`` is. ssh options (``-o Key=value``, ``-p PORT``, ``-i FILE``,
``-x``, ``-T``...) may come before or after ``HOST``, as ssh allows; they are accepted
and ignored. The exit status is the command's, or 255 when the agent itself fails (an
unknown host, no command), as ssh's.

That makes it Open MPI's rsh agent (``mpirun --mca plm_rsh_agent AGENT``, which calls
``AGENT HOST orted ...``) and, named ``ssh`` first on ``PATH``, ``horovodrun``'s ssh
(``ssh -o PasswordAuthentication=no -o StrictHostKeyChecking=no HOST -p PORT 'cd DIR ;
CMD'``). :class:`~distbench.cluster.emulated.EmulatedCluster` writes a small script per
cluster that runs :func:`main` with ``--state FILE`` (that cluster's hosts only);
``python -m distbench.cluster.agent HOST COMMAND...`` looks the host up among every
live cluster. Only hosts of distbench's emulated clusters are reachable: anything else
is refused, never passed to a real ssh.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import NoReturn

from distbench.cluster import netns

WITH_VALUE = set("BbcDEeFIiJLlmOoPpQRSWw")
"""ssh options that take a value (``-p 22`` or ``-p22``)."""
FLAGS = set("46AaCfGgKkMNnqsTtVvXxYy")
"""ssh options that take none (they may be combined: ``-tt``, ``-xq``)."""
EXIT_AGENT = 255  # ssh's status for its own failures


class AgentError(ValueError):
    """The agent's own failure (bad arguments, unknown host): exit 255 with the message."""


def parse_ssh_args(args: list[str]) -> tuple[str, list[str]]:
    """Split an ssh command line into the host and the command words.

    Args:
        args: everything after the program name, e.g.
            ``["-o", "StrictHostKeyChecking=no", "10.231.0.2", "-p", "22", "cd /x ; true"]``.

    Returns:
        ``(host, command)``: the host with any ``user@`` removed, and the command words
        (empty when none was given).

    Raises:
        AgentError: no host, an unknown option, or an option missing its value.
    """
    host: str | None = None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            if host is None and i < len(args):
                host, i = args[i], i + 1
            break
        if a.startswith("-") and len(a) > 1:
            j = 1
            while j < len(a):
                c = a[j]
                if c in WITH_VALUE:
                    if j + 1 == len(a):  # the value is the next word
                        if i + 1 == len(args):
                            raise AgentError(f"option -{c} needs a value (as ssh's)")
                        i += 1
                    break
                if c not in FLAGS:
                    raise AgentError(f"unknown ssh option -{c} in {a!r}")
                j += 1
            i += 1
            continue
        if host is not None:  # the first word after the host starts the command
            break
        host, i = a, i + 1
    if host is None:
        raise AgentError("no host given: expected [ssh options] HOST COMMAND...")
    return host.rpartition("@")[2], args[i:]


def find_namespace(host: str, states: list[netns.State]) -> str:
    """The namespace of ``host`` (an address or a namespace name) among ``states``.

    Raises:
        AgentError: no such host, naming the hosts there are.
    """
    for st in states:
        if host in st.addresses:
            return st.namespaces[st.addresses.index(host)]
        if host in st.namespaces:
            return host
    known = ", ".join(a for st in states for a in st.addresses) or "none (no emulated cluster is up)"
    raise AgentError(f"{host!r} is not a host of a live distbench emulated cluster (hosts: {known}); "
                     "the agent reaches emulated hosts only")


def host_tmpdir(state: netns.State, ns: str) -> Path:
    """The temporary directory (``TMPDIR``) of the emulated host ``ns`` of ``state``:
    ``<agent_dir>/tmp-<k>``, created if missing, removed with the cluster.

    The namespaces share this machine's ``/tmp`` and hostname, so without it every
    host's Open MPI daemon would build its session directory in the same
    ``/tmp/ompi.<hostname>.<uid>/jf.<job family>/0/`` tree at the same moment; one daemon
    failed there ("A call to mkdir was unable to create the desired directory ... File
    exists", orte_init failed, or a segfault writing the shared hwloc topology file) in 7 of
    160 two-host launches (0 of 300 with this directory). A real host has its own ``/tmp``.

    Raises:
        AgentError: ``ns`` is not a namespace of ``state``; the directory cannot be made.
    """
    if ns not in state.namespaces:
        raise AgentError(f"{ns!r} is not a host of emulated cluster {state.id}")
    d = Path(state.agent_dir) / f"tmp-{state.namespaces.index(ns)}"
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        raise AgentError(f"cannot create the temporary directory {d} of host {ns}: {e.strerror}") from None
    return d


def exec_argv(ns: str, command: list[str]) -> list[str]:
    """``ip netns exec NS SHELL -c 'WORDS JOINED'``: what the agent executes."""
    shell = shutil.which("bash") or "/bin/sh"
    return [netns.tool("ip") or "ip", "netns", "exec", ns, shell, "-c", " ".join(command)]


def main(argv: list[str] | None = None) -> NoReturn:
    """Run the agent: ``[--state FILE] [ssh options] HOST COMMAND...`` (see the module).

    Replaces this process with ``ip netns exec``, so signals and the exit status are the
    command's; exits 255 with one line on stderr when the agent itself fails.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args[:1] == ["--state"]:
            if len(args) < 2:
                raise AgentError("--state needs the cluster's state file")
            states = [netns.State.read(Path(args[1]))]
            args = args[2:]
        else:
            states = [s for s in netns.read_states() if s.persistent or s.owner_alive()]
        host, command = parse_ssh_args(args)
        ns = find_namespace(host, states)
        if not command:
            raise AgentError(f"no command for {host}: an interactive shell is not supported")
        state = next(st for st in states if ns in st.namespaces)
        env = {**os.environ, "TMPDIR": str(host_tmpdir(state, ns))}
        argv_exec = exec_argv(ns, command)
        sys.stdout.flush()
        os.execve(argv_exec[0], argv_exec, env)
    except (AgentError, netns.ClusterError, OSError) as e:
        print(f"distbench-agent: {e}", file=sys.stderr, flush=True)
        sys.exit(EXIT_AGENT)


if __name__ == "__main__":
    main()
