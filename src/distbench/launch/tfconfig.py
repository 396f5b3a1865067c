"""``TF_CONFIG``: building it, validating it in pure Python, and probing the cluster it names.

TensorFlow reads ``TF_CONFIG`` (``{"cluster": {job: ["host:port", ...]}, "task": {"type":
job, "index": i}}``) only once it starts its server, and a bad one fails late (seconds to
minutes of start-up) with a long traceback, or never fails: an index past the end of a
job, or a task whose peers never start, waits without end. :func:`parse_tf_config`
checks the whole shape before TensorFlow is imported, and names the first problem in one
line (what was received, what was expected, how to fix it).

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import json
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from distbench.config import ConfigError

TOP_LEVEL_KEYS = ("cluster", "task", "environment", "rpc_layer")
TASK_KEYS = ("type", "index")
# Which task types each entry point runs, and which jobs its cluster may hold.
ENTRY_POINTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "worker tf": (("worker", "chief"), ("chief", "worker")),
    "worker tf-server": (("worker", "ps"), ("chief", "worker", "ps")),
}
EXAMPLE = '{"cluster": {"worker": ["host1:2222", "host2:2222"]}, "task": {"type": "worker", "index": 0}}'

JOIN_TIMEOUT_ENV = "DISTBENCH_JOIN_TIMEOUT_S"
"""Seconds a ``worker tf`` task waits for its cluster to form (set by the harness; ``--join-timeout`` wins)."""


def tf_config(cluster: dict[str, list[str]], task_type: str, index: int) -> str:
    """The ``TF_CONFIG`` JSON for task ``task_type:index`` of ``cluster``
    (e.g. ``{"worker": ["127.0.0.1:2222", ...]}``), keys sorted."""
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}}, sort_keys=True)


@dataclass(frozen=True)
class TFTask:
    """One task of a validated TensorFlow cluster.

    Attributes:
        cluster: job name -> list of ``"host:port"`` addresses (every address distinct).
        task_type: this task's job (a key of ``cluster``).
        index: this task's position in ``cluster[task_type]``.
        rpc_layer: TensorFlow's RPC protocol (``grpc`` unless ``TF_CONFIG`` says otherwise).
    """

    cluster: dict[str, list[str]]
    task_type: str
    index: int
    rpc_layer: str = "grpc"

    @property
    def name(self) -> str:
        """``worker 1``, ``ps 0``, ``chief 0``: how reports name this task."""
        return f"{self.task_type} {self.index}"

    @property
    def address(self) -> str:
        """This task's ``host:port``."""
        return self.cluster[self.task_type][self.index]

    @property
    def replicas(self) -> int:
        """Tasks that train under MultiWorkerMirroredStrategy: the chief and the workers."""
        return len(self.cluster.get("chief", [])) + len(self.cluster.get("worker", []))

    @property
    def rank(self) -> int:
        """Position among the training tasks (chief first, then workers, as TensorFlow's
        ``multi_worker_util.id_in_cluster``); 0 is the task that saves the result."""
        if self.task_type == "worker":
            return len(self.cluster.get("chief", [])) + self.index
        return self.index

    def peers(self) -> list[tuple[str, str]]:
        """``(name, address)`` of every other task of the cluster, job by job in order."""
        return [(f"{job} {i}", addr) for job, addrs in self.cluster.items() for i, addr in enumerate(addrs)
                if (job, i) != (self.task_type, self.index)]

    def to_json(self) -> str:
        """This task as ``TF_CONFIG`` JSON (parsed back by :func:`parse_tf_config`)."""
        d = json.loads(tf_config(self.cluster, self.task_type, self.index))
        if self.rpc_layer != "grpc":
            d["rpc_layer"] = self.rpc_layer
        return json.dumps(d, sort_keys=True)


def _short(value: Any, limit: int = 120) -> str:
    """``value`` as JSON (or repr), cut to ``limit`` characters, for an error line."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _kind(value: Any) -> str:
    """``a string``, ``a boolean``, ... for messages about a value of the wrong type."""
    return {str: "a string", bool: "a boolean", int: "a number", float: "a number with a fraction", list: "a list",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def _address_problem(addr: Any) -> str | None:
    """Why ``addr`` is not ``"host:port"`` (non-empty host, port 1..65535), or None."""
    if not isinstance(addr, str):
        return f"{_kind(addr)}, not a string"
    host, sep, port = addr.rpartition(":")
    if not sep or not host.strip():
        return "no host" if sep else "no ':port'"
    if not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535:
        return f"port {port!r} is not an integer 1..65535"
    return None


def parse_tf_config(raw: str | None, entry: str = "worker tf") -> TFTask:
    """Validate ``TF_CONFIG`` text for one entry point and return its task.

    Checks, in this order: JSON object; top-level keys only ``cluster``, ``task``,
    ``environment``, ``rpc_layer``; ``cluster`` a non-empty object of job -> non-empty
    list of ``"host:port"`` (non-empty host, port 1..65535), jobs allowed for ``entry``,
    at most one ``chief``, no address listed twice; ``task`` an object with ``type`` (a
    job of the cluster that ``entry`` runs) and ``index`` (an integer, not a boolean or
    string, in ``0..len(cluster[type]) - 1``); ``environment``/``rpc_layer`` strings.

    Args:
        raw: the ``TF_CONFIG`` text (None or empty: not set).
        entry: ``"worker tf"`` (chief/worker tasks of MultiWorkerMirroredStrategy) or
            ``"worker tf-server"`` (worker/ps servers of ParameterServerStrategy).

    Returns:
        The validated :class:`TFTask`.

    Raises:
        ConfigError: the first problem found, in one line: what was received, what was
            expected, how to fix it.
    """
    task_types, jobs = ENTRY_POINTS[entry]
    cmd = f"'distbench {entry}'"
    if raw is None or not raw.strip():
        got = "is not set" if raw is None else f"= {raw!r}"
        raise ConfigError(f"TF_CONFIG {got}: expected JSON like {EXAMPLE} ({cmd}); export it on every host "
                          "with that host's task")
    try:
        tfc = json.loads(raw)
    except ValueError as e:
        raise ConfigError(f"TF_CONFIG = {_short(raw)} is not JSON ({e}); expected JSON like {EXAMPLE}; "
                          "quote it in single quotes in the shell") from None
    if not isinstance(tfc, dict):
        raise ConfigError(f"TF_CONFIG = {_short(tfc)}: expected a JSON object like {EXAMPLE}")
    unknown = [k for k in tfc if k not in TOP_LEVEL_KEYS]
    if unknown:
        raise ConfigError(f"TF_CONFIG has unknown key(s) {', '.join(map(repr, unknown))}: expected only "
                          f"{', '.join(TOP_LEVEL_KEYS)}; remove them or fix their spelling")
    cluster = tfc.get("cluster")
    _check_cluster(cluster, jobs, cmd)
    task_type, index = _check_task(tfc.get("task"), cluster, task_types, cmd)
    for key in ("environment", "rpc_layer"):
        if key in tfc and (not isinstance(tfc[key], str) or not tfc[key]):
            example = "grpc" if key == "rpc_layer" else "cloud"
            raise ConfigError(f"TF_CONFIG {key} = {_short(tfc[key])}: expected a non-empty string "
                              f"(e.g. {example!r}) or no {key} key")
    return TFTask({job: list(addrs) for job, addrs in cluster.items()}, task_type, index,
                  tfc.get("rpc_layer", "grpc"))


def _check_cluster(cluster: Any, jobs: tuple[str, ...], cmd: str) -> None:
    """``TF_CONFIG``'s ``cluster``: a non-empty object of allowed jobs -> non-empty lists of
    distinct ``host:port`` addresses, at most one chief.

    Raises:
        ConfigError: the first problem, as :func:`parse_tf_config` says.
    """
    if not isinstance(cluster, dict) or not cluster:
        raise ConfigError(f"TF_CONFIG cluster = {_short(cluster)}: expected an object of job name -> address list, "
                          f"e.g. {{\"worker\": [\"host1:2222\", \"host2:2222\"]}}")
    seen: dict[str, str] = {}
    for job, addrs in cluster.items():
        if job not in jobs:
            raise ConfigError(f"TF_CONFIG cluster has job {job!r}: {cmd} accepts jobs {', '.join(jobs)}; "
                              "remove it or fix its name")
        if not isinstance(addrs, list) or not addrs:
            raise ConfigError(f"TF_CONFIG cluster.{job} = {_short(addrs)}: expected a non-empty list of "
                              f"\"host:port\" strings, e.g. [\"host1:2222\", \"host2:2222\"]")
        if job == "chief" and len(addrs) > 1:
            raise ConfigError(f"TF_CONFIG cluster.chief lists {len(addrs)} addresses: expected one chief; "
                              "move the others to cluster.worker")
        for i, addr in enumerate(addrs):
            problem = _address_problem(addr)
            if problem:
                raise ConfigError(f"TF_CONFIG cluster.{job}[{i}] = {_short(addr)}: expected \"host:port\" with a "
                                  f"non-empty host and a port 1..65535 ({problem}), e.g. \"host1:2222\"")
            if addr in seen:
                raise ConfigError(f"TF_CONFIG cluster lists {addr!r} twice ({seen[addr]} and {job}[{i}]): every "
                                  "task needs its own address; give each a different port or host")
            seen[addr] = f"{job}[{i}]"


def _check_task(task: Any, cluster: dict[str, Any], task_types: tuple[str, ...], cmd: str) -> tuple[str, int]:
    """``TF_CONFIG``'s ``task``: ``type`` a job of ``cluster`` that the entry point runs,
    ``index`` an integer position in that job's list.

    Returns:
        ``(task type, index)``.

    Raises:
        ConfigError: the first problem, as :func:`parse_tf_config` says.
    """
    if not isinstance(task, dict):
        raise ConfigError(f"TF_CONFIG task = {_short(task)}: expected an object like {{\"type\": \"worker\", "
                          "\"index\": 0} naming this host's task")
    unknown = [k for k in task if k not in TASK_KEYS]
    if unknown:
        raise ConfigError(f"TF_CONFIG task has unknown key(s) {', '.join(map(repr, unknown))}: expected only "
                          "type and index; remove them or fix their spelling")
    task_type, index = task.get("type"), task.get("index")
    if task_type not in task_types:
        got = "is missing" if "type" not in task else f"= {_short(task_type)}"
        raise ConfigError(f"TF_CONFIG task.type {got}: {cmd} runs a task of type "
                          f"{' or '.join(map(repr, task_types))}; set task.type to one of them")
    if task_type not in cluster:
        raise ConfigError(f"TF_CONFIG task.type = {task_type!r} but the cluster has no {task_type!r} job (it has "
                          f"{', '.join(cluster)}); add cluster.{task_type} or fix task.type")
    n = len(cluster[task_type])
    if not isinstance(index, int) or isinstance(index, bool):
        got = "is missing" if "index" not in task else f"= {_short(index)} ({_kind(index)})"
        raise ConfigError(f"TF_CONFIG task.index {got}: expected an integer "
                          f"0..{n - 1} (this host's position in cluster.{task_type}), written without quotes")
    if not 0 <= index < n:
        raise ConfigError(f"TF_CONFIG task.index = {index}: expected 0..{n - 1} (cluster.{task_type} lists {n} "
                          f"address{'es' if n > 1 else ''}); set it to this host's position in cluster.{task_type}")
    return task_type, index


def accepts_connections(address: str, timeout_s: float = 1.0) -> bool:
    """Whether a TCP connection to ``host:port`` succeeds within ``timeout_s`` seconds."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except OSError:
        return False


def silent_peers(task: TFTask, timeout_s: float = 1.0) -> list[tuple[str, str]]:
    """``(name, address)`` of the peers of ``task`` where nothing accepts a TCP connection:
    a task that never started (or has not started its server yet). Probed in parallel,
    each for at most ``timeout_s`` seconds."""
    peers = task.peers()
    if not peers:
        return []
    with ThreadPoolExecutor(max_workers=min(32, len(peers))) as pool:
        up = list(pool.map(lambda p: accepts_connections(p[1], timeout_s), peers))
    return [p for p, ok in zip(peers, up) if not ok]


def join_failure(task: TFTask, timeout_s: float, silent: list[tuple[str, str]]) -> str:
    """The one-line reason why ``task``'s cluster did not form within ``timeout_s`` seconds,
    given the ``silent`` peers (see :func:`silent_peers`)."""
    head = f"{task.name}: the TensorFlow cluster did not form within {timeout_s:g} s"
    if silent:
        names = ", ".join(f"{name} ({addr})" for name, addr in silent)
        them = "it" if len(silent) == 1 else "them"
        return (f"{head}: {names} never joined (nothing accepts connections there); start {them} with the "
                "same cluster in TF_CONFIG, or raise --join-timeout if still starting")
    return (f"{head}: every peer accepts connections but the cluster did not form; check that every task "
            "runs with the same cluster in TF_CONFIG, or raise --join-timeout")
