"""Config and data fuzz: malformed configs and corrupt data files each exit 2 with one
line, no traceback, and leave no run directory that looks complete."""

from __future__ import annotations

import gzip
import io
import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distbench import config
from distbench.cli import main
from distbench.config import ConfigError, DataConfig
from distbench.data import load_dataset

KEYS = {sec: [f.name for f in cls.__dataclass_fields__.values()] for sec, cls in config.SECTIONS.items()}
BAD_VALUES = st.one_of(st.text(max_size=8), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                       st.booleans(), st.lists(st.integers(-5, 5), max_size=3), st.just({}))


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, float):
        return "nan" if v != v else ("inf" if v == float("inf") else "-inf" if v == float("-inf") else repr(v))
    if isinstance(v, dict):
        return "{}"
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return str(v)


@st.composite
def bad_configs(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["value", "key", "section", "syntax", "bytes"]))
    if kind == "syntax":
        return draw(st.sampled_from(["[run\n", "[run]\nworkers = [1,\n", "a = = 1\n", "[data]\nname = 'x\n"]))
    if kind == "bytes":
        return draw(st.binary(min_size=1, max_size=40)).decode("latin-1")
    if kind == "section":
        return f"[{draw(st.sampled_from(['runs', 'Training', 'psx', 'x']))}]\na = 1\n"
    sec = draw(st.sampled_from(sorted(KEYS)))
    if kind == "key":
        return f"[{sec}]\n{draw(st.sampled_from(KEYS[sec]))}_x = 1\n"
    key = draw(st.sampled_from(KEYS[sec]))
    return f"[{sec}]\n{key} = {_toml_value(draw(BAD_VALUES))}\n"


runner = CliRunner()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=bad_configs())
def test_malformed_configs_exit_2_with_one_line(tmp_path, text):
    cfg = tmp_path / "fuzz.toml"
    cfg.write_text(text, encoding="utf-8", errors="surrogateescape") if False else cfg.write_bytes(
        text.encode("utf-8", errors="replace"))
    out = tmp_path / "out"
    try:
        config.load(cfg)
    except ConfigError:
        valid = False
    else:
        valid = True
    if valid:  # hypothesis found a value that is legal (e.g. epochs = 3): nothing to check
        return
    res = runner.invoke(main, ["run", str(cfg), "--out", str(out)])
    assert res.exit_code == 2, (text, res.output, res.exception)
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("distbench: error: "), (text, res.output)
    assert "Traceback" not in res.output
    assert not out.exists()


def _mnist_npz(n: int = 120) -> bytes:
    rng = np.random.default_rng(0)
    buf = io.BytesIO()
    np.savez(buf, x_train=rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), y_train=np.arange(n) % 10,
             x_test=rng.integers(0, 256, (40, 28, 28), dtype=np.uint8), y_test=np.arange(40) % 10)
    return buf.getvalue()


GOOD_NPZ = _mnist_npz()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, len(GOOD_NPZ) - 1), flips=st.lists(st.integers(0, len(GOOD_NPZ) - 1), max_size=8))
def test_corrupt_npz_is_a_data_error(tmp_path, cut, flips):
    data = bytearray(GOOD_NPZ)
    for i in flips:
        data[i] ^= 0xFF
    p = tmp_path / "m.npz"
    p.write_bytes(bytes(data[: max(cut, 1)] if cut else data))
    try:
        load_dataset(DataConfig(name="mnist", path=str(p)), seed=0)
    except ConfigError:
        pass  # DataError is a ConfigError: exit 2 with one line


@pytest.mark.parametrize("mutate,needle", [
    (lambda z: {**z, "y_train": z["y_train"] + 10}, "label values range"),
    (lambda z: {**z, "y_train": z["y_train"].astype(np.float32)}, "expected an integer dtype"),
    (lambda z: {**z, "x_train": z["x_train"][:5]}, "labels have shape (120,), expected (5,)"),
    (lambda z: {**z, "x_train": z["x_train"].astype(np.float32) * np.nan}, "NaN or Inf"),
    (lambda z: {k: v for k, v in z.items() if k != "y_test"}, "lacks keys"),
])
def test_bad_data_files_exit_2(tmp_path, mutate, needle):
    with np.load(io.BytesIO(GOOD_NPZ)) as z:
        arrays = mutate({k: z[k] for k in z.files})
    p = tmp_path / "bad.npz"
    np.savez(p, **arrays)
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[data]\nname = "mnist"\npath = "{p}"\n')
    out = tmp_path / "out"
    res = runner.invoke(main, ["run", str(cfg), "--out", str(out)])
    assert res.exit_code == 2, (res.output, res.exception)
    assert res.output.count("\n") == 1 and needle in res.output and "Traceback" not in res.output
    # a run directory may have been started, but it must not look complete
    assert not (out / "results.jsonl").exists() and not (out / "workload" / "workload.json").exists()


def test_truncated_gzip_idx(tmp_path):
    header = bytes([0, 0, 8, 3]) + (10).to_bytes(4, "big") + (28).to_bytes(4, "big") * 2
    for name in ("train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz"):
        (tmp_path / name).write_bytes(gzip.compress(header + bytes(10 * 784))[:-9])
    for name in ("train-labels-idx1-ubyte", "t10k-labels-idx1-ubyte"):
        (tmp_path / name).write_bytes(bytes([0, 0, 8, 1]) + (10).to_bytes(4, "big") + bytes(range(10)))
    with pytest.raises(ConfigError, match="cannot read IDX file"):
        load_dataset(DataConfig(name="mnist", path=str(tmp_path)), seed=0)


@pytest.mark.parametrize("args,env,needle", [
    (["run", "--strategies", "single", "--out", "/proc/distbench-nope"], {}, "cannot create the run directory"),
    (["run", "--strategies", ""], {}, "--strategies '': expected comma-separated names"),
    (["run", "--strategies", "single,,mirrored"], {}, "expected comma-separated names"),
    (["run", "--workers", "2,,4"], {}, "--workers '2,,4': expected an integer"),
    (["run", "--workers", "0"], {}, "distbench: error: --workers: run.workers = 0: must be >= 1"),
    (["run", "--timeout", "inf"], {}, "--timeout: run.timeout_s = inf: must be a finite number of seconds > 0"),
    (["env", "--workers", "0"], {}, "--workers 0: expected a worker count >= 1"),
    (["report", "RESULTS", "--out", "/proc/distbench-nope"], {}, "cannot create the report folder"),
    (["list"], {"DISTBENCH_PLUGINS": "no_such_plugin_mod"}, "'no_such_plugin_mod', which cannot be imported"),
    (["worker", "tf", "--run-dir", "RUN"], {"TF_CONFIG": ""}, "TF_CONFIG = '': expected JSON"),
    # click's own usage errors: one line too, naming the command's help
    (["run", "--bogus"], {}, "No such option '--bogus'. Did you mean '--out'? (see 'distbench run --help')"),
    (["report", "--compare", "RESULTS"], {}, "'--compare' requires 2 arguments. (see 'distbench report --help')"),
    (["run", "--epochs", "x"], {}, "'x' is not a valid integer"),
    (["nosuch"], {}, "No such command 'nosuch'. (see 'distbench --help')"),
])
def test_bad_cli_input_exits_2_with_one_line(tmp_path, monkeypatch, args, env, needle):
    from distbench.strategies import registry

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(registry, "_loaded", False)  # plugins are read once per process: read them again
    results = tmp_path / "results"
    results.mkdir()
    from distbench.results.records import new_record

    (results / "results.jsonl").write_text(json.dumps(new_record("run", "single", 1, 0, "failed", reason="x")) + "\n")
    args = [str(tmp_path / "run") if a == "RUN" else str(results) if a == "RESULTS" else a for a in args]
    res = runner.invoke(main, args)
    assert res.exit_code == 2, (res.output, res.exception)
    assert res.output.count("\n") == 1 and needle in res.output and "Traceback" not in res.output
    assert not (tmp_path / "run").exists()


def test_ctrl_c_before_the_sweep_s_handler_exits_130_in_one_line(monkeypatch):
    # the user test: Ctrl-C in the first seconds (config, TensorFlow import) printed click's "Aborted!", exit 1
    from distbench import config

    def interrupted(path):
        raise KeyboardInterrupt

    monkeypatch.setattr(config, "load", interrupted)
    res = runner.invoke(main, ["run", "--strategies", "single"])
    assert res.exit_code == 130 and res.output.strip().endswith("distbench: interrupted"), res.output


def test_a_run_directory_in_use_is_refused(tmp_path):
    # the user test: two `run --resume` at once on one directory recorded a configuration twice
    import fcntl
    import os

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with open(run_dir / ".distbench.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write(str(os.getpid()))
        held.flush()
        res = runner.invoke(main, ["run", "--strategies", "single", "--out", str(run_dir)])
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert f"another distbench run (pid {os.getpid()}) is writing {run_dir}" in res.output


def test_sigterm_exits_143_and_ctrl_c_130(tmp_path, monkeypatch):
    # the user test: SIGTERM exited 130 (Ctrl-C's status); shells and schedulers expect 128 + 15
    import signal

    from distbench import api
    from distbench.cli import sweep

    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for sig, status in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
            monkeypatch.setattr(api, "run_with_progress", lambda *a, sig=sig: sweep._interrupt(sig, None))
            res = runner.invoke(main, ["run", "--strategies", "single", "--epochs", "1",
                                       "--out", str(tmp_path / f"run{status}")])
            assert res.exit_code == status, res.output
            assert f"distbench: {signal.Signals(sig).name}: stopping the running configuration" in res.output
    finally:
        for s, h in saved.items():
            signal.signal(s, h)


def test_a_results_file_with_no_readable_record_exits_2(tmp_path):
    # user test (helper-36): only torn lines printed "No records: nothing to advise from.", exit 0
    (tmp_path / "results.jsonl").write_text("xx{\n")
    for command in ("advise", "report"):
        res = runner.invoke(main, [command, str(tmp_path)])
        assert res.exit_code == 2 and "holds no readable record" in res.output, res.output
