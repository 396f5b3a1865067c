"""Sweep progress: phases read from logs, ETA seeded per strategy family, names as users spell them."""

from __future__ import annotations

import pytest

from distbench.harness import progress as P


def test_display_name_spells_strategies_as_the_cli_does():
    assert P.display_name("spark_ps-adag_w2_r0") == "spark_ps:adag_w2_r0"
    assert P.display_name("mpi_ps-downpour_w4_bw100mbit_r1") == "mpi_ps:downpour_w4_bw100mbit_r1"
    assert P.display_name("multi_worker_mirrored_w2_r0") == "multi_worker_mirrored_w2_r0"
    assert P.display_name("my-plugin_w2_r0") == "my-plugin_w2_r0"  # not a family: left alone


def test_phase_from_the_logs(tmp_path):
    key = "spark_ps-adag_w2_r0"
    assert P.phase(tmp_path, key) == "starting Spark"  # no log yet: the family's start-up
    assert P.phase(tmp_path, "single_w1_r0") == "starting"
    assert P.phase(tmp_path, "mpi_ps-adag_w2_bw100mbit_r0") == "starting mpirun"
    log = tmp_path / f"{key}.log"
    log.write_text("Using Spark's default log4j profile\n" + "worker 0 (pid 1, attempt 0): epoch 1/3 done: 20 steps\n"
                   "worker 0 (pid 1, attempt 0): epoch 2/3 done: 40 steps\n"
                   "worker 1 (pid 2, attempt 0): epoch 1/3 done: 20 steps\n")
    assert P.phase(tmp_path, key) == "training, epoch 2/3"  # the slowest worker's next epoch
    # per-process logs under logs/<key>/ (horovodrun's ranks)
    hk = "horovod_w2_r0"
    (tmp_path / hk / "rank.0").mkdir(parents=True)
    assert P.phase(tmp_path, hk) == "starting horovodrun"
    (tmp_path / hk / "rank.0" / "stdout").write_text("epoch 1/2 done\nepoch 2/2 done\n")
    assert P.phase(tmp_path, hk) == "evaluating"


def test_eta_is_seeded_per_family_then_measured():
    seed = P.STARTUP_SEED_S
    assert P.eta_s(["single", "spark_ps:adag"], []) == pytest.approx(seed["single"] + seed["spark_ps"])
    # after single finished in 26 s (19 s start-up): the others add its 7 s after start-up to their seeds
    finished = [("single", 26.0, 19.0)]
    assert P.eta_s(["horovod", "spark_ps:adag", "spark_ps:downpour"], finished) == pytest.approx(
        seed["horovod"] + 7 + 2 * (seed["spark_ps"] + 7))
    # once a Spark configuration finished, its measured wall time replaces the seed for the family
    finished.append(("spark_ps:adag", 121.0, 117.0))
    assert P.eta_s(["spark_ps:downpour", "my_plugin"], finished) == pytest.approx(
        121.0 + P.DEFAULT_STARTUP_S + 5.5)


def test_progress_lines_name_configurations_as_the_table_does(tmp_path, capsys):
    """The finished-configuration lines use the label of the table and headline
    (``spark_ps:adag (2 workers)``), not a mix of the config id and the strategy name."""
    from distbench import config
    from distbench.api import run_with_progress as _run_with_progress
    from distbench.harness.matrix import expand
    from distbench.results.records import new_record
    from distbench.config.scenario import Scenario

    cfg = config.override(config.load(None), run__strategies=["single", "spark_ps:adag"], run__repeats=2)
    points = expand(cfg)

    def fake_sweep(cfg, run_dir, resume, on_progress, on_round=None):
        for i, p in enumerate(points):
            on_progress(p.key, i, len(points), None)
            rec = new_record("run", p.strategy, p.workers, p.repeat, "ok", final_test_accuracy=0.9,
                             timings={"train_s": 1.0, "startup_s": 2.0})
            on_progress(p.key, i + 1, len(points), rec)
        return []

    _run_with_progress(cfg, tmp_path, False, fake_sweep)
    err = capsys.readouterr().err
    assert "[4/4] spark_ps:adag (2 workers), repeat 2/2: ok test acc 0.900, train 1.0 s" in err
    assert "[1/4] single (1 worker), repeat 1/2: ok" in err and "spark_ps-adag" not in err and "_r0" not in err
    point = next(p for p in points if p.strategy == "spark_ps:adag")
    assert point.label == "spark_ps:adag (2 workers)"
    assert type(point)("horovod", 2, 0, scenario=Scenario(1, 4.0)).label == "horovod (2 workers, w1 4x)"


def test_a_long_reason_is_cut_to_a_terminals_width_and_whole_in_a_log(tmp_path, capsys, monkeypatch):
    from distbench import config
    from distbench.api import run_with_progress as _run_with_progress
    from distbench.harness.matrix import expand
    from distbench.results.records import new_record

    monkeypatch.setenv("COLUMNS", "80")
    cfg = config.override(config.load(None), run__strategies=["tpu"])
    (point,) = expand(cfg)
    why = "no TPU found: TPUClusterResolver has nothing to connect to here " + "(no TPU_NAME set) " * 10

    def fake_sweep(cfg, run_dir, resume, on_progress, on_round=None):
        on_progress(point.key, 0, 1, None)
        on_progress(point.key, 1, 1, new_record("run", "tpu", 2, 0, "unavailable", reason=why))
        return []

    # a terminal: cut to its width (the whole reason is under the table)
    from distbench.api import _fit

    head = "[1/1] tpu (2 workers): unavailable "
    cut = head + _fit(why, 80 - len(head))
    assert cut.startswith(head + "no TPU found: TPUClusterResolver") and cut.endswith("…") and len(cut) <= 80
    # a log file or CI (not a terminal): whole (helper-32: "train 1.…" in a file)
    _run_with_progress(cfg, tmp_path, False, fake_sweep)
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("[1/1]")]
    assert line.rstrip() == head + why.rstrip(), line


def test_eta_counts_a_shared_engine_s_start_once():
    """The user test's default sweep: ETA ~19 min for a 4 min 43 s sweep, because every
    spark_ps and mpi_ps configuration was charged a whole engine start."""
    seed, nxt = P.STARTUP_SEED_S, P.SHARED_NEXT_S
    todo = ["spark_ps:adag", "spark_ps:downpour", "spark_ps:easgd"]
    assert P.eta_s(todo, [], shared={"spark_ps"}) == pytest.approx(seed["spark_ps"] + 2 * nxt)
    assert P.eta_s(todo, []) == pytest.approx(3 * seed["spark_ps"])  # separate applications
    # the first (engine start) finished in 30 s, 3 s of them after start-up; later ones use the next-seed, then measured
    finished = [("spark_ps:adag", 30.0, 27.0)]
    assert P.eta_s(todo[1:], finished, shared={"spark_ps"}) == pytest.approx(2 * (nxt + 3.0))
    finished.append(("spark_ps:downpour", 5.0, 2.0))
    assert P.eta_s(todo[2:], finished, shared={"spark_ps"}) == pytest.approx(5.0)
