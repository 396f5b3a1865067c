"""The Python API (api.py): distbench.compare from a script and a notebook, a model instance
and arrays or a DataFrame, the records read back; bad input raises the CLI's errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from distbench import api
from distbench.config import ConfigError
from distbench.harness.rundir import WORKLOAD_DIR
from distbench.data import DataError

ROOT = Path(__file__).resolve().parents[1]


def _digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.data / 16.0).astype(np.float32), d.target


def _model(outputs=10, inputs=64):
    import keras

    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((inputs,)), keras.layers.Dense(16, activation="relu"),
                             keras.layers.Dense(outputs)])


@pytest.mark.integration
def test_compare_a_model_instance_on_arrays(tmp_path):
    import distbench

    x, y = _digits()
    model = _model()
    res = distbench.compare(model, (x, y), strategies="single,horovod", workers=2, epochs=2, repeats=1,
                            target_accuracy=0.5, out=tmp_path / "run", training={"learning_rate": 0.3})
    df = res.records
    assert sorted(df.strategy) == ["horovod", "single"] and set(df.status) == {"ok"}
    assert (df.final_test_accuracy > 0.5).all()
    # the instance's weights are the run's initial weights, and the record names the saved file
    from distbench.workload import load_weights

    saved = load_weights(tmp_path / "run" / "workload" / "initial_weights.npz")
    assert len(saved) == len(model.get_weights())
    for w, s in zip(model.get_weights(), saved):
        np.testing.assert_array_equal(w, s)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["model"]["path"].endswith("inputs/model.keras")
    assert res.report["html"].exists() and "<table" in res._repr_html_() and res.headline
    assert "Recommended" in str(res.advise()) or "advice" in str(res.advise()).lower()
    # the same run read back later
    assert len(distbench.Results(tmp_path / "run").raw) == 2


def test_compare_errors_are_the_clis(tmp_path):
    import keras

    x, y = _digits()
    with pytest.raises(DataError, match="^compare's data: x has 1797 rows but y has 1796"):  # not our npz's path
        api.compare(_model(), (x, y[:-1]), strategies="single", out=tmp_path / "runs" / "a")
    assert not (tmp_path / "runs").exists()  # the folders the refused call made are gone
    with pytest.raises(DataError, match="string"):
        api.compare(_model(), (x, np.array(["a", "b"] * 898 + ["a"])), strategies="single", out=tmp_path / "b")
    two = keras.Model(inputs=(i := keras.Input((64,))), outputs=[keras.layers.Dense(10)(i), keras.layers.Dense(3)(i)])
    with pytest.raises(ConfigError, match="output"):
        api.compare(two, (x, y), strategies="single", out=tmp_path / "c")

    class Local(keras.layers.Layer):  # as a notebook defines it: the training processes cannot import it
        def call(self, t):
            return t
    Local.__module__ = "__main__"
    local = keras.Sequential([keras.Input((64,)), Local(), keras.layers.Dense(10)])
    with pytest.raises(ConfigError, match="Local is defined in __main__"):
        api.compare(local, (x, y), strategies="single", out=tmp_path / "d")
    with pytest.raises(ConfigError, match="expected .x, y. or .x, y, x_test, y_test."):
        api.compare(_model(), (x, y, x), out=tmp_path / "e")
    with pytest.raises(ConfigError, match=r"compare\(trainig=...\): no such keyword argument or config section; "
                                          r"did you mean training\?"):
        api.compare(_model(), (x, y), trainig={"epochs": 2}, out=tmp_path / "g")
    with pytest.raises(ConfigError, match=r"compare\(epoch=...\): .*; did you mean epochs\? \(keyword arguments: "):
        api.compare(_model(), (x, y), epoch=2, out=tmp_path / "g")
    with pytest.raises(ConfigError, match="workers"):
        api.compare(_model(), (x, y), workers="two", out=tmp_path / "f")


def test_model_and_data_forms(tmp_path):
    import pandas as pd

    x, y = _digits()
    df = pd.DataFrame(x[:, :5], columns=list("abcde")).assign(target=y)
    keys = api._data_keys(df, tmp_path, None, "target")
    saved = np.load(keys["data__path"])
    assert keys["data__name"] == "npz" and saved["x"].shape == (1797, 5) and (saved["y"] == y).all()
    with pytest.raises(ConfigError, match="no label column 'label'; its columns are a, b, c, d, e, target"):
        api._data_keys(df, tmp_path, None, "label")
    assert api._data_keys("digits", tmp_path, None, "label") == {"data__name": "digits"}
    # helper-37: Parquet's features default to every column but the label, as a DataFrame's do
    assert api._data_keys(tmp_path / "t.parquet", tmp_path, None, "label")["data__features_col"] == ""
    assert api._model_keys("mlp", None, tmp_path) == {"model__name": "mlp"}
    assert api._model_keys("pkg.mod:build", None, tmp_path) == {"model__factory": "pkg.mod:build"}
    from tests.plugins.models import with_dropout  # an importable factory is passed by name

    assert api._model_keys(with_dropout, None, tmp_path) == {"model__factory": "tests.plugins.models:with_dropout"}

    def build(shape, classes):  # a notebook's factory: called here on the arrays' shape
        return _model(classes, shape[0])
    build.__module__ = "__main__"
    keys = api._model_keys(build, (x, y), tmp_path)
    assert Path(keys["model__path"]).name == "model.keras"
    with pytest.raises(ConfigError, match="defined in __main__"):
        api._model_keys(build, "digits", tmp_path)


@pytest.mark.integration
def test_example_script_and_notebook(tmp_path):
    """examples/compare.py and examples/compare.ipynb, executed (the notebook with nbclient)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cp = subprocess.run([sys.executable, str(ROOT / "examples" / "compare.py"), "--out", str(tmp_path / "script"),
                         "--strategies", "single", "--epochs", "2"], capture_output=True, text=True,
                        timeout=600, env=env, cwd=tmp_path)  # the notebook below runs the distributed ones
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert "single" in cp.stdout and "report:" in cp.stdout
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "examples" / "compare.ipynb", as_version=4)
    os.environ.update(DISTBENCH_OUT=str(tmp_path / "nb"), EPOCHS="2")
    try:
        NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        os.environ.pop("DISTBENCH_OUT")
        os.environ.pop("EPOCHS")
    shown = nb.cells[4].outputs[-1]["data"]
    assert "text/html" in shown and "<table" in shown["text/html"]
    recs = [json.loads(line) for line in (tmp_path / "nb" / "results.jsonl").read_text().splitlines()]
    assert sorted(r["strategy"] for r in recs) == ["horovod", "mirrored", "single", "spark_ps:adag"]
    assert all(r["status"] == "ok" for r in recs), [(r["strategy"], r["reason"]) for r in recs]


def test_user_test_findings(tmp_path):
    import pandas as pd

    x, y = _digits()
    df = pd.DataFrame(x[:, :5], columns=list("abcde")).assign(label=y)
    with pytest.raises(ConfigError, match="the label column 'label' is also a feature"):
        api._data_keys(df, tmp_path, list(df.columns), "label")
    with pytest.raises(DataError, match="labels in column 'label' are object, not class indices"):
        api._data_keys(df.assign(label=["cat"] * len(df)), tmp_path, None, "label")
    with pytest.raises(DataError, match=r"feature column\(s\) \['e'\] are not numeric"):
        api._data_keys(df.assign(e="x"), tmp_path, None, "label")
    # helper-40: these reached a factory defined in the script as a bare ValueError, and strings were "not a .npz"
    with pytest.raises(DataError, match="compare's data y: label nan at row 4 is not a whole number"):
        api._data_keys((x, np.where(np.arange(len(y)) == 4, np.nan, y)), tmp_path, None, "label")
    with pytest.raises(DataError, match=r"compare's data x has shape \(0, 64\): no samples"):
        api._data_keys((x[:0], y[:0]), tmp_path, None, "label")
    with pytest.raises(DataError, match=r"compare's data y: labels are strings \(dtype object\)"):
        api._data_keys((x, np.array(list("abcdefghij"), dtype=object)[y]), tmp_path, None, "label")
    with pytest.raises(DataError, match=r"compare's data y: .*a column: .*flatten the column \(y.ravel\(\) or "
                                        r"y.reshape\(-1\)\)$"):  # helper-42: "before saving", but it saved nothing
        api._data_keys((x, y[:, None]), tmp_path, None, "label")
    with pytest.raises(DataError, match=r"compare's data x: features of dtype <U1; expected numbers"):
        api._data_keys((np.full(x.shape, "a"), y), tmp_path, None, "label")
    cat = api._data_keys(df.assign(label=pd.Categorical(y)), tmp_path / "cat", None, "label")  # integer categories
    assert np.load(cat["data__path"])["y"].dtype.kind == "i"
    with pytest.raises(ConfigError, match="no such directory"):
        api.Results(tmp_path / "nonexist")
    (tmp_path / "afile").write_text("")
    with pytest.raises(ConfigError, match="that is a file, not a directory"):
        api.compare(_model(), (x, y), out=tmp_path / "afile")
    with pytest.raises(ConfigError, match="holds no run to continue"):
        api.compare(_model(), (x, y), out=tmp_path / "new", resume=True)
    with pytest.raises(ConfigError, match="compare.resume=True. needs the run directory to continue: pass out=DIR"):
        api.compare(_model(), (x, y), resume=True)  # helper-36: it named a new runs/<timestamp>
    (tmp_path / "used" / WORKLOAD_DIR).mkdir(parents=True)  # the user test: errors named --resume and --out
    with pytest.raises(ConfigError, match="already holds a run: pass resume=True to continue it, or choose a new "
                                          "out= directory"):
        api.compare(_model(), (x, y), out=tmp_path / "used")
    with pytest.raises(ConfigError, match=r"e.g. batch_size=102\)$"):  # not the config file's spelling too
        api.compare(_model(), (x, y), out=tmp_path / "odd", workers=[2, 3], batch_size=100, strategies="horovod")
    with pytest.raises(ConfigError, match=r"did you mean training=\{'learning_rate': 0.1\}\?"):
        api.compare(_model(), (x, y), out=tmp_path / "lr", learning_rate=0.1)
    e = DataError("data.label_col = 'nope': t.parquet has no such column; data.features_col (not set: every column "
                  "but 'nope'): ...; e.g. features_col = ['a']")  # helper-38: a Parquet path's errors named config keys
    assert str(api._as_given(e, tmp_path, "t.parquet")) == ("label='nope': t.parquet has no such column; features= (not "
                                                            "set: every column but 'nope'): ...; e.g. features=['a']")
    e = ConfigError("--resume: the workload must stay identical to the run in r, but data.name recorded 'npz', "
                    "given 'digits'; give the recorded values in CONFIG_FILE, or leave CONFIG_FILE out to use the "
                    "recorded config, or use a new --out")
    assert str(api._as_given(e, tmp_path, None)).endswith(
        "given 'digits'; leave model, data and config= out to use the recorded ones, or use a new out=")
    # helper-31: a model instance's error named the temporary .keras file made of it (removed with the refused run)
    e = ConfigError(f"model 'path:{tmp_path / 'inputs' / 'model.keras'}' takes inputs of shape (None, 10), but the "
                    "data's samples have shape (64,)")
    assert str(api._as_given(e, tmp_path, None, _model())) == ("compare's model takes inputs of shape (None, 10), but "
                                                              "the data's samples have shape (64,)")
    # helper-31: a CSV path was "data.name = 'data.csv': expected one of ...", with no way to use it
    with pytest.raises(ConfigError, match=r"compare\(data='data.csv'\): CSV files are not read directly; pass the "
                                          r"DataFrame \(data=pd.read_csv\('data.csv'\), label="):
        api._data_keys("data.csv", tmp_path, None, "label")
    from distbench import config

    with pytest.raises(ConfigError, match=r"data.name = 'csv': CSV files are not read directly; write yours as "
                                          r"Parquet"):
        config.override(config.load(None), data__name="csv")
    (tmp_path / "good.csv").write_text("a,label\n1,0\n")  # helper-36: "no valid PAR1 footer"
    with pytest.raises(ConfigError, match=r"data.path = '.*good.csv': CSV files are not read directly; write yours "
                                          r"as Parquet"):
        config.override(config.load(None), data__name="parquet", data__path=str(tmp_path / "good.csv"))
    # a refused call leaves nothing behind
    with pytest.raises(DataError):
        api.compare(_model(), (x, y[:-1]), strategies="single", out=tmp_path / "bad")
    assert not (tmp_path / "bad").exists()
    with pytest.raises(ConfigError, match="target=5: expected the cluster as text"):
        api._check_target(5)


def test_records_number_columns_are_floats_with_nan(tmp_path):
    # a target never reached and a configuration that did not train: NaN, not None in an object column
    import distbench
    from distbench.results.records import new_record
    from distbench.results.store import append_record

    append_record(tmp_path, new_record("r", "single", 1, 0, "ok", final_test_accuracy=0.9, time_to_target_s=None))
    append_record(tmp_path, new_record("r", "mirrored", 2, 0, "unavailable", reason="no GPU"))
    df = distbench.Results(tmp_path).records
    for col in ("final_test_accuracy", "time_to_target_s", "train_s", "samples_per_s"):
        assert df[col].dtype == float, col
    assert df.time_to_target_s.isna().all() and df.final_test_accuracy.tolist()[0] == 0.9


def test_warnings_from_python_read_as_the_clis(tmp_path):
    # the user test: a compare() call printed bare warnings that named a DataFrame 'npz'
    script = ("import numpy as np, pandas as pd, distbench\n"
              "from sklearn.datasets import load_digits\n"
              "d = load_digits()\n"
              "df = pd.DataFrame(d.data * 1000.0, columns=[f'p{i}' for i in range(64)]).assign(label=d.target)\n"
              f"distbench.compare('mlp', df, strategies='single', epochs=1, out={str(tmp_path / 'r')!r})\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cp = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env,
                        cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert "distbench: WARNING: compare's data: features reach 1.6e+04 in magnitude" in cp.stderr, cp.stderr[-3000:]
    assert "'npz'" not in cp.stderr


def test_no_model_says_which_model_it_trains(tmp_path, caplog):
    # user test: compare(None, data) trained the embedded default's MLP without a word
    x, y = _digits()
    api.compare(None, (x, y), strategies="single", epochs=1, out=tmp_path / "r")
    assert "compare(model=None): training the embedded default's model (mlp, hidden [512, 512])" in caplog.text


def test_a_resume_with_other_data_or_another_model_is_refused_and_keeps_the_runs_inputs(tmp_path):
    # user test (helper-31): compare(resume=True) overwrote inputs/data.npz and inputs/model.keras with other ones;
    # the next configurations failed on a weight-shape mismatch, and the next --resume refused the data file
    from distbench.workload import META_FILE, weights_sha256

    x, y = _digits()
    run = tmp_path / "run"
    model = _model()
    assert api._data_keys((x, y), run, None, "label")["data__path"] == str(run / "inputs" / "data.npz")
    api._save_model(model, run)
    (run / WORKLOAD_DIR).mkdir()
    weights = [np.asarray(w, dtype=np.float32) for w in model.get_weights()]
    (run / WORKLOAD_DIR / META_FILE).write_text(json.dumps({"initial_weights_sha256": weights_sha256(weights),
                                                            "weight_shapes": [list(w.shape) for w in weights]}))
    saved = {p.name: p.read_bytes() for p in (run / "inputs").iterdir()}
    assert api._data_keys((x, y), run, None, "label")["data__name"] == "npz"  # the same: kept
    assert api._model_keys(model, None, run)["model__path"] == str(run / "inputs" / "model.keras")
    with pytest.raises(ConfigError, match=r"compare\(resume=True\): data= differ from the data this run was trained "
                                          r"on \(x \(1797, 64\) float32, y \(1797,\) int64; given x \(500, 64\) "
                                          r"float32, y \(500,\) int64\)"):
        api._data_keys((x[:500], y[:500]), run, None, "label")
    with pytest.raises(ConfigError, match=r"trained on \(the same shapes and dtypes, but 1,\d{3} of the 1,797 values of "
                                          r"y differ, first y\[1\]: 1 recorded, 2 given\)"):  # helper-38: both sides
        api._data_keys((x, y * 2), run, None, "label")  # read 'x (1797, 64) float32, y (1797,) int64'
    import keras

    other = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(10)])
    with pytest.raises(ConfigError, match=r"model= is not the model this run was trained from \(weight shapes "
                                          r"\[\[64, 32\], \[32\], \[32, 10\], \[10\]\] against the run's"):
        api._model_keys(other, None, run)
    with pytest.raises(ConfigError, match="the same shapes with other weights"):
        api._model_keys(keras.models.clone_model(model), None, run)  # the architecture, new random weights
    assert {p.name: p.read_bytes() for p in (run / "inputs").iterdir()} == saved  # nothing overwritten


def test_ctrl_c_in_compare_says_how_to_continue_from_python(tmp_path, monkeypatch):
    # user test (helper-40): it named the CLI's --resume, and `except KeyboardInterrupt` in a script missed it
    x, y = _digits()

    def ctrl_c(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "run_with_progress", ctrl_c)
    out = tmp_path / "r"
    with pytest.raises(KeyboardInterrupt) as e:
        api.compare(_model(), (x, y), strategies="single", epochs=1, repeats=1, target_accuracy="80%", out=out)
    assert isinstance(e.value, api.Interrupted)
    assert str(e.value).startswith(f"interrupted; 0 record(s) kept in {out}. Continue with the same compare() call "
                                   f"and out={str(out)!r}, resume=True (or in a shell: distbench run --resume --out")
    assert json.loads((out / "config.json").read_text())["training"]["target_accuracy"] == 0.8  # "80%", as the CLI
    with pytest.raises(ConfigError, match=r"compare\(target_accuracy='0.8%'\): '0.8%' is 0.008 of the test samples"):
        api.compare(_model(), (x, y), target_accuracy="0.8%", out=tmp_path / "pct")
