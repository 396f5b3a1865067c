"""``distbench run`` reports the errors that need no TensorFlow before importing it (issue 30:
a used ``--out`` took 18.8 s to be refused, TensorFlow's import nearly all of it): a run
directory that already holds a run, a resume that changes the workload, a bad data file.
A fake ``tensorflow`` package first on ``PYTHONPATH`` leaves a file behind when imported."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from distbench import config
from tests.conftest import ROOT, distbench


def _run(tmp_path, *args: str):
    fake = tmp_path / "fake" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    path = os.pathsep.join([str(fake.parent), str(ROOT), os.environ.get("PYTHONPATH", "")])
    cp = distbench("run", *args, env={"PYTHONPATH": path}, timeout=60)
    assert cp.returncode == 2 and cp.stderr.startswith("distbench: error: "), cp.stderr[-2000:]
    assert not (tmp_path / "imported").exists(), "TensorFlow was imported before the error"
    return cp.stderr


def _used_run_dir(tmp_path):
    run = tmp_path / "run"
    (run / "workload").mkdir(parents=True)
    cfg = config.override(config.load(None), training__epochs=1)
    (run / "config.json").write_text(json.dumps(cfg.to_dict()))
    return run


def test_a_used_run_directory_is_refused_before_tensorflow_is_imported(tmp_path):
    run = _used_run_dir(tmp_path)
    err = _run(tmp_path, "--strategies", "single", "--out", str(run))
    assert f"run directory {run} already holds a run: pass --resume" in err


def test_a_resume_that_changes_the_workload_is_refused_before_tensorflow_is_imported(tmp_path):
    run = _used_run_dir(tmp_path)
    err = _run(tmp_path, "--out", str(run), "--resume", "--epochs", "2")
    assert "training.epochs recorded 1, given 2 by --epochs" in err


def test_a_bad_data_file_is_refused_before_tensorflow_is_imported(tmp_path):
    np.savez(tmp_path / "bad.npz", x=np.zeros((100, 4)), y=np.zeros(90, int))
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[data]\nname = "npz"\npath = "{tmp_path / "bad.npz"}"\n')
    err = _run(tmp_path, str(cfg), "--strategies", "single", "--out", str(tmp_path / "run"))
    assert "x has 100 rows but y has 90" in err
    assert not (tmp_path / "run").exists()


def test_a_resume_with_nothing_left_to_run_writes_the_report_without_tensorflow(tmp_path):
    # a Run next followed twice, or a CI retry: it loaded the data and TensorFlow to train nothing (10 s on 2 cores)
    from distbench.harness.matrix import expand
    from distbench.results.records import new_record

    run = _used_run_dir(tmp_path)
    cfg = config.override(config.load(None), training__epochs=1, run__strategies=["single"], run__repeats=2)
    (run / "config.json").write_text(json.dumps(cfg.to_dict()))
    (run / "results.jsonl").write_text("".join(json.dumps(new_record("r", p.strategy, p.workers, p.repeat, "failed",
                                                                     reason="boom")) + "\n" for p in expand(cfg)))
    fake = tmp_path / "fake" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    path = os.pathsep.join([str(fake.parent), str(ROOT), os.environ.get("PYTHONPATH", "")])
    before = (run / "config.json").read_text()
    cp = distbench("run", "--out", str(run), "--resume", "--timeout", "100", env={"PYTHONPATH": path}, timeout=60)
    assert "sweep: nothing to run (every configuration was already recorded)" in cp.stdout, cp.stderr[-2000:]
    assert (run / "config.json").read_text() == before  # nothing ran: the run's settings stay (helper-31)
    assert cp.returncode == 1 and f"no configuration of {run} ended ok (2 failed)" in cp.stderr  # (every one failed)
    assert (run / "report.md").exists() and not (tmp_path / "imported").exists()
    cp = distbench("run", "--out", str(run), "--resume", "--repeats", "3", env={"PYTHONPATH": path}, timeout=60)
    # one more repeat to run: the workload is loaded to train it, as before (this fake one has none)
    assert cp.returncode == 2 and "holds no readable workload" in cp.stderr and "nothing to run" not in cp.stdout


class _Exited(Exception):
    pass


@pytest.mark.parametrize("tensorflow_loaded", [True, False])
def test_bad_input_after_tensorflow_skips_the_interpreter_teardown(monkeypatch, tensorflow_loaded):
    from distbench import cli

    def fake_exit(code):
        raise _Exited(code)

    monkeypatch.setattr(cli.os, "_exit", fake_exit)
    if tensorflow_loaded:
        monkeypatch.setitem(sys.modules, "tensorflow", sys.modules.get("tensorflow") or object())
    else:
        monkeypatch.delitem(sys.modules, "tensorflow", raising=False)
    with pytest.raises(_Exited if tensorflow_loaded else SystemExit) as e:
        cli.main(["run", "--workers", "0"])  # the console script's call: bad input, exit status 2
    assert (e.value.args[0] if tensorflow_loaded else e.value.code) == 2
    with pytest.raises(SystemExit) as ok:  # any other exit is left alone
        cli.main(["list", "--help"])
    assert ok.value.code == 0


def test_a_resume_names_every_changed_setting_in_every_section(tmp_path):
    # the user test: a change to [model] and [training] named only the [model] one
    from distbench.config import ConfigError
    from distbench.harness.rundir import check_run_dir

    run = _used_run_dir(tmp_path)
    cfg = config.override(config.load(None), training__epochs=2, model__hidden=[32])
    with pytest.raises(ConfigError) as e:
        check_run_dir(cfg, run, resume=True, flags={"training.epochs": "--epochs"})
    msg = str(e.value)
    assert "model.hidden recorded [512, 512], given [32]; training.epochs recorded 1, given 2 by --epochs" in msg, msg
    check_run_dir(config.override(config.load(None), training__epochs=1), run, resume=True)  # unchanged: no error
    # helper-39: another communication window pooled repeats of two windows under one configuration, unsaid
    with pytest.raises(ConfigError, match=r"^--resume: the workload and the strategies' settings must stay identical "
                                          r".*ps.communication_window recorded 0, given 8;"):
        check_run_dir(config.override(config.load(None), training__epochs=1, ps__communication_window=8), run,
                      resume=True)
    check_run_dir(config.override(config.load(None), training__epochs=1, ps__windows=[2, 8]), run, resume=True)
