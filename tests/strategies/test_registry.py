"""The strategy registry: duplicate names refused, atomic plugin loading, families, suggestions."""

from __future__ import annotations

import sys
import textwrap

import pytest

from distbench.config import ConfigError, ExperimentConfig, RunConfig
from distbench.harness.matrix import strategy_names
from distbench.strategies import registry

PLUGIN = """
from distbench.strategies.base import Strategy
from distbench.strategies.registry import register

@register
class Mine(Strategy):
    name = {name!r}
    description = "test plugin"

    def launch(self, ctx):
        raise RuntimeError("not for running")
"""


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """Write plugin modules into a folder on sys.path; reload the registry afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(module: str, body: str) -> str:
        (tmp_path / f"{module}.py").write_text(textwrap.dedent(body))
        return module

    yield write
    for m in [m for m in sys.modules if m.startswith("dbplug_")]:
        del sys.modules[m]
        registry._BY_MODULE.pop(m, None)
    monkeypatch.delenv("DISTBENCH_PLUGINS", raising=False)
    monkeypatch.setattr(registry, "_loaded", False)
    registry.names()  # reload without the plugins


def _reload(monkeypatch, plugins_env: str) -> None:
    monkeypatch.setenv("DISTBENCH_PLUGINS", plugins_env)
    monkeypatch.setattr(registry, "_loaded", False)


def test_plugin_strategy_is_registered(plugins, monkeypatch):
    _reload(monkeypatch, plugins("dbplug_ok", PLUGIN.format(name="my_strategy")))
    assert registry.names()[-1] == "my_strategy" and registry.get("my_strategy").description == "test plugin"


def test_a_name_registered_twice_names_both_modules(plugins, monkeypatch):
    _reload(monkeypatch, plugins("dbplug_dup", PLUGIN.format(name="horovod")))
    with pytest.raises(ConfigError, match="'horovod' is registered twice: by distbench.strategies.horovod and by "
                                          "dbplug_dup"):
        registry.names()


def test_a_failing_plugin_leaves_no_half_loaded_registry(plugins, monkeypatch):
    good = plugins("dbplug_good", PLUGIN.format(name="good_one"))
    bad = plugins("dbplug_bad", "import no_such_module_anywhere\n")
    _reload(monkeypatch, f"{good},{bad}")
    with pytest.raises(ConfigError, match="DISTBENCH_PLUGINS names module 'dbplug_bad'"):
        registry.names()
    assert registry._loaded is False  # the next look-up tries again
    monkeypatch.setenv("DISTBENCH_PLUGINS", good)
    assert "good_one" in registry.names()


def test_families_and_all_expand_and_typos_get_suggestions():
    fam = registry.families()
    assert fam["spark_ps"] == [f"spark_ps:{o}" for o in
                               ("downpour", "adag", "dynsgd", "aeasgd", "eamsgd", "easgd", "averaging")]
    assert registry.family_of("mpi_ps:adag") == "mpi_ps" and registry.family_of("single") is None
    cfg = ExperimentConfig(run=RunConfig(strategies=["single", "spark_ps", "mpi_ps:all", "spark_ps:adag"]))
    assert strategy_names(cfg) == ["single"] + fam["spark_ps"] + fam["mpi_ps"]
    with pytest.raises(ConfigError, match="unknown strategy 'horovd'; did you mean 'horovod'"):
        strategy_names(ExperimentConfig(run=RunConfig(strategies=["horovd"])))
    # each family member is its own class with its own name (nothing overwritten per instance)
    a, b = registry.get("spark_ps:adag"), registry.get("spark_ps:downpour")
    assert (type(a).name, a.optimizer, b.optimizer) == ("spark_ps:adag", "adag", "downpour")


def test_readme_example_strategy_is_the_plugin_and_it_trains(tmp_path):
    """docs/development.md shows tests/plugins/example_strategy.py verbatim, and it runs."""
    from tests.conftest import ROOT, distbench

    plugin = (ROOT / "tests/plugins/example_strategy.py").read_text()
    readme = (ROOT / "docs" / "development.md").read_text()
    body = plugin[plugin.index("from __future__"):].strip()
    assert body in readme, "docs/development.md's example differs from tests/plugins/example_strategy.py"
    out = tmp_path / "run"
    cp = distbench("run", "--strategies", "single,example_keras_fit", "--epochs", "3", "--repeats", "1",
                   "--out", str(out),
                   env={"DISTBENCH_PLUGINS": "tests.plugins.example_strategy"}, cwd=ROOT)
    assert cp.returncode == 0, cp.stderr[-2000:]
    from distbench.results.store import read_records

    recs = {r["strategy"]: r for r in read_records(out)}
    assert recs["example_keras_fit"]["status"] == "ok", recs["example_keras_fit"]["reason"]
    assert recs["example_keras_fit"]["initial_weights_sha256"] == recs["single"]["initial_weights_sha256"]
    assert recs["example_keras_fit"]["final_test_accuracy"] > 0.8
    assert len(recs["example_keras_fit"]["curve"]) == 3
