"""End to end: a straggler sweep with real engines. Worker 1 of Horovod (synchronous
allreduce) and of an MPI parameter server (ADAG, asynchronous) takes 1x and 32x its own
compute time per step; the synchronous step waits for it, so Horovod's training time grows
by about the delay injected into worker 1.

The slowdown is large (32x) because the comparison is between two runs: on CI's 2 cores the
other test process can slow the baseline run by as much as an 8x delay adds (0.7 s), and a
delay of about 3 s stays well clear of that noise."""

from __future__ import annotations

import pytest

from distbench.results.store import read_records
from tests.conftest import distbench, requires

pytestmark = pytest.mark.integration

# A wide MLP so that a step's compute (not Horovod's per-step coordination) is most of it:
# the injected delay is then large next to run-to-run noise.
CONFIG = """
[model]
hidden = [1024, 1024]
[training]
epochs = 2
threads = 1
[run]
strategies = ["horovod", "mpi_ps:adag"]
workers = [2]
timeout_s = 240
[scenario]
slowdowns = [1, 32]
"""


@requires(executable="mpirun", module="horovod")
def test_synchronous_step_time_grows_with_the_slowdown(tmp_path):
    (tmp_path / "s.toml").write_text(CONFIG)
    out = tmp_path / "run"
    cp = distbench("run", str(tmp_path / "s.toml"), "--out", str(out))
    assert cp.returncode == 0, cp.stderr[-3000:]
    recs = {r["config_id"]: r for r in read_records(out)}
    assert set(recs) == {"horovod_w2_slow1x", "horovod_w2_slow32x", "mpi_ps-adag_w2_slow1x", "mpi_ps-adag_w2_slow32x"}
    for cid, r in recs.items():
        assert r["status"] == "ok", r["reason"]
        if cid.endswith("slow1x"):  # the baseline: timed, never delayed
            assert "step_delays" not in r["details"]
            continue
        (slow,) = r["details"]["step_delays"].values()  # gathered from worker 1's process
        assert r["details"]["step_delays"].keys() == {"1"} and slow["slowdown"] == 32.0
        assert slow["delay_s"] == pytest.approx(31 * slow["compute_s"]) and slow["steps"] == r["steps"] // (
            1 if r["strategy"] == "horovod" else 2)  # a Horovod step is global; PS steps are summed over 2
    base, slowed = recs["horovod_w2_slow1x"], recs["horovod_w2_slow32x"]
    injected = slowed["details"]["step_delays"]["1"]["delay_s"]
    growth = slowed["timings"]["train_s"] - base["timings"]["train_s"]
    assert injected > 1.0  # 31x worker 1's compute over the run (about 3 s here): measurable
    assert growth > 0.5 * injected, (growth, injected)  # the synchronous step waits for the slowest worker
    assert slowed["final_test_accuracy"] == base["final_test_accuracy"]  # same steps, same arithmetic
    assert recs["mpi_ps-adag_w2_slow32x"]["details"]["staleness"]["histogram"]  # the centre's view of it
    report = (out / "report.md").read_text()
    assert "## Stragglers" in report and "| horovod (2 workers) | sync | 32x |" in report
    assert (out / "plots" / "straggler_sweep.png").exists()
    advice = distbench("advise", str(out))
    assert advice.returncode == 0 and "distbench run " in advice.stdout  # one run each: what to run next
