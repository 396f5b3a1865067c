"""Config validation: every kind of bad input gives a ConfigError naming key and value."""

from __future__ import annotations

from pathlib import Path

import pytest

from distbench import config
from distbench.config import ConfigError


def test_default_is_valid():
    cfg = config.load(None)
    assert cfg.data.name == "digits" and cfg.run.workers == [2] and cfg.run.strategies == ["all"]
    assert cfg.spark.share_session and cfg.mpi.share_engine  # the sweep's engines are shared by default


def test_mpi_share_engine_can_be_turned_off(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("[mpi]\nshare_engine = false\n")
    assert config.load(p).mpi.share_engine is False


def test_one_value_where_a_list_is_expected_is_a_list_of_one(tmp_path):
    # the user test: workers = 2 was refused while --workers 2 is accepted
    p = tmp_path / "c.toml"
    p.write_text('[run]\nworkers = 4\nstrategies = "horovod"\n[training]\nglobal_batch_size = 64\n')
    cfg = config.load(p)
    assert cfg.run.workers == [4] and cfg.run.strategies == ["horovod"]
    with pytest.raises(ConfigError, match=r"run.workers = 'two': expected a list of integers, e.g. \[1, 2\]"):
        config.from_dict({"run": {"workers": "two"}})  # helper-44: it said "an integer", not that a list is read


def test_worker_counts_need_not_divide_the_batch_when_single_alone_runs():
    # the user test: a single-only run was refused for run.workers it does not use
    cfg = config.from_dict({"run": {"strategies": ["single"], "workers": [3]}, "training": {"global_batch_size": 64}})
    assert cfg.run.workers == [3]
    with pytest.raises(ConfigError, match="64 is not divisible by run.workers = 3"):
        config.from_dict({"run": {"strategies": ["single", "horovod"], "workers": [3]}})


def test_the_elastic_moving_rate_is_checked_only_where_an_elastic_optimizer_runs():
    # the user test (helper-42): `single` or `mpi_ps:adag` alone was refused for ps.rho
    from distbench.config.engines import ELASTIC
    from distbench.ps_async.rules import DEFAULTS

    assert set(ELASTIC) == {o for o, d in DEFAULTS.items() if "rho" in d}
    ps = {"learning_rate": 0.5, "rho": 5.0}
    assert config.from_dict({"run": {"strategies": ["single", "mpi_ps:adag"]}, "ps": ps}).ps.rho == 5.0
    for strategies in (["single", "spark_ps:eamsgd"], ["all"]):
        with pytest.raises(ConfigError, match="ps.learning_rate x ps.rho = 0.5 x 5 = 2.5"):
            config.from_dict({"run": {"strategies": strategies}, "ps": ps})


def test_toml_file_roundtrip(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[training]\nepochs = 3\nlearning_rate = 1\n[run]\nworkers = [1, 2]\n')
    cfg = config.load(p)
    assert cfg.training.epochs == 3 and cfg.training.learning_rate == 1.0 and cfg.run.workers == [1, 2]


@pytest.mark.parametrize("toml,needle", [
    ('[training]\nepochz = 3\n', "unknown key 'training.epochz' (value 3); did you mean 'training.epochs'? allowed keys "
                                 "in [training]: epochs, "),  # the user test: a misspelt section got one, a key none
    ('[training]\nxyz = 3\n', "unknown key 'training.xyz' (value 3); allowed keys in [training]: epochs, "),
    ('[training]\ntarget_accuracy = 97\n', "must be in (0, 1] (a fraction: for 97% write 0.97)"),
    ('[training]\ntarget_accuracy = 1.5\n', "must be in (0, 1], e.g. 0.95"),
    ('[model]\nfactory_dir = "/x"\n', "model.factory_dir = '/x' without model.factory"),  # helper-35: "for 1.5% write 0.015"
    ('[training]\nlr = 0.1\n', "unknown key 'training.lr' (value 0.1); did you mean 'training.learning_rate'?"),
    ('[training]\nbatch_size = 32\n', "did you mean 'training.global_batch_size'?"),
    ('[ps]\nwindow = 4\n', "did you mean 'ps.communication_window' or 'ps.windows'?"),  # helper-39: only the sweep
    ('[cluster]\nemulate = { hostz = 2 }\n', "unknown key 'cluster.emulate.hostz' (value 2); did you mean "
                                            "'cluster.emulate.hosts'? allowed keys in [cluster.emulate]: hosts, "),
    ('[trainin]\nepochs = 3\n', "unknown section [trainin]; did you mean [training]? allowed sections:"),
    ('[xyz]\nepochs = 3\n', "unknown section [xyz]; allowed sections:"),
    ('[ps]\nmomentum = -0.5\n', "ps.momentum = -0.5: must be in [0, 1)"),  # helper-45: only warned as unused
    ('[training]\nepochs = "3"\n', "training.epochs = '3': expected an integer"),
    ('[run]\nrepeats = true\n', 'run.repeats = true: expected an integer or "auto"'),  # as written, not True
    ('[training]\nepochs = 0\n', "training.epochs = 0: must be >= 1"),
    ('[training]\nlearning_rate = inf\n', "training.learning_rate = inf: must be a finite number > 0"),
    ('[training]\nlearning_rate = nan\n', "training.learning_rate = nan: must be a finite number > 0"),
    ('[run]\ntimeout_s = inf\n', "run.timeout_s = inf: must be a finite number of seconds > 0"),
    ('[ps]\nrho = inf\n', "ps.rho = inf: must be a finite number > 0"),
    ('[ps]\nlearning_rate = 0.5\n', "ps.learning_rate x ps.rho = 0.5 x 5 = 2.5: the elastic optimizers' moving "
                                    "rate alpha must be < 1"),  # the user test: accepted, then trained backwards
    ('[ps]\nlearning_rate = -1\n', "ps.learning_rate = -1"),
    ('[ps]\nwindows = [1, 0]\n', "ps.windows[1] = 0: must be >= 1"),
    ('[spark]\nconf = { "spark.x" = [1, 2] }\n', "spark.conf.spark.x = [1, 2]: expected a string"),
    ('[run]\nworkers = [0]\n', "run.workers = 0"),
    ('[mpi]\nshare_engine = "no"\n', "mpi.share_engine = 'no': expected"),
    ('[mpi]\nshare_sesion = false\n', "unknown key 'mpi.share_sesion'"),
    ('[training]\nglobal_batch_size = 2\n[run]\nworkers = [4]\n', "smaller than run.workers = 4"),
    ('[training]\nglobal_batch_size = 10\n[run]\nworkers = [4]\n', "not divisible by run.workers = 4"),
    ('[training]\nglobal_batch_size = 64\n[run]\nworkers = [2, 3, 4]\n',
     "(2, 3, 4: a multiple of 12, e.g. --batch-size 60 or global_batch_size = 60 under [training])"),
    ('[data]\nname = "cifar"\n', "data.name = 'cifar': expected one of"),
    ('[data]\nname = "mnist"\n', "data.path is empty"),
    ('[data]\nname = "mnist"\npath = "/nonexistent/x.npz"\n', "no such file"),
    ('[model]\ndropout = 1.5\n', "model.dropout = 1.5"),
    ('[training]\noptimizer = "lbfgs"\n', "training.optimizer = 'lbfgs'"),
    ('[training]\ntarget_accuracy = 2\n', "training.target_accuracy = 2.0"),
    ('[run]\ntimeout_s = -1\n', "run.timeout_s = -1.0"),
    ('[training]\nepochs = true\n', "expected an integer"),
    ('epochs = 3\n', "top-level key 'epochs' = 3 is outside any section; put it under [training]"),
    ('[training\n', "not valid TOML"),
    ('[model]\nactivation = "relux"\n', "model.activation = 'relux': expected one of relu"),
    ('[data]\nname = "npz"\n', "data.path is empty but data.name = 'npz' needs a local file: set data.path to an "
                               ".npz file with arrays x and y"),
    ('[data]\nname = "parquet"\n', "data.path is empty but data.name = 'parquet' needs the training data"),
    ('[data]\nname = "parquet"\npath = "x"\nfeatures_col = "f"\n', "needs data.label_col: name the label column"),
    ('[data]\nname = "parquet"\npath = "x"\nfeatures_col = ["a", "a"]\nlabel_col = "y"\n',
     "data.features_col = ['a', 'a']: expected distinct, non-empty column names"),
    ('[data]\nname = "parquet"\npath = "x"\nfeatures_col = 3\nlabel_col = "y"\n',
     "data.features_col = 3: expected a string or a list of strings"),
    ('[data]\nlabel_col = "y"\n', "data.label_col is set but data.name = 'digits' does not read it"),
    ('[data]\nname = "digits"\nfeature_shape = [8, 8]\n', "data.feature_shape = [8, 8]: expected sizes >= 1, "
                                                         "for data.name = 'npz' or 'parquet' only"),
    ('[data]\nclasses = 1\n', "data.classes = 1: must be >= 2"),
    ('[model]\nname = "resnet5"\n', ("model.name = 'resnet5': did you mean 'resnet50'? expected mlp, cnn or a "
                                     "keras.applications model: convnext_tiny, ")),
    ('[model]\nname = "transformer"\n', "model.name = 'transformer': expected mlp, cnn or a keras.applications"),
    ('[model]\npath = "nomodel.keras"\n', "model.path = 'nomodel.keras': no such file (relative paths are read from "
                                          "the directory distbench runs in, "),
    ('[model]\nfactory = "a.b:c"\npath = "m.keras"\n', ("model.factory = 'a.b:c' and model.path = 'm.keras' are "
                                                        "both set: choose one source")),
    ('[model]\nname = "cnn"\nfactory = "a.b:c"\n', ("model.name = 'cnn' and model.factory are both set: remove "
                                                    "model.name")),
    ('[model]\nfactory = "a.b.c"\n', "model.factory = 'a.b.c': expected 'package.module:function'"),
    ('[model]\nfactory = "a.b:c d"\n', "model.factory = 'a.b:c d': expected 'package.module:function'"),
    ('[model]\nreinit = true\n', "model.reinit = true needs model.path"),
    ('[model]\npath = "/nonexistent/m.keras"\n', "model.path = '/nonexistent/m.keras': no such file"),
    ('[model]\npath = "model.h5"\n', "model.path = 'model.h5': expected a Keras 3 '.keras' file"),
])
def test_bad_configs(tmp_path, toml, needle):
    p = tmp_path / "bad.toml"
    p.write_text(toml)
    with pytest.raises(ConfigError) as e:
        config.load(p)
    assert needle in str(e.value)


def test_parquet_keys_accept_one_column_or_a_list():
    one = config.from_dict({"data": {"name": "parquet", "path": "d/*.parquet", "features_col": "features",
                                     "label_col": "label", "feature_shape": [32, 32, 3]}})
    many = config.from_dict({"data": {"name": "parquet", "path": "d", "features_col": ["a", "b"], "label_col": "y"}})
    assert one.data.features_col == "features" and many.data.features_col == ["a", "b"]
    assert config.load(None).data.classes == 0  # inferred (synthetic: 10)


def test_model_sources_are_accepted_and_path_made_absolute(tmp_path, monkeypatch):
    (tmp_path / "m.keras").write_bytes(b"checked when the workload is made")
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "c.toml"
    p.write_text('[model]\npath = "m.keras"\nreinit = true\n')
    cfg = config.load(p)
    assert cfg.model.path == str(tmp_path / "m.keras") and cfg.model.reinit
    p.write_text('[model]\nfactory = "examples.my_model:build"\n')
    assert config.load(p).model.factory == "examples.my_model:build"
    p.write_text('[model]\nname = "mobilenet_v2"\n')
    assert config.load(p).model.name == "mobilenet_v2"


def test_missing_file():
    with pytest.raises(ConfigError, match="cannot read config file"):
        config.load("/nonexistent/cfg.toml")


def test_override_validates():
    cfg = config.load(None)
    assert config.override(cfg, run__workers=[4], training__epochs=2).run.workers == [4]
    with pytest.raises(ConfigError, match="run.workers"):
        config.override(cfg, run__workers=[0])


def test_presets_and_flags_win():
    cfg = config.apply_preset(config.load(None), "production")
    assert cfg.run.strategies == ["spark_ps:adag"] and cfg.run.workers == [10]
    assert cfg.ps.communication_window == 12 and cfg.training.global_batch_size == 320
    assert config.override(cfg, run__workers=[2]).run.workers == [2]
    for name in config.PRESETS:
        config.apply_preset(config.load(None), name)  # every preset is valid
    with pytest.raises(ConfigError, match="unknown preset 'fast'; expected one of local-validation"):
        config.apply_preset(config.load(None), "fast")
    with pytest.raises(ConfigError, match="unknown preset 'prod'; did you mean 'production'"):  # the user test
        config.apply_preset(config.load(None), "prod")


@pytest.mark.parametrize("path", sorted(Path(__file__).resolve().parents[1].joinpath("examples").glob("*.toml")),
                         ids=lambda p: p.name)
def test_every_example_config_loads(path):
    """Each shipped example is a valid config (the README points users at them)."""
    cfg = config.load(path)
    assert cfg.run.strategies


def test_the_embedded_default_is_examples_default_toml_and_differs_from_an_empty_file_in_four_keys(tmp_path):
    """``examples/default.toml`` writes out plain ``distbench run``'s experiment; a file
    without those keys keeps the fields' defaults (docs/configuration.md)."""
    example = Path(__file__).resolve().parents[1] / "examples" / "default.toml"
    assert config.load(example) == config.load(None)
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    a, b = config.load(None).to_dict(), config.load(empty).to_dict()
    differ = {f"{s}.{k}" for s in a for k in a[s] if a[s][k] != b[s][k]}
    assert differ == {"model.hidden", "training.epochs", "training.target_accuracy", "run.repeats"}
    assert (b["model"]["hidden"], b["training"]["epochs"], b["run"]["repeats"]) == ([64], 10, 1)


def test_spark_conf_scalars_become_strings(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[spark]\nconf = { "spark.task.cpus" = 1, "spark.python.worker.reuse" = true }\n')
    cfg = config.load(p)
    assert cfg.spark.conf == {"spark.task.cpus": "1", "spark.python.worker.reuse": "True"}


def test_relative_data_paths_are_recorded_absolute(tmp_path, monkeypatch):
    """A run started in one directory can be resumed (and its config re-read) from another."""
    (tmp_path / "mydata.npz").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[data]\nname = "npz"\npath = "mydata.npz"\n')
    assert config.load(cfg).data.path == str(tmp_path / "mydata.npz")
    cfg.write_text('[data]\nname = "parquet"\npath = "pq/*.parquet"\ntest_path = "s3://bucket/test"\n'
                   'features_col = "f"\nlabel_col = "y"\n')
    d = config.load(cfg).data
    assert (d.path, d.test_path) == (str(tmp_path / "pq" / "*.parquet"), "s3://bucket/test")
