"""Every output format rendered from the fixture run directories, numbers checked against the fixture.

``fixtures/run_a`` (hardware A, host alpha): single x3 repeats, mirrored_w2 x5 repeats (one
never reaches the target), a failed mirrored_w4, an unavailable tpu, and a spark_ps:adag
window sweep (windows 1 and 5) with staleness histograms. ``fixtures/run_b`` (hardware B,
host beta): single and mirrored_w2 once each.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from distbench.results.report import parse_formats, write_report
from distbench.results.store import read_records
from distbench.results.stats import summarize
from tests.conftest import distbench, requires

FIXTURES = Path(__file__).with_name("fixtures")
RUN_A, RUN_B = FIXTURES / "run_a", FIXTURES / "run_b"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def records():
    return read_records(RUN_A) + read_records(RUN_B)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory, records):
    out = tmp_path_factory.mktemp("report")
    paths = write_report(records, out)
    return out, paths


def test_fixture_statistics(records):
    s = {(x.config_id, x.hardware): x for x in summarize(records)}
    single, mirrored = s["single_w1", "A"], s["mirrored_w2", "A"]
    assert (single.accuracy.median, single.accuracy.min, single.accuracy.max) == (0.92, 0.90, 0.94)
    assert single.train_s.mean == 12.0 and single.train_s.ci95 == pytest.approx(1.96 * (8 / 3) ** 0.5)
    assert single.ttt.value == 12.0  # mean(10, 12, 14): fewer than 5 runs, none dropped
    # five runs 3, 4, 5, 6, never: drop 3 and the non-reaching one -> mean(4, 5, 6)
    assert mirrored.ttt.value == 5.0 and mirrored.ttt.reached == 4 and mirrored.ttt.kept == 3
    assert mirrored.train_s.median == 7.0 and mirrored.speedup == pytest.approx(12 / 7)
    assert mirrored.scaling_efficiency == pytest.approx(6 / 7)
    # hardware B is compared with its own single only: 20 s / 8 s
    mb = s["mirrored_w2", "B"]
    assert mb.speedup == pytest.approx(2.5) and mb.scaling_efficiency == pytest.approx(1.25)
    # T = 8: area(mirrored B) = 0.91*4/2 + (0.91+0.95)/2*4 = 5.54; area(single B) = 0.9*8/2 = 3.6
    assert mb.temporal_efficiency == pytest.approx(5.54 / 3.6)
    # window 1 vs the three single repeats over [0, 6]: 4.6 / (2.81, 2.55, 2.2629) -> median 4.6 / 2.55
    assert s["spark_ps-adag_w2_win1", "A"].temporal_efficiency == pytest.approx(4.6 / 2.55)
    assert s["spark_ps-adag_w2_win5", "A"].ttt.not_reached
    assert s["mirrored_w4", "A"].status == "failed" and s["tpu_w2", "A"].status == "unavailable"


def test_markdown(outputs):
    out, _ = outputs
    md = (out / "report.md").read_text()
    assert ("| single | 1 | A | ok | 0.920 [0.900-0.940] | 12.00 [10.00-14.00] | 2.0 | 15.0 [13.0-17.0] | 900 [800-1000] | "
            "12.00 [10.00-14.00] | 1.00x | 1.00 | 1.00 |") in md
    assert ("| mirrored | 2 | A | ok | 0.920 [0.890-0.940] | 7.00 [5.00-9.00] | 2.0 | 10.0 [8.0-12.0] | 1800 [1600-2000] | "
            "5.00 [3.00-6.00] (4/5 reached) | 1.71x | 0.86 | 1.20 |") in md
    assert "| spark_ps:adag (window 5) | 2 | A | ok, below target | 0.850 | 4.00 | 2.0 | 7.0 | 3000 | not reached | 3.00x | 1.50 |" in md
    assert "| mirrored | 2 | B | ok | 0.950 | 8.00 | 2.0 | 11.0 | 1250 | 4.00 | 2.50x | 1.25 | 1.54 |" in md
    assert "- **B**: host beta: 4 x Test CPU B, 16.0 GiB, 1 GPU: GPU 0: Fake GPU" in md
    assert "| single (1 worker) [hw A] | 3 | 0.920 ± 0.032 | 12.00 ± 3.20 | 900 ± 160 |" in md
    assert ("Hardware A: Fastest to 0.9 test accuracy (the ranking criterion, as in the recommendation): "
            "spark_ps:adag (2 workers, window 1), 2.00 s (MLPerf score over 1 run), 2.50x faster than mirrored (2 workers) (5.00 s), "
            "but only through the one-off warm-up in the first epoch of mirrored (2 workers) (33% of its training time): in steady "
            "state it trains an epoch in 2 s against 4 s, so this lead is start-up, not training (distbench advise); from a single run, "
            "so run-to-run noise is unknown: use --repeats 3 or more before choosing.") in md
    assert "Hardware B: Most accurate: single (1 worker), median test accuracy 0.960, +1.0 points over" in md
    assert "- mirrored (4 workers) [hw A] (failed): worker 3 failed with exit code 1" in md
    assert "- tpu (2 workers) [hw A] (unavailable): no TPU found" in md
    assert "- run `fixture-b` (2 records, hardware B)" in md
    for name in ("accuracy_vs_time", "time_and_accuracy", "throughput_vs_workers", "window_sweep", "staleness"):
        assert f"](plots/{name}.png)" in md
        assert (out / "plots" / f"{name}.png").read_bytes().startswith(PNG_MAGIC)


def test_csv(outputs):
    out, _ = outputs
    rows = {(r["config_id"], r["hardware"]): r for r in csv.DictReader(open(out / "summary.csv"))}
    assert len(rows) == 8
    m = rows["mirrored_w2", "A"]
    assert float(m["train_s_median"]) == 7.0 and float(m["time_to_target_s_mlperf"]) == 5.0
    assert int(m["reached_target"]) == 4 and int(m["repeats"]) == 5
    assert float(m["speedup"]) == pytest.approx(12 / 7)
    assert float(rows["single_w1", "A"]["acc_ci95"]) == pytest.approx(1.96 * (0.02 ** 2 * 2 / 3) ** 0.5)
    assert rows["spark_ps-adag_w2_win5", "A"]["time_to_target_s_mlperf"] == ""
    assert rows["spark_ps-adag_w2_win5", "A"]["window"] == "5"
    assert rows["tpu_w2", "A"]["status"] == "unavailable" and rows["tpu_w2", "A"]["reasons"].startswith("no TPU")
    assert float(rows["mirrored_w2", "B"]["speedup"]) == 2.5


def test_json(outputs):
    out, _ = outputs
    j = json.loads((out / "summary.json").read_text())
    assert j["target_accuracy"] == 0.9 and j["runs"] == ["fixture-a", "fixture-b"] and j["records"] == 14
    assert j["hardware"]["B"]["description"].startswith("host beta")
    cfg = {(c["config_id"], c["hardware"]): c for c in j["configurations"]}
    m = cfg["mirrored_w2", "A"]
    assert m["time_to_target_s"] == {**m["time_to_target_s"], "mlperf": 5.0, "runs": 5, "reached": 4, "averaged": 3}
    assert m["train_s"]["median"] == 7.0 and m["test_accuracy"]["min"] == 0.89
    assert cfg["spark_ps-adag_w2_win5", "A"]["time_to_target_s"]["not_reached"] is True
    head = {h["hardware"]: h for h in j["headline"]}
    assert head["A"]["fastest_to_target"]["config_id"] == "spark_ps-adag_w2_win1"
    assert head["B"]["most_accurate"]["config_id"] == "single_w1"


def test_html_is_self_contained_and_has_the_numbers(outputs):
    out, paths = outputs
    page = (out / "report.html").read_text()
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page) and "<link" not in page
    assert "default-src 'none'" in page  # the Content-Security-Policy forbids fetching anything
    srcs = re.findall(r'<img src="([^"]+)"', page)
    assert len(srcs) == 5 and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert len([p for p in paths if p.suffix == ".png"]) == 5
    for text in ("0.920 [0.900-0.940]", "[3.00-6.00] · 4/5 reached", "1.71x", "2.50x", "not reached",
                 "hardware B", "host beta: 4 x Test CPU B", "fastest to target", "most accurate",
                 "worker 3 failed with exit code 1", "no TPU found", "Run <code>fixture-b</code>",
                 "0.920 ± 0.032", "Staleness histograms", "Window sweep"):
        assert text in page, text
    assert "&lt;b&gt;not bold&lt;/b&gt;" in page and "<b>not bold</b>" not in page  # autoescaped log tail


def test_format_selection_and_tensorboard(tmp_path, records):
    paths = write_report(records, tmp_path, formats=["csv", "json"])
    assert sorted(p.name for p in paths) == ["summary.csv", "summary.json"]
    assert not (tmp_path / "plots").exists() and not (tmp_path / "report.html").exists()
    assert parse_formats("md, HTML,md") == ("md", "html")
    with pytest.raises(ValueError, match="expected a comma-separated subset of md,html,csv,json"):
        parse_formats("pdf")


@requires(module="tensorflow")
def test_tensorboard_scalars(tmp_path, records):
    import tensorflow as tf

    (tb,) = write_report(records, tmp_path, formats=["json"], tensorboard=True)[1:]
    assert tb == tmp_path / "tensorboard"
    runs = sorted(str(p.parent.relative_to(tb)) for p in tb.rglob("events.out.tfevents.*"))
    assert runs[:3] == ["mirrored_w2_hwA/r0", "mirrored_w2_hwA/r1", "mirrored_w2_hwA/r2"]
    assert "mirrored_w2_hwB/r0" in runs and "spark_ps-adag_w2_win5_hwA/r0" in runs and len(runs) == 12
    (event_file,) = (tb / "mirrored_w2_hwB" / "r0").glob("events.out.tfevents.*")
    seen = {}
    for raw in tf.data.TFRecordDataset(str(event_file)):
        ev = tf.compat.v1.Event.FromString(raw.numpy())
        for v in ev.summary.value:
            seen[(v.tag, ev.step)] = float(tf.make_ndarray(v.tensor))
    assert seen[("test/accuracy", 10)] == pytest.approx(0.91) and seen[("test/accuracy", 20)] == pytest.approx(0.95)
    assert seen[("test_vs_time/accuracy", 4000)] == pytest.approx(0.91)
    assert seen[("test_vs_time/loss", 8000)] == pytest.approx(0.05)


def test_cli_merge_compare_and_errors(tmp_path):
    cp = distbench("report", str(RUN_A), str(RUN_B), "--out", str(tmp_path / "m"))
    assert cp.returncode == 0, cp.stderr
    assert "hardware" in cp.stdout and "spark_ps:adag (window 1)" in cp.stdout and "2.50x" in cp.stdout
    assert (tmp_path / "m" / "report.html").exists() and (tmp_path / "m" / "summary.json").exists()

    cp = distbench("report", str(RUN_A), "--format", "csv", "--out", str(tmp_path / "c"))
    assert cp.returncode == 0 and sorted(p.name for p in (tmp_path / "c").iterdir()) == ["summary.csv"]
    # the recommendation line names the run advise reads, not the --out folder or a placeholder
    assert "RUN_DIR for the reasons" not in cp.stdout and f"distbench advise {RUN_A} for" in cp.stdout.replace(
        "\n", " ")

    cp = distbench("report", str(RUN_A), "--format", "pdf", "--out", str(tmp_path / "x"))
    assert cp.returncode == 2 and cp.stderr.strip().startswith("distbench: error: --format 'pdf'")
    assert "Traceback" not in cp.stderr
    cp = distbench("report")
    assert cp.returncode == 2 and "needs one or more RUN_DIRs" in cp.stderr

    # NEW: the same run with mirrored_w2 twice as fast and 1 point more accurate
    new = tmp_path / "new"
    new.mkdir()
    with open(new / "results.jsonl", "w") as f:
        for r in read_records(RUN_A):
            if r["config_id"] == "mirrored_w2":
                r["timings"]["train_s"] /= 2
                r["final_test_accuracy"] += 0.01
            f.write(json.dumps(r) + "\n")
    cp = distbench("report", "--compare", str(RUN_A), str(new))
    assert cp.returncode == 0, cp.stderr
    line = next(ln for ln in cp.stdout.splitlines() if "mirrored (2 workers)" in ln)
    assert "7.00 [5.00-9.00]" in line and "3.50 [2.50-4.50]" in line and "-50.0%" in line and "+1.0" in line
    assert "faster" in line  # 2.5-4.5 s vs 5-9 s: the ranges do not overlap
    single = next(ln for ln in cp.stdout.splitlines() if "single (1 worker)" in ln)
    assert "+0.0%" in single and "within spread" in single
    assert not (new / "report.md").exists()  # --compare only prints
    narrow = distbench("report", "--compare", str(RUN_A), str(new), env={"COLUMNS": "80"})
    assert narrow.returncode == 0 and max(map(len, narrow.stdout.splitlines())) <= 80, narrow.stdout
    assert "mirrored (2 workers)" in narrow.stdout and "Δ time -50.0%" in narrow.stdout  # one block each, uncut

    cp = distbench("report", "--compare", str(RUN_A), str(RUN_B))
    assert cp.returncode == 0 and "different hardware" in cp.stdout and "only in BASE" in cp.stdout


def test_a_bandwidth_sweep_is_plotted_and_named_in_the_table(tmp_path, records):
    """Records of an emulated-cluster sweep (two link rates of one strategy) get the
    bandwidth_sweep figure and their rate in the table; one rate alone draws nothing."""
    import copy

    from distbench.results.plots import plot_bandwidth_sweep
    from distbench.results.report import build

    base = [r for r in records if r["config_id"] == "mirrored_w2" and r["run_id"] == "fixture-a"]
    swept = []
    for rate, slow in (("100mbit", 3.0), ("unlimited", 1.0)):
        for r in base:
            r = copy.deepcopy(r)
            r.update(bandwidth=rate, config_id=f"mirrored_w2_bw{rate}")
            r["timings"]["train_s"] *= slow
            swept.append(r)
    single = [r for r in records if r["config_id"] == "single_w1" and r["run_id"] == "fixture-a"]
    paths = write_report(single + swept, tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "| mirrored (100mbit) | 2 |" in md and "| mirrored (unlimited) | 2 |" in md
    assert "](plots/bandwidth_sweep.png)" in md and paths
    assert (tmp_path / "plots" / "bandwidth_sweep.png").read_bytes().startswith(PNG_MAGIC)
    one_rate = [r for r in swept if r["bandwidth"] == "100mbit"]
    assert plot_bandwidth_sweep(build(single + one_rate)) is None
