"""SIGINT and SIGKILL to `distbench run` mid-sweep, then --resume: every configuration
recorded exactly once, no torn line, no orphaned training process."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from distbench.results.store import RESULTS_FILE, read_records
from tests.conftest import pids_with, distbench

pytestmark = pytest.mark.integration
STRATS = "single,mirrored,multi_worker_mirrored"


def _default_sigint() -> None:
    # A shell starting a background job (`make test &`, nohup) hands it SIGINT ignored, and
    # Python then never installs its KeyboardInterrupt handler: give the sweep Ctrl-C back.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "distbench", "run", "--strategies", STRATS, "--workers", "2",
                             "--epochs", "3", "--repeats", "1", "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            preexec_fn=_default_sigint,  # a terminal's progress line, as a user sees it
                            env={**os.environ, "TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "COLUMNS": "150"})


def _wait_for_records(out: Path, n: int, proc: subprocess.Popen, timeout: float = 240) -> None:
    t0 = time.monotonic()
    while len(read_records(out)) < n:
        assert proc.poll() is None and time.monotonic() - t0 < timeout
        time.sleep(0.3)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupt_then_resume(tmp_path, sig):
    out = tmp_path / "run"
    proc = _start(out)
    _wait_for_records(out, 1, proc)  # the first configuration is recorded, the second is running
    time.sleep(2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and b"--resume" in err
        # helper-38: this sweep's own strategies, workers and repeats, not config.json's union of every sweep's
        assert f"--strategies {STRATS} --workers 2 --repeats 1".encode() in re.sub(rb"\s+", b" ", err), err[-2000:]
        assert b"distbench: SIGINT: stopping the running configuration" in err  # said before the clean-up
        # the progress line left on screen says the configuration it shows was interrupted
        last = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", err).splitlines()
        assert any(re.search(rb"configuration 2/\d+ .* interrupted", ln) for ln in last), err[-2000:]
    time.sleep(1)
    assert pids_with(str(out)) == []  # children died with the sweep, even on SIGKILL
    before = len(read_records(out))
    with open(out / RESULTS_FILE, "a") as f:  # as if the writer had been killed mid-line
        f.write('{"run_id": "x", "config_id": "torn')
    cp = distbench("run", "--strategies", STRATS, "--workers", "2", "--epochs", "3", "--out", str(out), "--resume")
    assert cp.returncode == 0, cp.stderr[-2000:]
    assert "torn" in cp.stderr
    recs = read_records(out)
    counts = Counter((r["config_id"], r["repeat"]) for r in recs)
    assert set(counts) == {("single_w1", 0), ("mirrored_w2", 0), ("multi_worker_mirrored_w2", 0)}
    assert all(v == 1 for v in counts.values()) and before >= 1
    assert all(r["status"] == "ok" for r in recs)
    lines = (out / RESULTS_FILE).read_text().splitlines()
    assert len(lines) == 3  # the torn line is gone
    assert "multi_worker_mirrored" in (out / "report.md").read_text()


def test_ctrl_c_while_the_report_is_written_says_how_to_write_it_again(tmp_path, monkeypatch):
    # the user test: Ctrl-C after the last configuration left no report.md and no hint
    from click.testing import CliRunner

    from distbench import api, cli
    from distbench.cli import sweep
    from distbench.results.records import new_record

    recs = [new_record("r", "single", 1, 0, "ok")]
    monkeypatch.setattr(api, "run_with_progress", lambda *a, **k: recs)

    def interrupted(*a, **k):  # Ctrl-C while the report is written
        sweep._interrupt(signal.SIGINT, None)

    monkeypatch.setattr(api, "print_report", interrupted)
    out = tmp_path / "run"
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        res = CliRunner().invoke(cli.main, ["run", "--strategies", "single", "--epochs", "1", "--out", str(out)])
    finally:  # the run command installs its own handlers in this (the test's) process
        for sig, h in handlers.items():
            signal.signal(sig, h)
    assert res.exit_code == 130, res.output
    assert (f"distbench: interrupted while writing the report; all 1 record(s) are kept in {out}. Write it again "
            f"with: distbench report {out}") in res.stderr
    # the user test: it said "stopping the running configuration and its engine" with nothing running
    assert "distbench: SIGINT: stopping the report (every configuration has finished" in res.stderr
    assert "its engine" not in res.stderr


def test_ctrl_c_after_the_last_configuration_says_to_write_the_report(tmp_path, monkeypatch):
    # user test (helper-39): Ctrl-C once every configuration was recorded (an engine stopping) said to resume,
    # which would train nothing; the report was what was missing
    from click.testing import CliRunner

    from distbench import api, cli
    from distbench.results.records import new_record
    from distbench.results.store import append_record

    out = tmp_path / "run"

    def last_recorded_then_ctrl_c(cfg, run_dir, *a, **k):
        append_record(run_dir, new_record(run_dir.name, "single", 1, 0, "ok"))
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "run_with_progress", last_recorded_then_ctrl_c)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        res = CliRunner().invoke(cli.main, ["run", "--strategies", "single", "--epochs", "1", "--repeats", "1",
                                            "--out", str(out)])
    finally:
        for sig, h in handlers.items():
            signal.signal(sig, h)
    assert res.exit_code == 130, res.output
    assert (f"distbench: interrupted after every configuration was recorded; all 1 record(s) are kept in {out}. "
            f"Write the report with: distbench report {out}") in res.stderr
    assert "--resume" not in res.stderr


def test_the_progress_line_of_a_ctrl_c_between_configurations_names_the_sweep(tmp_path, capsys):
    # user test (helper-42): Ctrl-C after "[2/2] mpi_ps:easgd (2 workers): ok" left "2/2 mpi_ps:easgd (2 workers)
    # interrupted" on screen, a finished configuration read as interrupted
    from distbench import api, config
    from distbench.results.records import new_record

    cfg = config.override(config.load(None), run__strategies=["single"], run__repeats=1)

    def one_then_ctrl_c(cfg, run_dir, resume, on_progress, on_round):
        on_progress("single_w1_r0", 0, 1, None)
        on_progress("single_w1_r0", 1, 1, new_record("r", "single", 1, 0, "ok"))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        api.run_with_progress(cfg, tmp_path, False, one_then_ctrl_c)
    err = capsys.readouterr().err
    assert "[1/1] single" in err and "sweep interrupted" in " ".join(err.split()), err
    assert "single interrupted" not in " ".join(err.split()), err
