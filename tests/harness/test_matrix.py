"""Matrix expansion and resume bookkeeping (no engine started)."""

from __future__ import annotations

import pytest

from distbench import config
from distbench.config import ConfigError
from distbench.harness.matrix import ConfigPoint, expand
from distbench.harness.rundir import prepare_run_dir


def test_expand_repeats_and_single_runs_once_per_repeat():
    cfg = config.override(config.load(None), run__strategies=["single", "mirrored"], run__workers=[1, 2, 4],
                          run__repeats=2)
    keys = [p.key for p in expand(cfg)]
    assert keys == ["single_w1_r0", "single_w1_r1", "mirrored_w1_r0", "mirrored_w1_r1", "mirrored_w2_r0",
                    "mirrored_w2_r1", "mirrored_w4_r0", "mirrored_w4_r1"]


def test_a_window_given_twice_is_one_configuration(caplog):
    # helper-40: windows = [2, 2] trained mpi_ps:adag twice, and the second record was dropped as "corrupt"
    from distbench.data import load_dataset
    from distbench.workload import warn_windows

    cfg = config.override(config.load(None), run__strategies=["single", "mpi_ps:adag"], ps__windows=[2, 2, 5000],
                          ps__communication_window=4, run__repeats=1, training__epochs=2)
    assert [p.key for p in expand(cfg)] == ["single_w1_r0", "mpi_ps-adag_w2_win2_r0", "mpi_ps-adag_w2_win5000_r0"]
    warn_windows(cfg, load_dataset(cfg.data, cfg.training.seed))  # digits: 20 steps of 64 per epoch
    said = [r.getMessage() for r in caplog.records]
    assert "ps.communication_window = 4 is not used: ps.windows [2, 2, 5000] sweeps the window; leave one out" in said
    assert any(m.startswith("communication window 5000: each parameter-server replica takes 40 steps in the whole run "
                            "(2 epochs x 20)") for m in said)
    assert not any(m.startswith("communication window 2:") for m in said)
    caplog.clear()  # helper-42: windows in a sweep without a parameter server ran without a word
    warn_windows(config.override(cfg, run__strategies=["single", "horovod"]), load_dataset(cfg.data, cfg.training.seed))
    assert [r.getMessage() for r in caplog.records] == [  # helper-44: the window too
        "ps.windows [2, 2, 5000] and ps.communication_window = 4 are not used: no parameter-server strategy "
        "(spark_ps:..., mpi_ps:...) is in this sweep"]
    caplog.clear()  # helper-44: one epoch's steps as the window that commits every epoch named the window warned of
    warn_windows(config.override(cfg, ps__windows=[20], ps__communication_window=0, training__epochs=1),
                 load_dataset(cfg.data, cfg.training.seed))
    assert [r.getMessage() for r in caplog.records] == [
        "communication window 20: each parameter-server replica takes 20 steps in the whole run (1 epoch x 20), so "
        "the centre is updated once, at the end: a window under 20 commits before the end, or train more epochs"]


def test_elastic_settings_in_a_sweep_without_an_elastic_optimizer_are_named(caplog):
    # helper-43: [ps] rho and learning_rate were taken without a word in a sweep of single and mpi_ps:adag
    from distbench.workload import warn_elastic_settings

    cfg = config.override(config.load(None), run__strategies=["single", "mpi_ps:adag"], ps__rho=2.0,
                          ps__learning_rate=0.05)
    warn_elastic_settings(cfg)
    assert [r.getMessage() for r in caplog.records] == [
        "ps.rho = 2 and ps.learning_rate = 0.05 are not used: only the elastic optimizers (aeasgd, eamsgd or easgd of "
        "spark_ps: or mpi_ps:) read them, and this sweep has none"]
    caplog.clear()
    warn_elastic_settings(config.override(cfg, run__strategies=["mpi_ps:easgd"], ps__momentum=0.5))
    assert [r.getMessage() for r in caplog.records] == [
        "ps.momentum = 0.5 is not used: only eamsgd reads it, and this sweep has none"]
    caplog.clear()
    for strategies in (["spark_ps:eamsgd"], ["all"]):
        warn_elastic_settings(config.override(cfg, run__strategies=strategies, ps__momentum=0.5))
    warn_elastic_settings(config.override(cfg, ps__rho=5.0, ps__learning_rate=0.1))  # the defaults: nothing set
    assert caplog.records == []


def test_all_expands_to_every_registered_strategy():
    cfg = config.override(config.load(None), run__strategies=["all"])
    names = {p.strategy for p in expand(cfg)}
    assert {"single", "mirrored", "tpu"} <= names


def test_unknown_strategy():
    cfg = config.override(config.load(None), run__strategies=["mirorred"])
    with pytest.raises(ConfigError, match=r"unknown strategy 'mirorred'; did you mean 'mirrored'\? known strategies: single, mirrored"):
        expand(cfg)
    with pytest.raises(ConfigError, match=r"unknown strategy 'SINGLE'; did you mean 'single'\? "):  # helper-40
        expand(config.override(config.load(None), run__strategies=["SINGLE"]))


def test_resume_rules(tmp_path):
    cfg = config.override(config.load(None), training__epochs=1)
    prepare_run_dir(cfg, tmp_path / "r", resume=False)
    with pytest.raises(ConfigError, match="pass --resume"):
        prepare_run_dir(cfg, tmp_path / "r", resume=False)
    w = prepare_run_dir(config.override(cfg, run__workers=[4]), tmp_path / "r", resume=True)
    assert w.config.run.workers == [2, 4]  # the run holds both: config.json records the union
    with pytest.raises(ConfigError, match=r"training.epochs recorded 1, given 2; give the recorded values in "
                                          r"CONFIG_FILE"):
        prepare_run_dir(config.override(cfg, training__epochs=2), tmp_path / "r", resume=True)
    with pytest.raises(ConfigError, match=r"training.epochs recorded 1, given 2 by --epochs; drop --epochs"):
        prepare_run_dir(config.override(cfg, training__epochs=2), tmp_path / "r", resume=True,
                        flags={"training.epochs": "--epochs"})


def test_resume_inherits_the_recorded_options(tmp_path):
    from click.testing import CliRunner

    from distbench.cli import main
    from distbench.harness.rundir import recorded_config

    cfg = config.override(config.load(None), training__epochs=2, training__target_accuracy=0.5,
                          run__strategies=["single", "mirrored"])
    prepare_run_dir(cfg, tmp_path / "r", resume=False)
    # `run --resume --strategies single --out r` starts from the recorded config: epochs and target stay
    again = config.override(recorded_config(tmp_path / "r"), run__strategies=["single"])
    w = prepare_run_dir(again, tmp_path / "r", resume=True, flags={})
    assert (w.config.training.epochs, w.config.training.target_accuracy) == (2, 0.5)
    # config.json keeps describing the whole run (helper-31: it was narrowed to single, and a plain --resume
    # continued single alone); the larger repeats too
    assert w.config.run.strategies == ["single", "mirrored"]
    w = prepare_run_dir(config.override(recorded_config(tmp_path / "r"), run__strategies=["horovod"], run__repeats=3),
                        tmp_path / "r", resume=True, flags={})
    assert (w.config.run.strategies, w.config.run.repeats) == (["single", "mirrored", "horovod"], 3)
    w = prepare_run_dir(config.override(recorded_config(tmp_path / "r"), run__repeats=1), tmp_path / "r", resume=True)
    assert w.config.run.repeats == 3
    # an explicitly changed workload option is refused, naming the flag
    res = CliRunner().invoke(main, ["run", "--resume", "--epochs", "3", "--target-accuracy", "0.5",
                                    "--out", str(tmp_path / "r")])
    assert res.exit_code == 2, res.output
    assert "training.epochs recorded 2, given 3 by --epochs; drop --epochs" in res.output
    assert "target_accuracy" not in res.output  # given, but equal to the recorded value
    # a new target alone needs no new training: the refusal says how to score the runs against it
    res = CliRunner().invoke(main, ["run", "--resume", "--target-accuracy", "0.7", "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert f"use 'distbench report {tmp_path / 'r'} --target-accuracy 0.7'" in res.output
    res = CliRunner().invoke(main, ["run", "--resume"])  # no run directory named at all
    assert res.exit_code == 2 and "--resume needs the run directory to continue: pass --out DIR" in res.output


def test_a_resume_refused_for_a_presets_setting_names_the_preset(tmp_path):
    # user test (helper-31): it said "give the recorded values in CONFIG_FILE", and no CONFIG_FILE was given
    from click.testing import CliRunner

    from distbench.cli import main

    prepare_run_dir(config.override(config.load(None), training__epochs=1, training__global_batch_size=120),
                    tmp_path / "r", resume=False)
    res = CliRunner().invoke(main, ["run", "--resume", "--preset", "local-validation", "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and ("training.global_batch_size recorded 120, given 64 by --preset local-validation; "
                                   "ps.communication_window recorded 0, given 8 by --preset local-validation; "
                                   "drop --preset local-validation (the recorded values are used)") in res.output, \
        res.output  # helper-39: a [ps] setting is refused too; the preset named once


def test_failure_reason_names_the_jvm_cause_of_a_py4j_error():
    from distbench.harness.child import failure_reason

    class Py4JJavaError(Exception):
        pass

    e = Py4JJavaError("An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
                      ": java.lang.IllegalArgumentException: Executor memory 4 must be at least 471859200.\n"
                      "\tat org.apache.spark.memory.UnifiedMemoryManager$.getMaxMemory(UnifiedMemoryManager.scala:224)")
    reason = failure_reason(e)
    assert reason.startswith("Py4JJavaError: An error occurred while calling None.org.apache.spark")
    assert reason.endswith("(java.lang.IllegalArgumentException: Executor memory 4 must be at least 471859200.)")
    assert failure_reason(ValueError("bad\nsecond line")) == "ValueError: bad"
    assert len(failure_reason(RuntimeError("x" * 2000))) == 500


def test_failure_reason_never_ends_mid_sentence():
    from distbench.harness.child import failure_reason
    from distbench.launch.ranks import HorovodJobError

    # A cause announcing its next lines ("...was:") is completed by them, not cut after the colon.
    e = RuntimeError("mpirun failed\n--- log ---\nRuntimeError: Horovod detected that one or more processes exited "
                     "with non-zero status, thus causing the job to be terminated. The first process to do so was:\n"
                     "Process name: 0\nExit code: 1\n")
    assert failure_reason(e) == (
        "RuntimeError: mpirun failed (RuntimeError: Horovod detected that one or more processes exited with non-zero "
        "status, thus causing the job to be terminated. The first process to do so was: Process name: 0 Exit code: 1)")
    # An exception's own one-line reason is used as is; its log tails stay out.
    e = HorovodJobError("rank 1 stopped making progress; rank logs in /x\n--- tail ---\nValueError: later noise",
                        "rank 1")
    assert failure_reason(e) == "HorovodJobError: rank 1 stopped making progress; rank logs in /x"
    # Too long: cut after the last whole sentence that fits, and marked.
    long = "RuntimeError: " + " ".join(f"Sentence number {i} says something." for i in range(40))
    reason = failure_reason(ValueError(long))
    assert len(reason) <= 500 and reason.endswith("says something. [...]")


def test_recorded_learning_rate_is_the_one_each_strategy_trains_with(tmp_path):
    from distbench.harness.assembly import base_fields

    cfg = config.override(config.load(None), training__epochs=1, training__lr_scaling="linear")
    wl = prepare_run_dir(cfg, tmp_path / "r", resume=False)
    lr = cfg.training.learning_rate
    sync = base_fields(wl, ConfigPoint("horovod", 4, 0), 4)
    ps = base_fields(wl, ConfigPoint("spark_ps:adag", 4, 0), 4)
    tfps = base_fields(wl, ConfigPoint("tf_ps", 4, 0), 4)
    assert sync["learning_rate"] == 4 * lr  # synchronous: linear scaling applied
    assert ps["learning_rate"] == tfps["learning_rate"] == lr  # asynchronous replicas step with the base rate


def test_a_run_directory_given_as_the_config_file_names_both_commands(tmp_path):
    from click.testing import CliRunner

    from distbench.cli import main

    run = tmp_path / "r"
    run.mkdir()
    (run / "config.json").write_text("{}")
    res = CliRunner().invoke(main, ["run", str(run)])
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert f"is a directory, not a config file; to continue that run: distbench run --resume --out {run}" \
        in res.output and f"distbench run {run}/config.json" in res.output
