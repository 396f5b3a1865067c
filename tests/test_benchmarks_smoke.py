"""One smoke test per benchmark script: it starts with ``--quick`` and writes its table
(its marked section) into a temporary BENCHMARKS file. The real benchmarks run only in
``make bench``; these check that each script still runs end to end (~2 minutes in all,
most of it TensorFlow, Spark and Horovod start-up).

``ps_throughput.py`` is exercised through ``run_all.py --only ps_throughput`` (which
also checks the header). ``elephas_peer.py --quick`` never installs elephas: without
its environment (``benchmarks/.elephas-venv``) it writes the distbench side and says
elephas was not run. ``startup_floor.py`` runs a fraction of ``--quick`` (``single`` alone)
unless ``--long`` is given.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"

pytestmark = pytest.mark.integration


def run_quick(script: str, out: Path, *extra: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``benchmarks/<script> --quick --write out`` with this interpreter."""
    cp = subprocess.run([sys.executable, str(BENCH / script), "--quick", "--write", str(out), *extra],
                        capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert cp.returncode == 0, f"{script} exited {cp.returncode}:\n{(cp.stdout + cp.stderr)[-3000:]}"
    return cp


def section(path: Path, name: str) -> str:
    """The text of section ``name`` of ``path`` (asserting it is there)."""
    text = path.read_text()
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    assert start in text and end in text, f"no {name} section in:\n{text[:2000]}"
    return text.split(start, 1)[1].split(end, 1)[0]


def test_harness_overhead_quick(tmp_path):
    out = tmp_path / "B.md"
    out.write_text("# Benchmarks\n\n<!-- other:start -->\nkeep me\n<!-- other:end -->\n")
    run_quick("harness_overhead.py", out)
    s = section(out, "harness_overhead")
    assert "Ratio distbench / plain training time" in s and "| plain Keras `model.fit` |" in s
    assert section(out, "other").strip() == "keep me"  # others' sections untouched


def test_elephas_peer_quick(tmp_path, request):
    if not request.config.getoption("--long"):
        pytest.skip("about 45 s (Spark sweeps): runs with --long and in make bench")
    out = tmp_path / "B.md"
    run_quick("elephas_peer.py", out)
    s = section(out, "elephas_peer")
    assert "| distbench `spark_ps:adag` |" in s
    assert "| elephas `SparkModel` (sync) |" in s or "elephas not run: no environment" in s


def test_step_time_quick(tmp_path):
    out = tmp_path / "B.md"
    run_quick("step_time.py", out)
    s = section(out, "step_time")
    assert "| `single` | 1 |" in s and "| `mirrored` | 2 |" in s and "samples/s" in s
    assert "= 36.8 MFLOP/sample" in s  # 3 x the forward FLOPs of the cnn
    m = section(out, "scaling_model")
    assert "ring allreduce" in m and "1024" in m


@pytest.mark.skipif(not (BENCH / "allreduce.py").exists(), reason="requires benchmarks/allreduce.py (not present)")
def test_allreduce_quick(tmp_path):
    out = tmp_path / "B.md"
    run_quick("allreduce.py", out)
    assert "busbw" in section(out, "allreduce")


def test_run_all_quick_writes_header_and_sections(tmp_path):
    out = tmp_path / "B.md"
    out.write_text("# Benchmarks\n\n<!-- other:start -->\nkeep me\n<!-- other:end -->\n")
    cp = subprocess.run([sys.executable, str(BENCH / "run_all.py"), "--quick", "--only", "ps_throughput",
                         "--write", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert cp.returncode == 0, (cp.stdout + cp.stderr)[-3000:]
    text = out.read_text()
    assert text.startswith("# Benchmarks\n")
    assert text.index("<!-- header:start -->") < text.index("<!-- other:start -->")
    head = section(out, "header")
    assert "| `ps_throughput.py` | ok |" in head and "machine:" in head and "generated:" in head
    assert "round trips/s" in section(out, "ps_throughput")
    assert section(out, "other").strip() == "keep me"


def test_parquet_memory_quick(tmp_path, request):
    if not request.config.getoption("--long"):
        pytest.skip("about 45 s (three sweeps with memory sampling): runs with --long and in make bench")
    out = tmp_path / "B.md"
    run_quick("parquet_memory.py", out, "--data", str(tmp_path / "data"))
    s = section(out, "parquet_memory")
    assert "| `single` | ok |" in s and "| `spark_ps:adag` | ok |" in s and "Spark Python worker (replica)" in s


def test_resnet_synthetic_quick(tmp_path, request):
    if not request.config.getoption("--long"):
        pytest.skip("about 3 minutes (4 configurations and 2 Horovod runs): runs with --long and in make bench")
    out = tmp_path / "B.md"
    run_quick("resnet_synthetic.py", out, timeout=1200)
    s = section(out, "resnet_synthetic")
    assert "| distbench `horovod` | 2 |" in s and "| Horovod synthetic loop | 2 |" in s


def test_sweep_startup_quick(tmp_path, request):
    if not request.config.getoption("--long"):
        pytest.skip("about 3 minutes (two sweeps with Spark): runs with --long and in make bench")
    out = tmp_path / "B.md"
    run_quick("sweep_startup.py", out, timeout=1200)
    s = section(out, "sweep_startup")
    assert "| separate |" in s and "| shared |" in s and "one hash in every record of both modes" in s
    same = s.split("identical for", 1)[1].split(";")[0]  # the synchronous optimizers on both shared engines
    assert "spark_ps:easgd" in same and "mpi_ps:easgd" in same and "mpi_ps:averaging" in same


def test_profile_step_quick(tmp_path, request):
    if not request.config.getoption("--long"):
        pytest.skip("about 35 s (compute probe, a run and a profile): runs with --long and in make bench")
    out = tmp_path / "B.md"
    run_quick("profile_step.py", out)
    s = section(out, "profile_step")
    assert "| this | `single` | 1 |" in s and "ratio to single" in s
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in s.splitlines() if ln.startswith("| this | `single` | ")]
    thr, prof = (next(r for r in rows if len(r) == n) for n in (7, 13))  # the throughput and the profile rows
    assert float(prof[2]) > 0 and float(prof[3]) > 0, prof  # step and op time measured, in ms
    assert 0 < float(thr[5].rstrip("%")) and 0 < float(prof[12].rstrip("%")), (thr, prof)  # fractions of the floor
    assert "compute floor (as in `benchmarks/step_time.py`)" in s


def test_startup_floor_quick(tmp_path, request):
    # a fraction of --quick (single alone, ~15-25 s); --long runs the whole --quick (single and mirrored)
    out = tmp_path / "B.md"
    run_quick("startup_floor.py", out, *([] if request.config.getoption("--long") else ["--strategies", "single"]))
    s = section(out, "startup_floor")
    assert "engine start / floor" in s and "load average at start" in s
    row = next(ln for ln in s.splitlines() if ln.startswith("| `single` |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert float(cells[1].split()[0]) > 0 and float(cells[3].split()[0]) > 0, row  # engine start, floor
    assert float(cells[4].split()[0]) > 0 and "importing tensorflow and keras" in cells[7], row


def test_gpu_check_refuses_without_a_gpu(tmp_path):
    cp = subprocess.run([sys.executable, str(BENCH / "gpu_check.py"), "--dir", str(tmp_path / "r")],
                        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert cp.returncode == 2 and "lists no GPU here" in cp.stderr  # this machine has none (a GPU one writes)


def test_gpu_check_gpu_path_with_a_fake_nvidia_smi(tmp_path):
    """The path a GPU machine takes (user test: it crashed in the sampler's stop): here the
    listed GPUs cannot be used (no CUDA libraries), so the GPU rows are unavailable with the
    reason, the CPU rows ok, the utilisation sampled from the fake, the section written."""
    import os

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text('#!/bin/sh\ncase "$1" in -L) echo "GPU 0: NVIDIA A100 (UUID: GPU-a)";;\n'
                                        '*) echo "0, 37, 1024";; esac\n')
    (bin_dir / "nvidia-smi").chmod(0o755)
    out = tmp_path / "B.md"
    cp = subprocess.run([sys.executable, str(BENCH / "gpu_check.py"), "--strategies", "single", "--epochs", "1",
                         "--dir", str(tmp_path / "r"), "--write", str(out)], capture_output=True, text=True,
                        timeout=600, cwd=ROOT, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert cp.returncode == 0, cp.stdout + cp.stderr
    s = section(out, "gpu_check")
    assert "| `single` | unavailable: this machine has 1 NVIDIA GPU(s)" in s and "GPU 0: utilisation median 37%" in s
    assert re.search(r"\| - \| - \| [0-9,]+ \| - \|", s), s  # no GPU device or samples/s; the CPU sweep's samples/s


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("*.py") if not p.name.startswith("_")))
def test_every_benchmark_script_starts(script):
    """``--help`` of every script: its imports resolve (emulated_links.py, whose smoke test
    runs only with --long, failed at import for days after a module moved)."""
    cp = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True,
                        timeout=120, cwd=ROOT)
    assert cp.returncode == 0 and "usage:" in cp.stdout, (cp.stdout + cp.stderr)[-2000:]
