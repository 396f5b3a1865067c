"""The GPU check, one command on a machine with NVIDIA GPUs: every strategy on the GPUs and the CPU.

``distbench env``, then every strategy on the CNN workload on the GPUs and on the CPU,
each record's devices and samples/s side by side, and ``nvidia-smi`` utilisation sampled
while the GPU sweep trains.

Steps:

1. ``distbench env`` (printed into the section: the GPUs and whether TensorFlow, JAX and
   Horovod can use them).
2. ``distbench run --device gpu`` of every multi-process strategy and ``single`` on
   the ``cnn`` model (digits as 8x8x1 images), 2 workers, 1 repeat. While it runs,
   ``nvidia-smi --query-gpu=index,utilization.gpu,memory.used`` is sampled every second.
3. The same sweep with ``--device cpu`` (GPUs hidden), for each strategy's CPU row.
4. With exactly one GPU: ``mirrored`` again over two logical GPUs
   (``DISTBENCH_LOGICAL_GPUS=2``), so its multi-device path runs.

It writes section ``gpu_check`` of ``--write``: per strategy, status, the devices the
record names (``details.device_names``, ``rank_devices``, ``per_worker_devices``),
samples/s on the GPU and on the CPU and their ratio, and the utilisation samples
(median and largest per GPU). On a machine where ``nvidia-smi -L`` lists no GPU it says so
and exits 2 unless ``--allow-cpu`` (the CPU half alone: what the tests run).

Usage::

    python benchmarks/gpu_check.py [--dir DIR] [--epochs 3] [--write BENCHMARKS.md] [--allow-cpu]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

STRATEGIES = ["single", "mirrored", "multi_worker_mirrored", "tf_ps", "horovod", "horovod_mpi", "spark_ps:adag",
              "mpi_ps:adag", "keras_jax:data_parallel"]
CONFIG = """\
[data]
name = "digits"
[model]
name = "cnn"
[training]
epochs = {epochs}
global_batch_size = 128
target_accuracy = 0.9
[run]
strategies = {strategies}
workers = [2]
repeats = 1
timeout_s = 900.0
"""


def gpus_listed() -> list[str]:
    """``nvidia-smi -L`` lines (empty: no driver or no GPU)."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [ln for ln in out.stdout.splitlines() if ln.startswith("GPU ")] if out.returncode == 0 else []


class Sampler(threading.Thread):
    """``nvidia-smi`` utilisation (percent) and memory used (MiB) per GPU, every second,
    until :meth:`stop`."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: dict[str, list[tuple[float, float]]] = {}
        self._halt = threading.Event()  # not _stop: Thread.join calls a method of that name

    def run(self) -> None:
        """Sample until stopped (a failed ``nvidia-smi`` call is skipped)."""
        while not self._halt.wait(1.0):
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used",
                                      "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                continue
            for ln in out.stdout.splitlines():
                parts = [p.strip() for p in ln.split(",")]
                if len(parts) == 3 and all(p.replace(".", "").isdigit() for p in parts):
                    self.samples.setdefault(parts[0], []).append((float(parts[1]), float(parts[2])))

    def stop(self) -> None:
        """End the sampling and wait for the thread."""
        self._halt.set()
        self.join(timeout=15)


def sweep(root: Path, name: str, device: str, strategies: list[str], epochs: int,
          env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One ``distbench run --device DEVICE`` into ``root/name``; its records."""
    out = root / name
    cfg = root / f"{name}.toml"
    cfg.write_text(CONFIG.format(epochs=epochs, strategies="[" + ", ".join(f'"{s}"' for s in strategies) + "]"))
    args = [sys.executable, "-m", "distbench", "run", str(cfg), "--out", str(out), "--device", device]
    with open(root / f"{name}.log", "w") as log:
        subprocess.run(args, stdout=log, stderr=subprocess.STDOUT, env=C.child_env(**(env or {})), cwd=C.ROOT,
                       timeout=4 * 3600)
    return C.read_records(out)


def devices_of(rec: dict[str, Any]) -> str:
    """The devices a record names, in one cell."""
    d = rec.get("details") or {}
    for key in ("device_names", "rank_devices", "per_worker_devices"):
        if d.get(key):
            return ", ".join(str(x) for x in d[key])
    return ", ".join(str(x) for x in d.get("devices") or []) or "-"


def _sps(v: float | None) -> str:
    return f"{v:,.0f}" if v else "-"


def _status(r: dict[str, Any]) -> str:
    return r.get("status", "?") + (f": {r['reason']}" if r.get("reason") else "")


def table(gpu_recs: list[dict[str, Any]], cpu_recs: list[dict[str, Any]], extra: list[dict[str, Any]]) -> str:
    """The markdown rows: strategy, status on the GPU, devices, samples/s GPU and CPU, ratio
    (without GPU records: the CPU rows alone, status and devices)."""
    if not gpu_recs:
        return "\n".join(["| strategy | on the CPU | devices | samples/s |", "|---|---|---|---|"]
                         + [f"| `{r['strategy']}` | {_status(r)}"
                            f" | {devices_of(r)} | {_sps(r.get('samples_per_s'))} |"
                            for r in cpu_recs])
    cpu = {r["strategy"]: r for r in cpu_recs}
    rows = ["| strategy | on the GPU(s) | devices | samples/s GPU | samples/s CPU | GPU / CPU |",
            "|---|---|---|---|---|---|"]
    for r in gpu_recs + extra:
        c = cpu.get(r["strategy"]) or {}
        g_sps, c_sps = r.get("samples_per_s"), c.get("samples_per_s")
        status = _status(r)
        label = r["strategy"] + (" (2 logical GPUs)" if r in extra else "")
        rows.append(f"| `{label}` | {status} | {devices_of(r)} | {_sps(g_sps)} | {_sps(c_sps)} | "
                    + (f"{g_sps / c_sps:.2f} |" if g_sps and c_sps else "- |"))
    return "\n".join(rows)


def utilisation(s: Sampler) -> str:
    """One line per GPU: median and largest utilisation and memory used while the GPU sweep ran."""
    if not s.samples:
        return "No nvidia-smi samples (no GPU, or nvidia-smi failed)."
    return "\n".join(f"- GPU {i}: utilisation median {statistics.median(u for u, _ in v):.0f}%, largest "
                     f"{max(u for u, _ in v):.0f}%; memory used up to {max(m for _, m in v):.0f} MiB "
                     f"({len(v)} samples)" for i, v in sorted(s.samples.items()))


def main(argv: list[str] | None = None) -> int:
    """Run the check; 2 when there is no GPU and ``--allow-cpu`` was not given."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", help="where the runs go [default: a new temporary directory]")
    ap.add_argument("--epochs", type=int, default=3, help="epochs per configuration [default: 3]")
    ap.add_argument("--strategies", default=",".join(STRATEGIES), help="comma-separated [default: all of them]")
    ap.add_argument("--write", help="BENCHMARKS.md to update (section gpu_check)")
    ap.add_argument("--allow-cpu", action="store_true", help="without a GPU, run the CPU sweep alone (tests)")
    args = ap.parse_args(argv)
    gpus = gpus_listed()
    if not gpus and not args.allow_cpu:
        print("gpu_check: nvidia-smi -L lists no GPU here; run it on a machine with NVIDIA GPUs "
              "(--allow-cpu runs the CPU half alone)", file=sys.stderr)
        return 2
    root = Path(args.dir or tempfile.mkdtemp(prefix="distbench-gpu-check-"))
    root.mkdir(parents=True, exist_ok=True)
    strategies = [s for s in args.strategies.split(",") if s]
    started = time.monotonic()
    env_out = subprocess.run([sys.executable, "-m", "distbench", "env"], capture_output=True, text=True,
                             env=C.child_env(), cwd=C.ROOT, timeout=600).stdout
    gpu_recs: list[dict[str, Any]] = []
    extra: list[dict[str, Any]] = []
    sampler = Sampler()
    if gpus:
        sampler.start()
        gpu_recs = sweep(root, "gpu", "gpu", strategies, args.epochs)
        if len(gpus) == 1 and "mirrored" in strategies:
            extra = sweep(root, "gpu-logical", "gpu", ["mirrored"], args.epochs, {"DISTBENCH_LOGICAL_GPUS": "2"})
        sampler.stop()
    cpu_recs = sweep(root, "cpu", "cpu", strategies, args.epochs)
    md = (f"## GPU check (gpu_check)\n\n`{C.command_line('gpu_check.py', argv)}` on {C.utc_now()}; "
          f"{C.machine_info()}; {len(gpus)} GPU(s): {'; '.join(gpus) or 'none'}; "
          f"{time.monotonic() - started:.0f} s. CNN on digits (8x8x1), global batch 128, 2 workers, "
          f"{args.epochs} epochs, 1 repeat; the CPU rows with --device cpu in the same invocation.\n\n"
          + table(gpu_recs, cpu_recs, extra)
          + ("\n\nnvidia-smi while the GPU sweep trained:\n\n" + utilisation(sampler) if gpus else
             "\n\nNo GPU sweep: nvidia-smi -L lists no GPU here (--allow-cpu).")
          + "\n\n`distbench env`:\n\n```\n" + env_out.strip() + "\n```\n")
    print(md)
    if args.write and gpus:
        C.write_section(args.write, "gpu_check", md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
