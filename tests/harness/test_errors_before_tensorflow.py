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
