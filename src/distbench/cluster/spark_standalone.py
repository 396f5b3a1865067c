"""A Spark standalone cluster on a placement's hosts: the master on the launching host, one
worker per host (``spark-class org.apache.spark.deploy.worker.Worker``), started and
stopped with the configuration.

Used by ``spark_ps`` on an emulated cluster, where nothing else provides a Spark cluster:
the executors then run inside the hosts' network namespaces, so every commit and pull of
a replica crosses its host's shaped link to the parameter server on the launching host.
(On real hosts, ``spark_ps`` uses the cluster ``[spark] master`` names instead.)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from distbench.launch import process
from distbench.launch.commands import free_ports

MASTER_PORT = 7077
WORKER_PORT = 7078  # each emulated host has its own ports
READY_S = 180.0  # for the master to be elected and every worker to register (JVM starts on a loaded machine)


class StandaloneError(RuntimeError):
    """The standalone cluster did not come up in time (the message names the process and its log)."""


def spark_class() -> str:
    """The ``spark-class`` launcher next to this interpreter (pyspark installs it there)."""
    local = Path(sys.executable).parent / "spark-class"
    if local.exists():
        return str(local)
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


class StandaloneCluster:
    """A master and one worker per host of ``placement``, as a context manager whose value is
    the master URL (``spark://<driver>:7077``).

    Args:
        placement: where the workers go (:class:`~distbench.cluster.placement.Placement`).
        cores: cores each worker offers (the placement's slots per host).
        log_dir: where the master's and the workers' logs go.
        memory: memory each worker offers its executors (JVM size).
    """

    def __init__(self, placement: Any, log_dir: Path, memory: str = "2g") -> None:
        self.placement, self.log_dir, self.memory = placement, Path(log_dir), memory
        self.group: process.ProcessGroup | None = None
        self._offsets: dict[Path, int] = {}

    def __enter__(self) -> str:
        pl = self.placement
        master = f"spark://{pl.driver}:{MASTER_PORT}"
        web = free_ports(1)[0]
        env = {**os.environ, "PYSPARK_PYTHON": pl.python, "SPARK_NO_DAEMONIZE": "1"}
        specs = [process.ProcSpec("spark master", [spark_class(), "org.apache.spark.deploy.master.Master",
                                                   "--host", pl.driver, "--port", str(MASTER_PORT),
                                                   "--webui-port", str(web)],
                                  {**env, "SPARK_LOCAL_IP": pl.driver}, self.log_dir / "spark-master.log")]
        for h, (host, slots) in enumerate(zip(pl.hosts, pl.slots)):
            k = sum(pl.slots[:h])  # a process index on host h
            argv = [spark_class(), "org.apache.spark.deploy.worker.Worker", "--host", host, "--port",
                    str(WORKER_PORT), "--cores", str(slots), "--memory", self.memory, "--webui-port",
                    str(WORKER_PORT + 1), master]
            wenv = {**env, "SPARK_LOCAL_IP": host}
            specs.append(process.ProcSpec(f"spark worker {h}", pl.wrap(k, argv, wenv), wenv,
                                          self.log_dir / f"spark-worker{h}.log"))
        # a resumed configuration appends to the same logs: only what this start writes counts
        self._offsets = {spec.log: spec.log.stat().st_size if spec.log.exists() else 0 for spec in specs}
        self.group = process.ProcessGroup(specs).start()  # workers retry until the master is up
        try:
            self._wait(specs[0], "I have been elected leader")
            for spec in specs[1:]:
                self._wait(spec, "Successfully registered with master")
        except BaseException:
            self.group.terminate(grace_s=5.0)
            raise
        return master

    def _wait(self, spec: process.ProcSpec, text: str) -> None:
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if spec.log.exists():
                with open(spec.log, "rb") as f:
                    f.seek(self._offsets.get(spec.log, 0))
                    if text in f.read().decode(errors="replace"):
                        return
            failed = self.group.first_failure() if self.group else None
            if failed is not None:
                raise StandaloneError(f"{failed.name} exited ({process.describe_exit(failed.returncode)}) before "
                                      f"it was ready: {process.last_error_line(process.log_tail(failed.log))}")
            time.sleep(0.5)
        raise StandaloneError(f"{spec.name} was not ready after {READY_S:g} s (no {text!r} in {spec.log})")

    def __exit__(self, *exc: object) -> None:
        if self.group is not None:
            self.group.terminate(grace_s=10.0)
