"""``[run] repeats = "auto"``: every configuration once, then rounds of the leader and the
runner-up that the recommendation cannot separate yet, up to 3 runs each; the sweep loop
(fake configurations), its progress lines, ``--resume``, and one real ``distbench run``."""

from __future__ import annotations

import functools
import re
from collections import Counter

import pytest

from distbench import config
from distbench.harness.matrix import auto_round, expand
from distbench.harness.assembly import make_record
from distbench.harness.rundir import prepare_run_dir
from distbench.harness.runner import run_sweep
from distbench.results.records import Status
from distbench.results.store import read_records
from tests.conftest import distbench

STRATEGIES = ["single", "mirrored", "multi_worker_mirrored"]


def _cfg(**kw):
    return config.override(config.load(None), **{"run__strategies": STRATEGIES, "training__epochs": 1, **kw})


def fake(ttts):
    """An ``execute`` for run_sweep that trains nothing: configuration ``config_id``'s run
    ``repeat`` reaches the target in ``ttts[config_id][repeat]`` seconds (``None``: a failed run)."""
    calls = []

    def execute(workload, point, run_id, prov, evaluator):
        calls.append(point.key)
        t = ttts[point.config_id][point.repeat]
        if t is None:
            return make_record(workload, point, run_id, prov, Status.FAILED, reason="crashed")
        return make_record(workload, point, run_id, prov, Status.OK, final_test_accuracy=0.95, time_to_target_s=t,
                           timings={"total_s": t + 5, "startup_s": 4.0, "train_s": t + 0.1, "eval_s": 0.5})

    execute.calls = calls
    return execute


def test_the_embedded_default_repeats_auto_and_a_config_file_keeps_one(tmp_path):
    assert config.load(None).run.repeats == "auto"
    (tmp_path / "c.toml").write_text('[run]\nstrategies = ["single"]\n')
    assert config.load(tmp_path / "c.toml").run.repeats == 1
    (tmp_path / "a.toml").write_text('[run]\nrepeats = "auto"\n')
    assert config.load(tmp_path / "a.toml").run.auto_repeats
    (tmp_path / "b.toml").write_text('[run]\nrepeats = "often"\n')
    with pytest.raises(config.ConfigError, match=r"^run.repeats = 'often': expected an integer or \"auto\"$"):
        config.load(tmp_path / "b.toml")
    assert [p.key for p in expand(_cfg())] == ["single_w1_r0", "mirrored_w2_r0", "multi_worker_mirrored_w2_r0"]
    from click.testing import CliRunner

    from distbench.cli import main

    res = CliRunner().invoke(main, ["run", "--repeats", "often", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and not (tmp_path / "x").exists()
    assert "--repeats 'often': expected a positive integer (runs of each configuration) or 'auto'" in res.output


def test_auto_rounds_run_the_two_contenders_until_advice_separates_them(tmp_path):
    cfg = _cfg()
    workload = prepare_run_dir(cfg, tmp_path / "r", resume=False)
    execute = fake({"single_w1": [2.0, 2.1, 2.2], "mirrored_w2": [1.0, 1.1, 1.2], "multi_worker_mirrored_w2": [9.0]})
    progress, rounds = [], []
    recs = run_sweep(cfg, tmp_path / "r", workload=workload, execute=execute,
                     on_progress=lambda key, i, n, rec: progress.append((key, i, n, rec is not None)),
                     on_round=lambda line, points: rounds.append((line, [p.key for p in points])))
    assert execute.calls == ["single_w1_r0", "mirrored_w2_r0", "multi_worker_mirrored_w2_r0",
                             "mirrored_w2_r1", "single_w1_r1", "mirrored_w2_r2", "single_w1_r2"]
    assert sorted((r["config_id"], r["repeat"]) for r in recs) == [
        ("mirrored_w2", 0), ("mirrored_w2", 1), ("mirrored_w2", 2), ("multi_worker_mirrored_w2", 0),
        ("single_w1", 0), ("single_w1", 1), ("single_w1", 2)]
    assert [(line.split(": running")[1], keys) for line, keys in rounds] == [
        (" each once more (run 2 of at most 3)", ["mirrored_w2_r1", "single_w1_r1"]),
        (" each once more (run 3 of at most 3)", ["mirrored_w2_r2", "single_w1_r2"])]
    assert rounds[0][0].startswith("repeats auto: mirrored (2 workers) leads single (1 worker) to 0.97 "
                                   "(1.00 s vs 2.00 s) after 1 run each; distbench advises from 3 runs of each")
    # the counter counts across the rounds; its total grows by each round when it is planned
    assert [(i, n) for _, i, n, done in progress if done] == [(1, 3), (2, 3), (3, 3), (4, 5), (5, 5), (6, 7), (7, 7)]
    assert [(i, n) for _, i, n, done in progress if not done][3] == (3, 5)


def test_auto_stops_at_three_runs_each_when_the_contenders_overlap_or_fail(tmp_path):
    cfg = _cfg(run__strategies=["single", "mirrored"])
    workload = prepare_run_dir(cfg, tmp_path / "r", resume=False)
    execute = fake({"single_w1": [1.0, 2.0, 1.5], "mirrored_w2": [1.2, 1.8, 1.6]})  # overlap at 3 runs each
    recs = run_sweep(cfg, tmp_path / "r", workload=workload, execute=execute)
    assert Counter(r["config_id"] for r in recs) == {"single_w1": 3, "mirrored_w2": 3}
    assert auto_round(expand(cfg), recs)[0] == []  # "no clear winner" at 3 runs each: done
    # a candidate whose later runs fail never runs a fourth time: the rounds stop, saying so
    workload = prepare_run_dir(cfg, tmp_path / "f", resume=False)
    execute = fake({"single_w1": [1.0, None, None], "mirrored_w2": [2.0, 2.1, 2.2]})
    rounds = []
    recs = run_sweep(cfg, tmp_path / "f", workload=workload, execute=execute,
                     on_round=lambda line, points: rounds.append((line, points)))
    assert Counter(r["config_id"] for r in recs) == {"single_w1": 3, "mirrored_w2": 3}
    assert max(r["repeat"] for r in recs) == 2
    line, points = rounds[-1]
    assert points == [] and line.endswith("but single (1 worker) already ran 3 times, the most \"auto\" runs: no more "
                                          "rounds (the recommendation says what to run next)")


def test_a_resumed_auto_run_continues_its_rounds(tmp_path):
    run = tmp_path / "r"
    cfg = _cfg(run__strategies=["single", "mirrored"], run__repeats=1)
    workload = prepare_run_dir(cfg, run, resume=False)
    ttts = {"single_w1": [2.0, 2.1, 2.2], "mirrored_w2": [1.0, 1.1, 1.2]}
    run_sweep(cfg, run, workload=workload, execute=fake(ttts))  # one run each, as a fixed `repeats = 1` does
    auto = config.override(cfg, run__repeats="auto")
    workload = prepare_run_dir(auto, run, resume=True)
    execute = fake(ttts)

    def interrupted(*args):  # Ctrl-C while the second round's second configuration runs
        if args[1].key == "single_w1_r1":
            raise KeyboardInterrupt
        return execute(*args)

    with pytest.raises(KeyboardInterrupt):
        run_sweep(auto, run, resume=True, workload=workload, execute=interrupted)
    assert execute.calls == ["mirrored_w2_r1"]
    progress = []
    recs = run_sweep(auto, run, resume=True, workload=workload, execute=execute,
                     on_progress=lambda key, i, n, rec: progress.append((key, i, n)) if rec else None)
    # single still needs its second run, mirrored its third; then single its third
    assert execute.calls == ["mirrored_w2_r1", "mirrored_w2_r2", "single_w1_r1", "single_w1_r2"]
    assert progress == [("mirrored_w2_r2", 1, 2), ("single_w1_r1", 2, 2), ("single_w1_r2", 3, 3)]
    assert sorted((r["config_id"], r["repeat"]) for r in recs) == [
        ("mirrored_w2", 0), ("mirrored_w2", 1), ("mirrored_w2", 2), ("single_w1", 0), ("single_w1", 1),
        ("single_w1", 2)]
    assert run_sweep(auto, run, resume=True, workload=workload, execute=execute) == recs  # nothing left to run
    assert len(execute.calls) == 4


def test_the_progress_lines_count_and_name_the_extra_rounds(tmp_path, capsys):
    from distbench.api import run_with_progress as _run_with_progress

    cfg = _cfg(run__strategies=["single", "mirrored"])
    workload = prepare_run_dir(cfg, tmp_path / "r", resume=False)
    execute = fake({"single_w1": [2.0, 2.1, 2.2], "mirrored_w2": [1.0, 1.1, 1.2]})
    _run_with_progress(cfg, tmp_path / "r", False, functools.partial(run_sweep, workload=workload, execute=execute))
    err = capsys.readouterr().err
    assert "[2/2] mirrored (2 workers): ok test acc 0.950" in err
    assert ("repeats auto: single (1 worker) leads mirrored (2 workers) to 0.97 (2.00 s vs 1.00 s)" not in err and
            "repeats auto: mirrored (2 workers) leads single (1 worker) to 0.97 (1.00 s vs 2.00 s) after 1 run each"
            in err)
    assert "[4/4] single (1 worker), repeat 2 of at most 3: ok" in err
    assert "[6/6] single (1 worker), repeat 3 of at most 3: ok" in err and "_r1" not in err


@pytest.mark.integration
def test_distbench_run_repeats_auto_ends_with_advice(tmp_path):
    """A real sweep of two cheap strategies under the embedded default's "auto": one run
    each, then both twice more (the only two candidates), and advice at the end."""
    out = tmp_path / "run"
    cp = distbench("run", "--strategies", "single,mirrored", "--epochs", "3", "--target-accuracy", "0.8",
                   "--out", str(out), timeout=900)
    assert cp.returncode == 0, cp.stderr[-3000:]
    recs = read_records(out)
    assert all(r["status"] == "ok" for r in recs), [r["reason"] for r in recs]
    assert sorted((r["config_id"], r["repeat"]) for r in recs) == [
        ("mirrored_w2", 0), ("mirrored_w2", 1), ("mirrored_w2", 2), ("single_w1", 0), ("single_w1", 1),
        ("single_w1", 2)]
    rounds = [ln for ln in cp.stderr.splitlines() if ln.startswith("repeats auto: ")]
    assert len(rounds) == 2 and "after 1 run each" in rounds[0] and "(run 2 of at most 3)" in rounds[0], rounds
    assert "after 2 runs each" in rounds[1] and "(run 3 of at most 3)" in rounds[1], rounds
    assert re.search(r"^\[6/6\] \w+ \(\d workers?\), repeat 3 of at most 3: ok", cp.stderr, re.M), cp.stderr[-2000:]
    text = " ".join(cp.stdout.split())  # the terminal wraps the recommendation line
    assert re.search(r"- Recommendation \(distbench advise \S+ for the reasons\): (Recommended: |No clear winner: )",
                     text), text[-3000:]
    assert "No advice yet" not in text
