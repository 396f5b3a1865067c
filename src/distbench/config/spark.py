"""Spark specs checked before a Spark engine starts: the master URL, the ``[spark] conf``
properties that decide the barrier stage's task slots or whose bad values only fail deep
inside the JVM, the slot count itself, and whether a cluster master can be reached.

A barrier stage runs all N replicas at once or not at all, so Spark needs N free task
slots; it counts them as the sum over executors of ``executor cores // spark.task.cpus``
(``SparkContext.maxNumConcurrentTasks``). For the local masters (``local``,
``local[N]``, ``local[*]``, ``local[N,F]``) the master and ``spark.task.cpus`` give that
count exactly; for cluster masters ``spark.cores.max``, ``spark.executor.cores`` and
``spark.executor.instances`` give an upper bound, and Spark's own count is read once the
session is up (:func:`distbench.ps_async.spark.require_slots`).

Pure Python: nothing here imports pyspark or starts a JVM.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field

from distbench.contracts import ConfigError

MASTER_FORMS = ("local, local[N], local[*], local[N,F], local-cluster[W,C,MB], spark://host:port[,host:port...], "
                "yarn, k8s://https://host:port")

# Spark's own barrier-stage slot check (DAGScheduler): retried every `interval` up to `maxFailures` times
# (defaults 15 s x 40). distbench checks the slots itself first, so Spark may give up fast.
BARRIER_CHECK_INTERVAL = "spark.scheduler.barrier.maxConcurrentTasksCheck.interval"
BARRIER_CHECK_FAILURES = "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures"
BARRIER_CHECK_DEFAULTS = {BARRIER_CHECK_INTERVAL: "1s", BARRIER_CHECK_FAILURES: "5"}

_LOCAL = re.compile(r"local(?:\[(\d+|\*)(?:\s*,\s*(\d+))?\])?")  # Spark's SparkMasterRegex
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\]")
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d+)")
_K8S = re.compile(r"k8s://(?:(https?)://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(?::(\d+))?/?")
# Spark's byte strings (JavaUtils.byteStringAs): an integer and an optional unit; no fractions.
_SIZE = re.compile(r"(\d+)(b|k|kb|m|mb|g|gb|t|tb|p|pb)?", re.IGNORECASE)
_SIZE_UNITS = {"b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}
# The driver JVM gets -Xmx<spark.driver.memory> verbatim: only the JVM's units work there.
_JVM_SIZE = re.compile(r"(\d+)([kmgt])", re.IGNORECASE)
# Spark's time strings (JavaUtils.timeStringAs).
_TIME = re.compile(r"(\d+)(us|ms|s|m|min|h|d)?", re.IGNORECASE)
_TIME_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
# Spark refuses heaps and executors under 1.5 x its 300 MiB reserved memory (UnifiedMemoryManager).
MIN_MEMORY_BYTES = 471_859_200

POSITIVE_INT_KEYS = ("spark.task.cpus", "spark.executor.cores", "spark.executor.instances", "spark.cores.max",
                     "spark.driver.cores", "spark.task.maxFailures", "spark.default.parallelism",
                     BARRIER_CHECK_FAILURES)
TIME_KEYS = {"spark.network.timeout": "s", "spark.executor.heartbeatInterval": "ms", BARRIER_CHECK_INTERVAL: "s"}
SIZE_KEYS = ("spark.executor.memoryOverhead", "spark.driver.memoryOverhead", "spark.executor.pyspark.memory",
             "spark.driver.maxResultSize")


@dataclass
class SparkConfig:
    """Spark session settings.

    Attributes:
        master: Spark master URL ("" = ``local[N]`` with N = workers): ``local``,
            ``local[N]``, ``local[*]``, ``local[N,F]``, ``local-cluster[W,C,MB]``,
            ``spark://host:port[,host:port]``, ``yarn`` or ``k8s://https://host:port``
            (checked by :func:`check_spark_config`).
        conf: extra Spark properties, e.g. ``{"spark.executor.memory" = "2g"}``; those
            that set the barrier slots or fail deep in the JVM are checked too.
        share_session: ``distbench run`` runs the sweep's ``spark_ps`` configurations in
            one Spark application (one engine process per master and thread count,
            :mod:`distbench.harness.spark_engine`); false = a new Spark application per
            configuration.
    """

    master: str = ""
    conf: dict[str, str] = field(default_factory=dict)
    share_session: bool = True


@dataclass(frozen=True)
class Master:
    """A parsed Spark master URL.

    Attributes:
        url: the URL as given.
        kind: ``local``, ``local-cluster``, ``standalone``, ``yarn`` or ``k8s``.
        cores: executor cores the URL itself fixes (``local[N]``: N; ``local[*]``: the
            cores this process may use; ``local-cluster[W,C,MB]``: W x C); None for
            cluster managers.
        executor_cores: cores of one executor when the URL fixes them (local: all of
            them; local-cluster: C), else None.
        endpoints: ``(host, port)`` pairs a client connects to (standalone masters,
            the Kubernetes API server); empty for local and yarn.
    """

    url: str
    kind: str
    cores: int | None = None
    executor_cores: int | None = None
    endpoints: tuple[tuple[str, int], ...] = ()

    @property
    def is_local(self) -> bool:
        """Everything runs in this machine's driver JVM (``local...``)."""
        return self.kind == "local"


def _cores(n: int) -> str:
    return f"{n} core{'s' if n != 1 else ''}"


def _bad_master(url: str, why: str = "") -> ConfigError:
    return ConfigError(f"spark.master = {url!r}: {why + '; ' if why else ''}expected one of {MASTER_FORMS}")


def available_cores() -> int:
    """CPU cores this process may run on (what the JVM reports for ``local[*]``, before cgroup quotas)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def parse_master(url: str) -> Master:
    """Parse a Spark master URL into a :class:`Master`.

    Args:
        url: ``local``, ``local[N]``, ``local[*]``, ``local[N,F]`` (F: task failures
            allowed), ``local-cluster[W,C,MB]`` (W workers of C cores and MB MiB),
            ``spark://host:port[,host:port...]`` (standalone, with standby masters),
            ``yarn``, or ``k8s://[https://]host[:port]``.

    Returns:
        The parsed master.

    Raises:
        ConfigError: any other form, or a count of 0; the message lists the accepted forms.
    """
    m = _LOCAL.fullmatch(url)
    if m:
        n, failures = m.group(1), m.group(2)
        cores = 1 if n is None else available_cores() if n == "*" else int(n)
        if cores < 1 or (failures is not None and int(failures) < 1):
            raise _bad_master(url, "the core count N and the task failures F must be >= 1")
        return Master(url, "local", cores, cores)
    m = _LOCAL_CLUSTER.fullmatch(url)
    if m:
        workers, cores, mb = (int(g) for g in m.groups())
        if workers < 1 or cores < 1 or mb < 1:
            raise _bad_master(url, "W workers, C cores and MB MiB must be >= 1")
        return Master(url, "local-cluster", workers * cores, cores)
    if url.startswith("spark://"):
        pairs = []
        for part in url[len("spark://"):].split(","):
            hp = _HOST_PORT.fullmatch(part.strip())
            if not hp or not 0 < int(hp.group(2)) < 65536:
                raise _bad_master(url, f"{part!r} is not host:port (port 1..65535)")
            pairs.append((hp.group(1).strip("[]"), int(hp.group(2))))
        return Master(url, "standalone", endpoints=tuple(pairs))
    if url == "yarn":
        return Master(url, "yarn")
    m = _K8S.fullmatch(url)
    if m:
        scheme, host, port = m.group(1) or "https", m.group(2), m.group(3)
        port_n = int(port) if port else (443 if scheme == "https" else 80)
        if not 0 < port_n < 65536:
            raise _bad_master(url, f"port {port_n} is not in 1..65535")
        return Master(url, "k8s", endpoints=((host.strip("[]"), port_n),))
    raise _bad_master(url)


def _positive_int(conf: dict[str, str], key: str) -> int | None:
    if key not in conf:
        return None
    v = conf[key].strip()
    if not v.isdigit() or int(v) < 1:
        raise ConfigError(f"spark.conf {key} = {conf[key]!r}: expected a positive integer, e.g. \"2\"")
    return int(v)


def size_bytes(value: str, default_unit: str = "m") -> int | None:
    """Bytes of a Spark size string (``512m``, ``4g``, ``1024`` = MiB by default), or None
    when it is not one (fractions such as ``1.5g`` are not: Spark rejects them too)."""
    m = _SIZE.fullmatch(value.strip())
    if not m:
        return None
    unit = (m.group(2) or default_unit).lower()[0]
    return int(m.group(1)) * _SIZE_UNITS[unit]


def time_ms(value: str, default_unit: str) -> float | None:
    """Milliseconds of a Spark time string (``30s``, ``500ms``, ``2min``; a bare number is
    in ``default_unit``), or None when it is not one."""
    m = _TIME.fullmatch(value.strip())
    if not m:
        return None
    return int(m.group(1)) * _TIME_MS[(m.group(2) or default_unit).lower()]


def check_spark_config(master_url: str, conf: dict[str, str]) -> None:
    """Check a config's ``[spark]`` section: the master URL (when given) and the conf table.

    Args:
        master_url: ``[spark] master`` ("" = ``local[N]`` per worker count).
        conf: ``[spark] conf``.

    Raises:
        ConfigError: one line naming the key, its value and what is accepted.
    """
    if "spark.master" in conf:
        raise ConfigError(f"spark.conf spark.master = {conf['spark.master']!r}: set the master with "
                          "[spark] master (validated, and local[N] by default), not in [spark] conf")
    mode = conf.get("spark.submit.deployMode", "client").strip().lower()
    if mode != "client":
        raise ConfigError(f"spark.conf spark.submit.deployMode = {conf['spark.submit.deployMode']!r}: the "
                          "parameter server lives in the driver, which distbench runs here: only \"client\" works")
    check_conf(parse_master(master_url) if master_url else None, conf)


def check_conf(master: Master | None, conf: dict[str, str]) -> None:
    """Check the Spark properties that set the barrier slots, or that Spark only rejects
    deep inside the JVM (after the session starts, or at the end of training).

    Args:
        master: the parsed master, or None when not known yet (``local[N]`` by worker count).
        conf: Spark properties, name -> string value.

    Raises:
        ConfigError: one line naming the property, its value and what Spark accepts.
    """
    ints = {k: _positive_int(conf, k) for k in POSITIVE_INT_KEYS}
    for key in ("spark.executor.memory", "spark.driver.memory"):
        if key not in conf:
            continue
        pattern = _JVM_SIZE if key == "spark.driver.memory" else _SIZE
        n = size_bytes(conf[key]) if pattern.fullmatch(conf[key].strip()) else None
        if n is None:
            units = ("k, m, g or t (the JVM's -Xmx units)" if key == "spark.driver.memory"
                     else "k, m, g, t (or kb, mb...)")
            raise ConfigError(f"spark.conf {key} = {conf[key]!r}: expected a JVM size, an integer with unit {units}, "
                              "e.g. \"512m\" or \"4g\"")
        if n < MIN_MEMORY_BYTES:
            raise ConfigError(f"spark.conf {key} = {conf[key]!r}: Spark needs at least 450m (1.5 x its 300 MiB "
                              "reserved memory); e.g. \"1g\"")
    for key in SIZE_KEYS:
        if key in conf and size_bytes(conf[key]) is None:
            raise ConfigError(f"spark.conf {key} = {conf[key]!r}: expected a size, an integer with an optional "
                              "unit b, k, m, g, t (or kb, mb...), e.g. \"512m\"")
    times = {}
    for key, unit in TIME_KEYS.items():
        if key in conf:
            times[key] = time_ms(conf[key], unit)
            if not times[key]:
                raise ConfigError(f"spark.conf {key} = {conf[key]!r}: expected a positive duration, an integer "
                                  f"with an optional unit ms, s, m, min, h, d (bare numbers are {unit}), e.g. \"30s\"")
    timeout = times.get("spark.network.timeout") or 120_000.0
    heartbeat = times.get("spark.executor.heartbeatInterval") or 10_000.0
    if heartbeat >= timeout:
        raise ConfigError(f"spark.conf spark.executor.heartbeatInterval ({heartbeat:g} ms) must be less than "
                          f"spark.network.timeout ({timeout:g} ms; default 120s): Spark refuses to start otherwise")
    if "spark.dynamicAllocation.enabled" in conf:
        flag = conf["spark.dynamicAllocation.enabled"].strip().lower()
        if flag not in ("true", "false"):
            raise ConfigError(f"spark.conf spark.dynamicAllocation.enabled = "
                              f"{conf['spark.dynamicAllocation.enabled']!r}: expected \"true\" or \"false\"")
        if flag == "true" and (master is None or not master.is_local):
            raise ConfigError("spark.conf spark.dynamicAllocation.enabled = 'true': Spark's barrier stages (one "
                              "task per replica, all at once) do not run under dynamic allocation; set it to "
                              "\"false\" and size the executors with spark.executor.instances")
    task_cpus = ints["spark.task.cpus"] or 1
    if master is not None and master.is_local:  # local mode ignores spark.executor.cores
        ec, where = master.executor_cores, f"master {master.url!r}"
    elif ints["spark.executor.cores"]:
        ec, where = ints["spark.executor.cores"], "spark.executor.cores"
    else:  # local-cluster[W,C,MB] fixes C; cluster managers: Spark's default of 1 core needs no check here
        ec, where = (master.executor_cores if master else None), f"master {master.url!r}" if master else ""
    if ec is not None and task_cpus > ec:
        raise ConfigError(f"spark.conf spark.task.cpus = {task_cpus} is more than the {_cores(ec)} of one executor "
                          f"({where}): no task could ever run; lower spark.task.cpus or give executors more cores")
    cores_max = ints["spark.cores.max"]
    ec_set = ints["spark.executor.cores"]
    standalone = master is None or master.kind in ("standalone", "local-cluster")  # where spark.cores.max counts
    if standalone and cores_max is not None and ec_set and ec_set > cores_max:
        raise ConfigError(f"spark.conf spark.executor.cores = {ints['spark.executor.cores']} is more than "
                          f"spark.cores.max = {cores_max}: no executor could start; raise spark.cores.max")
    if master is not None and master.kind in ("local", "local-cluster") and "spark.pyspark.python" in conf:
        exe = conf["spark.pyspark.python"]
        if not (shutil.which(exe) or (os.path.isfile(exe) and os.access(exe, os.X_OK))):
            raise ConfigError(f"spark.conf spark.pyspark.python = {exe!r}: no such executable here, where "
                              f"master {master.url!r} runs its executors; give the path of a Python that has distbench")


@dataclass(frozen=True)
class Slots:
    """Barrier task slots a master and conf offer.

    Attributes:
        count: the slots (executor cores // spark.task.cpus, summed over executors).
        exact: True when the master fixes them (local masters); False for an upper bound
            (cluster masters: the executors may not all be granted).
        how: how ``count`` was computed, for messages.
    """

    count: int
    exact: bool
    how: str


def planned_slots(master: Master, conf: dict[str, str]) -> Slots | None:
    """The barrier slots ``master`` and ``conf`` offer, known before any session starts.

    Local masters give the exact count: ``cores // spark.task.cpus`` (``local[*]``: an
    upper bound, the JVM may see fewer cores under a cgroup quota). Cluster masters give
    an upper bound when the conf sizes the executors (standalone and local-cluster:
    ``spark.cores.max`` or the URL's cores; yarn and k8s: ``spark.executor.instances``);
    otherwise None (ask Spark once the session is up).

    Args:
        master: the parsed master.
        conf: validated Spark properties (see :func:`check_conf`).

    Returns:
        The slots, or None when only Spark can tell.
    """
    tc = int(conf.get("spark.task.cpus", "1"))
    ec_conf = int(conf["spark.executor.cores"]) if "spark.executor.cores" in conf else None
    cores_max = int(conf["spark.cores.max"]) if "spark.cores.max" in conf else None
    if master.kind == "local":
        exact = not re.match(r"local\[\s*\*", master.url)
        return Slots(master.cores // tc, exact, f"{_cores(master.cores)} of {master.url} // spark.task.cpus {tc}")
    if master.kind in ("standalone", "local-cluster"):
        bounds = []
        if master.kind == "local-cluster":  # W workers of C cores; executors of ec cores each
            ec = ec_conf or master.executor_cores
            workers, per_worker = master.cores // master.executor_cores, master.executor_cores // ec
            bounds.append((workers * per_worker * (ec // tc), f"{workers} workers x {per_worker} executor(s) x "
                                                              f"({ec} cores // spark.task.cpus {tc})"))
        if cores_max is not None and ec_conf:
            bounds.append(((cores_max // ec_conf) * (ec_conf // tc),
                           f"spark.cores.max {cores_max} // spark.executor.cores {ec_conf} = "
                           f"{cores_max // ec_conf} executor(s) x ({ec_conf} cores // spark.task.cpus {tc})"))
        elif cores_max is not None:
            bounds.append((cores_max // tc, f"spark.cores.max {cores_max} // spark.task.cpus {tc}"))
        if not bounds:
            return None
        count, how = min(bounds)
        return Slots(count, False, how)
    if "spark.executor.instances" in conf:  # yarn, k8s: executors of spark.executor.cores (default 1)
        n, ec = int(conf["spark.executor.instances"]), ec_conf or 1
        return Slots(n * (ec // tc), False, f"spark.executor.instances {n} x (spark.executor.cores {ec} "
                                            f"// spark.task.cpus {tc})")
    return None


def slots_message(master_url: str, slots: int, how: str, replicas: int, exact: bool = True) -> str:
    """One line: the master offers ``slots`` barrier slots (``how``) but ``replicas`` must run at once."""
    bound = "" if exact else "at most "
    return (f"Spark master {master_url!r} offers {bound}{slots} barrier task slot{'s' if slots != 1 else ''} "
            f"({how}) but {replicas} replicas must run at once: give it more executor cores, lower "
            "spark.task.cpus, or lower the workers")
