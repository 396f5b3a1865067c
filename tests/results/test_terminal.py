"""Terminal tables within a given width: whole, without minor columns, or one block per row."""

from __future__ import annotations

import io

from rich.console import Console

from distbench.results.terminal import fit_table, print_fitted

HEADERS = ["strategy", "workers", "status", "test acc", "train s", "to target s", "speed-up", "samples/s",
           "temporal"]
ROWS = [["single", "1", "ok", "0.906", "0.17", "0.16", "1.00x", "22588", "1.00"],
        ["spark_ps:downpour (100mbit)", "2", "ok, below target", "0.594", "0.61", "not reached", "0.28x", "6317",
         "-"],
        ["spark_ps:adag (100mbit)", "2", "ok", "0.594", "0.61", "not reached", "0.28x", "6317", "0.23"]]


def _render(renderable, width):
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None).print(renderable)
    return buf.getvalue()


def test_wide_table_is_whole():
    table, dropped = fit_table(HEADERS, ROWS, 200, drop=["temporal", "samples/s"])
    out = _render(table, 200)
    assert dropped == [] and "temporal" in out and "22588" in out


def test_medium_width_drops_minor_columns_and_keeps_names_whole():
    whole = max(len(line) for line in _render(fit_table(HEADERS, ROWS, 500)[0], 500).splitlines())
    width = whole - len("samples/s") - 3  # too narrow for the whole table and for the one without 'temporal'
    table, dropped = fit_table(HEADERS, ROWS, width, drop=["temporal", "samples/s"])
    out = _render(table, width)
    assert dropped == ["temporal", "samples/s"]
    assert max(len(line) for line in out.splitlines()) <= width
    for name in ("spark_ps:downpour (100mbit)", "spark_ps:adag (100mbit)", "not reached", "ok, below target"):
        assert name in out  # never truncated or wrapped
    assert "…" not in out


def test_narrow_width_gives_one_block_per_row():
    width = 60
    blocks, dropped = fit_table(HEADERS, ROWS, width, drop=["temporal", "samples/s"])
    out = _render(blocks, width)
    lines = out.splitlines()
    assert dropped == [] and max(len(line) for line in lines) <= width
    assert lines[0] == "single  workers 1  ok"
    assert "spark_ps:downpour (100mbit)  workers 2  ok, below target" in lines
    assert "to target s not reached" in out and "samples/s 6317" in out
    assert "temporal -" not in out  # unmeasured cells are left out of blocks


def test_pipe_respects_columns(monkeypatch):
    buf = io.StringIO()
    monkeypatch.setenv("COLUMNS", "70")
    console, _ = print_fitted(HEADERS, ROWS, Console(file=buf))
    assert console.width == 70 and max(len(line) for line in buf.getvalue().splitlines()) <= 70
    monkeypatch.delenv("COLUMNS")
    buf = io.StringIO()
    print_fitted(HEADERS, ROWS, Console(file=buf))
    assert "temporal" in buf.getvalue()  # piped without COLUMNS: the whole table, as wide as it needs


def test_a_pipe_never_cuts_cells_of_a_table_wider_than_its_widest_console(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    buf = io.StringIO()  # a log: not a terminal, no COLUMNS (user test: predict's notes cut names to 'mp…')
    note = "framework cost taken as at 2 workers (the only count measured); " * 5
    print_fitted(("rank", "strategy", "s/epoch", "notes"), [["1", "mpi_ps:adag", "1.26 s", note]],
                 Console(file=buf, force_terminal=False), left=("strategy", "notes"), block_head=2)
    out = buf.getvalue()
    assert "mpi_ps:adag" in out and "…" not in out and note.strip() in " ".join(out.split())


def test_list_fits_80_columns_and_names_the_families():
    from click.testing import CliRunner

    from distbench.cli import main

    res = CliRunner().invoke(main, ["list"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any(line.split()[:1] == ["spark_ps:adag"] for line in lines)  # names whole, first on their line
    assert any(line.startswith("  spark_ps ") and "all 7" in line for line in lines)
    from distbench.config import DATASETS

    listed = {line.split()[0] for line in lines if line.startswith("  ") and not line.startswith("   ")}
    assert set(DATASETS) <= listed  # every data.name the config accepts, including your own (npz, parquet)


def test_wrap_text_keeps_bullets_indented_and_commands_whole():
    from distbench.results.terminal import wrap_text

    cmd = "  distbench run runs/x/config.json --out runs/x --resume --repeats 5 --strategies mpi_ps:easgd,single"
    text = "Why:\n  - " + "word " * 30 + "\nRun next:\n" + cmd
    lines = wrap_text(text, 40).splitlines()
    assert cmd in lines  # a command to copy is never broken
    assert all(len(ln) <= 40 for ln in lines if ln != cmd)
    assert lines[1].startswith("  - word") and lines[2].startswith("    word")  # continuation under the bullet
    assert wrap_text(text, None) == text  # a pipe without COLUMNS: unchanged


def test_env_fits_columns_with_reasons_under_their_strategy(monkeypatch):
    from click.testing import CliRunner

    import distbench.env
    from distbench.cli import main

    tpu_why = ("no TPU found: TPUClusterResolver has nothing to connect to here (no TPU_NAME, "
               "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS, COLAB_TPU_ADDR set, no /dev/accel* or /dev/vfio device)")
    fake = {"provenance": {"versions": {"distbench": "0.1.0", "tensorflow": "2.21.0", "keras": "3.15.1",
                                        "numpy": "2.4.6", "horovod": "0.28.1", "pyspark": "4.3.0"},
                           "python": "3.11.7", "os": "Linux-6.1-x86_64-with-glibc2.36", "hostname": "vm",
                           "cpu_count": 2, "cpu_model": "Test CPU", "gpus": [], "git_commit": "0123abcd"},
            "gpus": ["GPUs: none (nvidia-smi lists none or is not installed): every strategy trains on the CPU"],
            "builds": ["Horovod 0.28.1 built against TensorFlow 2.21.0; installed 2.21.0"],
            "strategies": [{"name": "single", "available": True, "reason": "", "description": ""},
                           {"name": "tpu", "available": False, "reason": tpu_why, "description": ""}]}
    monkeypatch.setattr(distbench.env, "report", lambda cfg, workers: fake)
    res = CliRunner().invoke(main, ["env"], env={"COLUMNS": "60"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert max(len(line) for line in lines) <= 60, res.output
    tpu = lines.index(next(line for line in lines if line.split()[:2] == ["tpu", "unavailable"]))
    assert " ".join(" ".join(line.split()) for line in lines[tpu:]).startswith("tpu unavailable " + tpu_why)
    assert "  single                 available" in lines
    assert res.stderr.startswith("probing engines")  # said before the probes go quiet for seconds


def test_a_long_cell_in_a_block_continues_under_its_text():
    # user test (helper-22): a pipe's notes were cut at the console's width mid-phrase, the rest at column 0
    note = "framework cost taken as at 2 workers (the only count measured); " * 3
    blocks, _ = fit_table(("rank", "strategy", "s/epoch", "notes"), [["1", "mpi_ps:adag", "1.26 s", note]], 80,
                          left=("strategy", "notes"), block_head=2)
    lines = _render(blocks, 80).splitlines()
    notes = lines[lines.index(next(ln for ln in lines if ln.startswith("  notes "))):]
    assert len(notes) > 1 and max(len(ln) for ln in lines) <= 80
    assert all(ln.startswith(" " * 8) and not ln.startswith(" " * 9) for ln in notes[1:])
    assert " ".join(" ".join(notes).split()) == "notes " + note.strip()
