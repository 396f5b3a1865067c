"""Larger than memory: a ~3 GB Parquet training set under six strategies, with every
process's peak resident memory.

Writes (once; reused when present) a synthetic Parquet dataset with
``make_parquet.write_synthetic_parquet`` (32x32x3 float32 images, ~100 MB row groups),
then runs ``distbench run`` on it with ``single``, ``mirrored``, ``multi_worker_mirrored``,
``horovod``, ``spark_ps:adag`` and ``mpi_ps:adag`` (2 workers, 1 epoch, an MLP, global
batch 256). While it runs, a sampler walks the process tree under ``distbench run`` four
times a second and keeps each process's ``VmHWM`` (the kernel's peak resident set, which
only grows), so each configuration's processes (its child, the TensorFlow workers, the
Horovod and MPI ranks, the Spark driver JVM and its Python workers) are reported with
the largest peak among them, next to the dataset's size. No process may hold the data
whole: each reads one row group and one batch at a time.

Usage::

    python benchmarks/parquet_memory.py [--quick] [--gb 3] [--rows-per-group N] [--files N] [--data DIR]
        [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
import make_parquet  # noqa: E402

STRATEGIES = ["single", "mirrored", "multi_worker_mirrored", "horovod", "spark_ps:adag", "mpi_ps:adag"]
CONFIG = """\
[data]
name = "parquet"
path = "{data}"
features_col = "features"
label_col = "label"
feature_shape = [32, 32, 3]
[model]
name = "mlp"
hidden = [64]
[training]
epochs = 1
global_batch_size = 256
learning_rate = 0.05
target_accuracy = 0.5
[run]
strategies = {strategies}
workers = [2]
timeout_s = 3600.0
[spark]
# each configuration in its own process tree, so every process's peak memory is its own
share_session = false
[mpi]
share_engine = false
"""


def _status(pid: int) -> tuple[int, int] | None:
    """``(ppid, VmHWM bytes)`` of ``pid``, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    ppid = int(re.search(r"^PPid:\s+(\d+)", text, re.M).group(1))
    m = re.search(r"^VmHWM:\s+(\d+) kB", text, re.M)
    return ppid, (int(m.group(1)) * 1024 if m else 0)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class TreeSampler:
    """Samples the peak resident memory of every process under ``root`` (a thread).

    Attributes:
        peaks: pid -> ``(largest VmHWM seen, bytes; command line; the configuration key)``.
    """

    def __init__(self, root: int, period_s: float = 0.25) -> None:
        self.root, self.period_s = root, period_s
        self.peaks: dict[int, tuple[int, str, str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "TreeSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            parents: dict[int, int] = {}
            hwm: dict[int, int] = {}
            for p in Path("/proc").iterdir():
                if p.name.isdigit():
                    st = _status(int(p.name))
                    if st is not None:
                        parents[int(p.name)], hwm[int(p.name)] = st
            for pid in hwm:
                chain, key, q = [], "", pid
                while q in parents and q != self.root and len(chain) < 64:
                    chain.append(q)
                    m = re.search(r"--key (\S+)", _cmdline(q))
                    if m and not key:
                        key = m.group(1)
                    q = parents[q]
                if q != self.root:
                    continue
                old = self.peaks.get(pid)
                cmd = _cmdline(pid)[:200] or (old[1] if old else "")  # a shell may exec another program
                self.peaks[pid] = (max(hwm[pid], old[0] if old else 0), cmd, key or (old[2] if old else ""))


def role(cmd: str) -> str:
    """A short name of what a process is, from its command line."""
    exe = os.path.basename(cmd.split(" ", 1)[0])
    if exe == "java":
        return "Spark JVM"
    if exe in ("bash", "sh", "dash"):
        return "shell"
    for pattern, name in ((r"worker config", "configuration process (Spark driver, coordinator)"),
                          (r"pyspark\.daemon|pyspark\.worker", "Spark Python worker (replica)"),
                          (r"worker tf-task", "TF worker"),
                          (r"worker tf\b", "TF worker supervisor"), (r"worker horovod", "Horovod rank"),
                          (r"worker mpi-ps", "MPI rank"), (r"horovodrun|mpirun|orted", "launcher")):
        if re.search(pattern, cmd):
            return name
    return "other"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="0.05 GB and two strategies: a smoke test")
    ap.add_argument("--gb", type=float, default=3.0, help="size of the training data to write (1e9 bytes)")
    ap.add_argument("--data", help="dataset directory (default: a folder under the temp dir, reused)")
    ap.add_argument("--rows-per-group", type=int, default=None,
                    help="rows per row group (default 8192, 512 with --quick); 0: one row group per file, as "
                         "pandas' and pyarrow's defaults write a file of up to a million rows")
    ap.add_argument("--files", type=int, default=None, help="files to spread the rows over (default 3, 1 with --quick)")
    ap.add_argument("--write", help="BENCHMARKS.md to update (section parquet_memory)")
    args = ap.parse_args(argv)
    gb = 0.05 if args.quick else args.gb
    strategies = ["single", "spark_ps:adag"] if args.quick else STRATEGIES
    rows_per_group = args.rows_per_group if args.rows_per_group is not None else 512 if args.quick else 8192
    files = args.files or (1 if args.quick else 3)
    data = Path(args.data or Path(tempfile.gettempdir()) / f"distbench-parquet-{gb:g}gb-{rows_per_group}x{files}")
    if not any(data.glob("part-*.parquet")):
        info = make_parquet.write_synthetic_parquet(data, gb=gb, rows_per_group=rows_per_group or 1 << 62,
                                                    files=files)
        print(f"wrote {info['rows']} rows, {info['bytes'] / 1e9:.2f} GB in {info['seconds']:.0f} s", flush=True)
    size = sum(p.stat().st_size for p in data.glob("part-*.parquet"))
    tmp = Path(tempfile.mkdtemp(prefix="distbench-pqmem-"))
    cfg = tmp / "parquet.toml"
    cfg.write_text(CONFIG.format(data=data, strategies=str(strategies).replace("'", '"')))
    import subprocess

    log = tmp / "run.log"
    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "distbench", "run", str(cfg), "--out", str(tmp / "run")],
                                stdout=f, stderr=subprocess.STDOUT, env=C.child_env(), cwd=C.ROOT)
        sampler = TreeSampler(proc.pid).start()
        rc = proc.wait(timeout=4 * 3600)
        sampler.stop()
    wall = time.perf_counter() - t0
    if rc != 0:
        raise RuntimeError(f"distbench run exited {rc}:\n" + "\n".join(log.read_text().splitlines()[-20:]))
    recs = {r["strategy"]: r for r in C.read_records(tmp / "run")}
    parent = max((p for p in sampler.peaks.values() if not p[2]), default=(0, "", ""))
    lines = [f"## Larger than memory: {size / 1e9:.2f} GB of Parquet"
             + ("" if rows_per_group else ", one row group per file"), "",
             f"`{C.command_line('parquet_memory.py', argv)}` on {C.utc_now()}; {C.machine_info()}; load "
             f"{C.load_average()}; {wall:.0f} s. Data: {size / 1e9:.2f} GB on disk "
             f"({next(iter(recs.values()))['workload']['sizes']} rows, 32x32x3 float32, "
             + (f"row groups of {rows_per_group} rows" if rows_per_group else "one row group per file")
             + f" in {files} file(s); the test split held out row by row, stratified, while streaming), "
             "MLP [64], 1 epoch, global batch 256, 2 workers. Peak "
             "resident memory (VmHWM) of every process of each configuration, sampled 4 times a second; the "
             "sweep's own process (it validates every value once and evaluates the test split, both block by "
             f"block) peaked at {parent[0] / 2**20:.0f} MiB.", "",
             "| strategy | status | samples/s | largest process peak | processes (role: peak MiB) |",
             "|---|---|---|---|---|"]
    for name in strategies:
        r = recs.get(name, {})
        mine = [(h, cmd) for h, cmd, key in sampler.peaks.values() if key == r.get("config_id", "?") + "_r0"]
        by_role: dict[str, int] = {}
        for h, cmd in mine:
            by_role[role(cmd)] = max(by_role.get(role(cmd), 0), h)
        top = max((h for h, _ in mine), default=0)
        sps = r.get("samples_per_s")
        lines.append(f"| `{name}` | {r.get('status', 'missing')} | {'-' if sps is None else f'{sps:.0f}'} | "
                     f"{top / 2**20:.0f} MiB ({100 * top / size:.0f}% of the data) | "
                     + "; ".join(f"{k}: {v / 2**20:.0f}" for k, v in sorted(by_role.items())) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        C.write_section(args.write, "parquet_memory" if rows_per_group else "parquet_memory_one_row_group", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
