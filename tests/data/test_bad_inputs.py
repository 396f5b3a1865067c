"""Bad data: each case is one clear line (DataError), and through the CLI exit 2 with no run directory."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from distbench.cli import main
from distbench.config import ConfigError
from distbench.data import DataError, load_dataset

GOOD_X = np.random.default_rng(0).random((40, 3), dtype=np.float32)
GOOD_Y = np.arange(40) % 2


def _table(path, features=None, label=None, row_group_size=10, **extra):
    cols = {"features": pa.array(list(GOOD_X)) if features is None else features,
            "label": GOOD_Y if label is None else label, **extra}
    pq.write_table(pa.table(cols), path, row_group_size=row_group_size)


def _nan_in_row_group_2(p):
    x = GOOD_X.copy()
    x[23, 1] = np.nan
    _table(p, features=pa.array(list(x)))


def _mixed_lengths(p):
    rows = [list(r) for r in GOOD_X]
    rows[31] = rows[31] + [1.0]
    _table(p, features=pa.array(rows))


def _fractional(p):
    _table(p, label=np.where(np.arange(40) == 17, 0.5, GOOD_Y).astype(np.float64))


def _not_one_hot(p):
    oh = np.eye(2, dtype=np.int64)[GOOD_Y]
    oh[12] = [1, 1]
    _table(p, label=pa.array(list(oh)))


PARQUET_CASES = {  # name: (write the file, extra [data] keys, expected words)
    "missing column": (lambda p: _table(p), {"features_col": "pixels"},
                       "data.features_col = 'pixels': {path} has no such column; its columns are features, label"),
    "missing label column": (lambda p: _table(p), {"label_col": "target"},
                             "data.label_col = 'target': {path} has no such column"),
    "string labels": (lambda p: _table(p, label=pa.array(["cat", "dog"] * 20)), {},
                      "labels are strings (type string); string labels are not supported"),
    "NaN features": (_nan_in_row_group_2, {}, "{path} row group 2: row 3 holds NaN or Inf features"),
    "Inf features": (lambda p: _table(p, features=pa.array([[np.inf, 0.0, 0.0]] + list(GOOD_X[1:]))), {},
                     "{path} row group 0: row 0 holds NaN or Inf features"),
    "labels out of range": (lambda p: _table(p, label=np.where(np.arange(40) == 35, 5, GOOD_Y)), {"classes": 3},
                            "{path} row group 3: label 5 at row 5 is outside 0..2 (3 classes)"),
    "negative labels": (lambda p: _table(p, label=np.where(np.arange(40) == 8, -1, GOOD_Y)), {},
                        "{path} row group 0: label -1 at row 8 is negative: class indices start at 0"),
    "not one-hot": (_not_one_hot, {}, "{path} row group 1: row 2 of the one-hot labels is [1, 1], not one-hot"),
    "fractional labels": (_fractional, {}, "label 0.5 at row 7 is not a whole number; not supported: distbench "
                                           "compares classifiers; labels must be class indices or one-hot"),
    "mixed lengths": (_mixed_lengths, {}, "{path} row group 3: feature column 'features' holds lists of mixed "
                                          "lengths: row 1 has 4 values, expected 3"),
    "null label": (lambda p: _table(p, label=pa.array([None] + GOOD_Y[1:].tolist())), {},
                   "{path} row group 0: row 0 of label column 'label' is null"),
    "string features": (lambda p: _table(p, features=pa.array(["a"] * 40)), {},
                        "data.features_col = 'features' has type string; expected a list or fixed-size list"),
    "empty": (lambda p: pq.write_table(pa.table({"features": pa.array([], pa.list_(pa.float32())),
                                                 "label": pa.array([], pa.int64())}), p), {},
              "the dataset is empty (0 rows in 1 file(s))"),
    "too few rows": (lambda p: pq.write_table(pa.table({"features": pa.array([[0.0, 1.0, 2.0]] * 2),
                                                        "label": pa.array([0, 1])}), p), {},
                     "2 rows are too few to hold out data.test_fraction = 0.2 of them and keep the rest for training"),
    "feature shape": (lambda p: _table(p), {"feature_shape": [2, 2]},
                      "data.feature_shape = [2, 2]: holds 4 values per row, but each row has 3 features"),
    "not parquet": (lambda p: p.write_bytes(b"not a parquet file at all"), {}, "{path}: not a Parquet file"),
}


def _bad_parquet(tmp_path, case):
    write, keys, needle = PARQUET_CASES[case]
    p = tmp_path / "data.parquet"
    write(p)
    data = {"name": "parquet", "path": str(p), "features_col": "features", "label_col": "label", **keys}
    return data, needle.format(path=p)


def _toml(data: dict) -> str:
    def val(v):
        return repr(v).replace("'", '"') if not isinstance(v, str) else f'"{v}"'
    return "[data]\n" + "".join(f"{k} = {val(v)}\n" for k, v in data.items())


def _load_and_validate(data: dict):
    from distbench.config import DataConfig

    ds = load_dataset(DataConfig(**data), seed=0)
    ds.validate()
    return ds


def _cli_exit_2(tmp_path, data: dict, needle: str, batch: int = 4):
    cfg = tmp_path / "c.toml"
    cfg.write_text(_toml(data) + f"[training]\nglobal_batch_size = {batch}\n[run]\nstrategies = [\"single\"]\n"
                   "workers = [1]\n")
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["run", str(cfg), "--out", str(out)])
    assert res.exit_code == 2, (res.output, res.exception)
    assert res.output.count("\n") == 1 and needle in res.output and "Traceback" not in res.output, res.output
    assert not out.exists()  # nothing half-written


def test_parquet_labels_as_one_element_lists_are_named(tmp_path):
    # the user test: each label stored as [3] read as one-hot of width 1: "every label is 0, a single class"
    p = tmp_path / "d.parquet"
    _table(p, label=pa.array([[int(v)] for v in GOOD_Y]))
    with pytest.raises(DataError, match=r"data.label_col = 'label' holds lists of one value \(type list<"):
        _load_and_validate({"name": "parquet", "path": str(p), "features_col": "features", "label_col": "label"})


def test_bad_data_is_not_preceded_by_a_batch_size_warning(tmp_path, caplog):
    # the user test: a Parquet error found in a row group came after a warning about how the
    # batch size splits the data about to be rejected; batch 16 of 30 training rows drops 14
    data, needle = _bad_parquet(tmp_path, "NaN features")
    _cli_exit_2(tmp_path, data, needle, batch=16)
    assert "global_batch_size" not in caplog.text


@pytest.mark.parametrize("case", sorted(PARQUET_CASES))
def test_bad_parquet_is_one_line(tmp_path, case):
    data, needle = _bad_parquet(tmp_path, case)
    with pytest.raises(DataError) as e:
        _load_and_validate(data)
    assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)


@pytest.mark.parametrize("case", ["missing column", "NaN features", "fractional labels", "mixed lengths",
                                  "not one-hot", "labels out of range", "empty"])
def test_bad_parquet_exits_2_without_a_run_directory(tmp_path, case):
    _cli_exit_2(tmp_path, *_bad_parquet(tmp_path, case))


def test_glob_and_directory_matching_nothing(tmp_path):
    with pytest.raises(DataError, match=r"data.path = '.*/nothing\*.parquet': the glob matches no files"):
        _load_and_validate({"name": "parquet", "path": str(tmp_path / "nothing*.parquet"),
                            "features_col": "f", "label_col": "l"})
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "_SUCCESS").write_text("")
    with pytest.raises(DataError, match="the directory holds no data files"):
        _load_and_validate({"name": "parquet", "path": str(tmp_path / "d"), "features_col": "f", "label_col": "l"})
    _cli_exit_2(tmp_path, {"name": "parquet", "path": str(tmp_path / "x" / "*.parquet"), "features_col": "f",
                           "label_col": "l"}, "the glob matches no files")


def test_classes_that_contradict_a_fixed_dataset():
    from distbench.config import DataConfig

    with pytest.raises(DataError, match="data.classes = 5 but 'digits' has 10 classes; remove data.classes"):
        load_dataset(DataConfig(classes=5), seed=0)
    assert load_dataset(DataConfig(classes=10), seed=0).num_classes == 10


def test_schemas_that_differ_between_files(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    _table(d / "a.parquet")
    _table(d / "b.parquet", label=GOOD_Y.astype(np.float64))
    with pytest.raises(DataError, match=r"b.parquet: column 'label' is double, but .*a.parquet has int64"):
        _load_and_validate({"name": "parquet", "path": str(d), "features_col": "features", "label_col": "label"})
    # a column missing from one file (the user test: "column 'f9' is no such column, but ... has double")
    pq.write_table(pa.table({"features": pa.array(list(GOOD_X)), "target": GOOD_Y}), d / "b.parquet")
    with pytest.raises(DataError, match=r"b.parquet has no column 'label', which .*a.parquet has \(type int64\); "
                                        "every file must have the same schema"):
        _load_and_validate({"name": "parquet", "path": str(d), "features_col": "features", "label_col": "label"})


def test_parquet_without_a_label_column_is_a_config_error_and_its_features_default_to_the_others(tmp_path):
    _table(tmp_path / "t.parquet")
    with pytest.raises(ConfigError, match="needs data.label_col: name the label column"):
        from distbench import config

        config.from_dict({"data": {"name": "parquet", "path": str(tmp_path / "t.parquet")}})
    _cli_exit_2(tmp_path, {"name": "parquet", "path": str(tmp_path / "t.parquet")}, "needs data.label_col")
    # user test (helper-37): a pandas table needed every feature column listed; now the others, as compare() reads
    import pandas as pd

    pd.DataFrame(GOOD_X, columns=["a", "b", "c"]).assign(label=GOOD_Y).to_parquet(tmp_path / "p.parquet")
    ds = _load_and_validate({"name": "parquet", "path": str(tmp_path / "p.parquet"), "label_col": "label"})
    assert ds.input_shape == (3,) and ds.details["features_col"] == ["a", "b", "c"]
    ds = _load_and_validate({"name": "parquet", "path": str(tmp_path / "t.parquet"), "label_col": "label"})
    assert ds.input_shape == (3,) and ds.details["features_col"] == "features"  # the one other: a list column
    # helper-38: a string column among the others named data.features_col, a key the user never set
    pd.DataFrame(GOOD_X, columns=["a", "b", "c"]).assign(s="x", label=GOOD_Y).to_parquet(tmp_path / "s.parquet")
    with pytest.raises(DataError, match=r"^data.features_col \(not set: every column but 'label'\): column 's' has "
                                        r"type string; each feature column must hold one number per row \(integers or "
                                        r"floats\); list the numeric ones, e.g. features_col = \['a', 'b', 'c'\]$"):
        _load_and_validate({"name": "parquet", "path": str(tmp_path / "s.parquet"), "label_col": "label"})
    pd.DataFrame({"label": GOOD_Y}).to_parquet(tmp_path / "only.parquet")
    with pytest.raises(DataError, match="no column but the label 'label'; name the feature column"):
        _load_and_validate({"name": "parquet", "path": str(tmp_path / "only.parquet"), "label_col": "label"})


NPZ_CASES = {
    "lengths differ": (dict(x=GOOD_X, y=GOOD_Y[:30]), "x has 40 rows but y has 30"),
    "missing y": (dict(x=GOOD_X), "expected arrays x and y"),
    "NaN": (dict(x=np.where(np.arange(40)[:, None] == 9, np.nan, GOOD_X), y=GOOD_Y), "x: row 9 holds NaN or Inf"),
    "out of range": (dict(x=GOOD_X, y=GOOD_Y, x_test=GOOD_X[:4], y_test=np.array([0, 1, 2, -1])),
                     "y_test: label -1 at row 3 is negative: class indices start at 0"),
    "fractional": (dict(x=GOOD_X, y=GOOD_Y + 0.25), "label 0.25 at row 0 is not a whole number; not supported"),
    "not one-hot": (dict(x=GOOD_X, y=np.full((40, 3), 1 / 3)), "row 0 of the one-hot labels is"),
    "string labels": (dict(x=GOOD_X, y=np.array(["a", "b"] * 20)), "labels are strings (dtype <U1)"),
    "empty": (dict(x=np.zeros((0, 3)), y=np.zeros(0, int)), "x has shape (0, 3): no samples; expected (n, ...)"),
    # the user test: these read "(600,); expected (n, ...) with n >= 1 rows" and "row 0 of the one-hot labels is [3]"
    "one value per sample": (dict(x=GOOD_X[:, 0], y=GOOD_Y), "x has shape (40,): one value per sample; expected "
                             "(n, features...), one row per sample: for one feature per sample save x.reshape(-1, 1)"),
    "labels in a column": (dict(x=GOOD_X, y=GOOD_Y[:, None]), "labels have shape (40, 1), a column: expected (rows,) "
                           "class indices or (rows, classes) one-hot; for class indices flatten the column"),
    "one class": (dict(x=GOOD_X, y=np.zeros(40, int)), "every label is 0, a single class"),
}


@pytest.mark.parametrize("case", sorted(NPZ_CASES))
def test_bad_npz_is_one_line(tmp_path, case):
    arrays, needle = NPZ_CASES[case]
    p = tmp_path / "d.npz"
    np.savez(p, **arrays)
    with pytest.raises(DataError) as e:
        _load_and_validate({"name": "npz", "path": str(p)})
    assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)
    if case in ("lengths differ", "fractional", "NaN"):
        _cli_exit_2(tmp_path, {"name": "npz", "path": str(p)}, needle)


def test_test_labels_never_seen_in_training_exit_2(tmp_path):
    p = tmp_path / "d.npz"
    np.savez(p, x=GOOD_X, y=GOOD_Y, x_test=GOOD_X[:8], y_test=np.arange(8) % 2 + 2)
    _cli_exit_2(tmp_path, {"name": "npz", "path": str(p)},
                "the test split's labels {2, 3} never occur in the training split (labels {0, 1}): no model can "
                "predict them, so test accuracy would be 0; the test labels must use the training labels' class "
                "indices")


def test_unseen_test_labels_and_unused_inferred_classes_are_warned(tmp_path, caplog):
    from distbench import config
    from distbench.workload import Workload

    p = tmp_path / "d.npz"  # 2 training classes and a stray label 7 (3 rows); the test split holds a 2 never trained on
    y = np.where(np.isin(np.arange(40), [5, 6, 15]), 7, GOOD_Y)
    np.savez(p, x=GOOD_X, y=y, x_test=GOOD_X[:8], y_test=np.array([0, 1, 0, 1, 0, 1, 2, 2]))
    cfg = config.from_dict({"data": {"name": "npz", "path": str(p)}, "training": {"global_batch_size": 4}})
    with caplog.at_level("WARNING", logger="distbench.workload"):
        Workload.create(cfg, tmp_path / "run")
    text = caplog.text
    assert "2 of 8 test samples have labels {2} that never occur in the training split" in text
    assert "test accuracy is at most 0.750" in text
    assert ("8 classes inferred from the largest label (7), but only 4 occur {0, 1, 2, 7}: the model gets 8 "
            "outputs") in text and "set data.classes = 8" in text
    caplog.clear()
    cfg = config.from_dict({"data": {"name": "npz", "path": str(p), "classes": 8}, "training": {"global_batch_size": 4}})
    with caplog.at_level("WARNING", logger="distbench.workload"):
        Workload.create(cfg, tmp_path / "run2")  # classes given: absent ones are on purpose
    assert "classes inferred" not in caplog.text


def test_a_model_sized_for_labels_numbered_from_5_is_told_to_renumber_them(tmp_path):
    """User test (helper-35): labels 5..7 and a model of 3 outputs were told only to change the model."""
    from distbench import config
    from distbench.workload import Workload

    p = tmp_path / "d.npz"
    np.savez(p, x=GOOD_X, y=np.arange(40) % 3 + 5)
    (tmp_path / "three_h35.py").write_text(
        "import keras\n\ndef build(shape, n):\n    return keras.Sequential([keras.Input(shape), "
        "keras.layers.Flatten(), keras.layers.Dense(3)])\n")
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        cfg = config.from_dict({"data": {"name": "npz", "path": str(p)}, "model": {"factory": "three_h35:build"},
                                "training": {"global_batch_size": 4}})
        with pytest.raises(ConfigError, match=r"output has shape \(None, 3\) but the data has 8 classes.*only 3 "
                                              r"labels occur, \{5, 6, 7\}.*renumber the labels 0..2"):
            Workload.create(cfg, tmp_path / "run")
    finally:
        sys.path.remove(str(tmp_path))


def test_parquet_label_column_among_the_features_is_a_config_error(tmp_path):
    from distbench import config

    _table(tmp_path / "t.parquet")
    with pytest.raises(ConfigError, match=r"data.label_col = 'label' is also in data.features_col = \['f', 'label'\]: "
                                          "the model would read the label as a feature"):
        config.from_dict({"data": {"name": "parquet", "path": str(tmp_path / "t.parquet"),
                                   "features_col": ["f", "label"], "label_col": "label"}})


def test_a_batch_that_leaves_much_of_every_epoch_out_and_unscaled_features_are_warned(tmp_path, caplog):
    from distbench import config
    from distbench.workload import Workload

    p = tmp_path / "d.npz"
    x = np.random.default_rng(1).random((300, 3), dtype=np.float32) * 1e5  # unscaled features
    np.savez(p, x=x, y=np.arange(300) % 3)
    cfg = config.from_dict({"data": {"name": "npz", "path": str(p)}, "training": {"global_batch_size": 120}})
    with caplog.at_level("WARNING", logger="distbench.workload"):
        w = Workload.create(cfg, tmp_path / "run")
    n = len(w.dataset.y_train)
    assert n % 120 > 0.1 * n  # (the split leaves a large partial batch)
    assert (f"training.global_batch_size = 120 with {n} training samples: each epoch takes {n // 120} step(s) and "
            f"leaves {n % 120} samples") in caplog.text and f"e.g. {n // -(-n // 120)}" in caplog.text
    assert "features reach 9.99e+04 in magnitude" in caplog.text and "standardise each feature" in caplog.text
    caplog.clear()
    np.savez(p, x=x / 1e5, y=np.arange(300) % 3)
    cfg = config.from_dict({"data": {"name": "npz", "path": str(p)}, "training": {"global_batch_size": 16}})
    with caplog.at_level("WARNING", logger="distbench.workload"):
        Workload.create(cfg, tmp_path / "run2")
    assert "leaves" not in caplog.text and "magnitude" not in caplog.text
