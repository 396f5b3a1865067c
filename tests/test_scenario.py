"""The [scenario] section: parsing, checks against the sweep, one-line errors (exit 2), and
the scenario's identity in config ids and on the command line."""

from __future__ import annotations

import json

import pytest

from distbench import config
from distbench.config import ConfigError
from distbench.harness.matrix import expand
from distbench.results.records import config_id, new_record
from distbench.config.scenario import Scenario
from tests.conftest import distbench


def _cfg(tmp_path, text):
    p = tmp_path / "c.toml"
    p.write_text(text)
    return config.load(p)


def test_stragglers_and_slowdowns_give_the_same_points(tmp_path):
    a = _cfg(tmp_path, "[scenario]\nstragglers = [{ worker = 1, slowdown = 1.0 }, { worker = 1, slowdown = 3 }]\n")
    b = _cfg(tmp_path, "[scenario]\nslowdowns = [1, 3]\n")
    assert a.scenario.points() == b.scenario.points() == [Scenario(1, 1.0), Scenario(1, 3.0)]
    c = _cfg(tmp_path, "[scenario]\nslowdowns = [2]\nworker = 0\njitter = { cv = 0.3, seed = 7 }\n")
    assert c.scenario.points() == [Scenario(0, 2.0, 0.3, 7)]
    assert _cfg(tmp_path, "[scenario]\njitter = { cv = 0.2 }\n").scenario.points() == [Scenario(None, 1.0, 0.2, 0)]
    assert config.load(None).scenario.points() == []


def test_a_runs_config_json_reloads_to_the_same_config(tmp_path):
    cfg = _cfg(tmp_path, "[run]\nworkers = [2, 4]\n[scenario]\nstragglers = [{ worker = 1, slowdown = 2.0 }]\n"
                         "jitter = { cv = 0.1, seed = 3 }\n")
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg.to_dict()))
    assert config.load(p) == cfg
    p.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="expected a JSON object"):
        config.load(p)


def test_config_ids_and_records_carry_the_scenario():
    assert config_id("horovod", 2, scenario=Scenario(1, 1.0)) == "horovod_w2_slow1x"
    assert config_id("horovod", 2, scenario=Scenario(1, 2.5)) == "horovod_w2_slow2.5x"
    assert config_id("mpi_ps:adag", 4, 5, scenario=Scenario(0, 4.0, 0.3, 1)) == "mpi_ps-adag_w4_win5_slow4x_worker0_jit0.3"
    assert config_id("horovod", 2) == "horovod_w2"
    assert config_id("horovod", 2, None, "100mbit", scenario=Scenario(1, 2.0)) == "horovod_w2_bw100mbit_slow2x"
    rec = new_record("r", "horovod", 2, 0, "ok", scenario=Scenario(1, 2.0))
    assert rec["scenario"] == {"worker": 1, "slowdown": 2.0, "jitter_cv": 0.0, "jitter_seed": 0}
    assert new_record("r", "horovod", 2, 0, "ok")["scenario"] is None
    sc = Scenario(1, 2.0, 0.25, 9)
    assert Scenario.from_arg(sc.to_arg()) == sc and Scenario.from_arg(None) is None
    with pytest.raises(ConfigError, match="expected JSON"):
        Scenario.from_arg("{worker")
    with pytest.raises(ConfigError, match="slowdown = 0.5"):
        Scenario.from_arg('{"worker": 1, "slowdown": 0.5}')


def test_the_sweep_runs_multi_worker_strategies_once_per_scenario_and_single_once(tmp_path):
    cfg = _cfg(tmp_path, '[run]\nstrategies = ["single", "horovod", "mpi_ps:adag"]\nworkers = [2, 4]\nrepeats = 2\n'
                         "[scenario]\nslowdowns = [1, 2, 4]\n")
    points = expand(cfg)
    assert [p.key for p in points if p.strategy == "single"] == ["single_w1_r0", "single_w1_r1"]
    hv = [p.config_id for p in points if p.strategy == "horovod"]
    assert hv == [f"horovod_w{w}_slow{s}x" for w in (2, 4) for s in (1, 2, 4) for _ in range(2)]
    assert len(points) == 2 + 2 * (2 * 3 * 2)


def test_scenarios_and_emulated_link_rates_sweep_side_by_side(tmp_path):
    cfg = _cfg(tmp_path, '[run]\nstrategies = ["single", "horovod"]\nworkers = [2]\n'
                         '[cluster]\nemulate = { hosts = 2, slots = 1, bandwidth = ["100mbit", "1gbit"] }\n'
                         "[scenario]\nslowdowns = [1, 4]\n")
    assert [p.config_id for p in expand(cfg)] == ["single_w1"] + [
        f"horovod_w2_bw{bw}_slow{s}x" for bw in ("100mbit", "1gbit") for s in (1, 4)]


@pytest.mark.parametrize("scenario, needle", [
    ("stragglers = [{ worker = 2, slowdown = 2.0 }]",
     "scenario.stragglers[0]: worker = 2 is out of range: expected a worker index 0..1"),
    ("stragglers = [{ worker = -1, slowdown = 2.0 }]", "worker = -1 is out of range"),
    ("slowdowns = [1, 0.5]", "scenario.slowdowns: slowdown = 0.5: must be a finite number >= 1"),
    ("stragglers = [{ worker = 1, slowdown = 2.0, speed = 3 }]",
     "unknown key 'scenario.stragglers[0].speed' (value 3); allowed keys: worker, slowdown"),
    ("straggler = [{ worker = 1 }]", "unknown key 'scenario.straggler'"),
    ("jitter = { cv = 0.2, sigma = 1 }", "unknown key 'scenario.jitter.sigma'"),
    ("jitter = { cv = 1.0 }", "scenario.jitter.cv = 1.0: must be in [0, 1)"),
    ("stragglers = [{ slowdown = 2.0 }]", "names no worker"),
    ("stragglers = { worker = 1 }", "expected a list of tables"),
    ("stragglers = [{ worker = 1, slowdown = 2 }, { worker = 1, slowdown = 2 }]", "twice"),
    ("slowdowns = [2]\nstragglers = [{ worker = 1, slowdown = 2 }]", "both set"),
])
def test_bad_scenarios_are_one_line_errors(tmp_path, scenario, needle):
    with pytest.raises(ConfigError) as e:
        _cfg(tmp_path, f"[run]\nworkers = [2, 4]\n[scenario]\n{scenario}\n")
    assert needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("scenario, needle", [
    ("stragglers = [{ worker = 2, slowdown = 2.0 }]", "worker = 2 is out of range"),
    ("stragglers = [{ worker = 1, slowdown = 0.5 }]", "slowdown = 0.5: must be a finite number >= 1"),
    ("stragglers = [{ worker = 1, slowdown = 2.0, factor = 2 }]", "unknown key 'scenario.stragglers[0].factor'"),
])
def test_bad_scenarios_exit_2_with_one_line(tmp_path, scenario, needle):
    (tmp_path / "bad.toml").write_text(f"[run]\nworkers = [2]\n[scenario]\n{scenario}\n")
    res = distbench("run", str(tmp_path / "bad.toml"), "--out", str(tmp_path / "run"), timeout=120)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("distbench: error: ") and needle in lines[0]
    assert not (tmp_path / "run").exists()
