"""The scaling cost model (distbench.predict) against hand-computed values, and the
``distbench predict`` command on a hand-made run directory."""

from __future__ import annotations

import json
import math
import statistics

import pytest
from click.testing import CliRunner

from distbench import predict as P
from distbench.cli import main
from distbench.config import ModelConfig


def test_ring_allreduce_one_worker_exchanges_nothing():
    assert P.ring_allreduce_s(1, 1e6, 1e9, 1e-5) == 0.0


def test_ring_allreduce_four_workers():
    # 2 (N-1)/N x S/B + 2 (N-1) L = 2*3/4 * 1e6/1e9 + 2*3*1e-5 = 1.5e-3 + 6e-5
    assert P.ring_allreduce_s(4, 1e6, 1e9, 1e-5) == pytest.approx(1.56e-3)


def test_ps_exchange_is_shared_by_all_workers():
    # N x 2 x S/B + 2 L = 4*2*1e6/1e9 + 2e-5
    assert P.ps_exchange_s(4, 1e6, 1e9, 1e-5) == pytest.approx(8.02e-3)
    assert P.ps_exchange_s(1, 1e6, 1e9, 0.0) == pytest.approx(2e-3)


def test_predict_hand_computed_epochs():
    # compute 10 ms/step, 1 MB model, 1 GB/s, 10 us, 6400 samples, 100 per worker, window 4
    preds = P.predict(0.01, 1e6, 6400, 100, 1e9, 1e-5, [1, 2, 4], window=4)
    assert [p.workers for p in preds] == [1, 2, 4]
    p1, p2, p4 = preds
    # N=1: 64 steps; allreduce = 64 x 0.01; PS = 16 windows x (4 x 0.01 + 2e-3 + 2e-5)
    assert p1.steps_per_epoch == pytest.approx(64)
    assert p1.allreduce_comm_s == 0.0
    assert p1.allreduce_epoch_s == pytest.approx(0.64)
    assert p1.ps_comm_s == pytest.approx(0.00202)
    assert p1.ps_epoch_s == pytest.approx(0.67232)
    # N=2: 32 steps; allreduce comm 1e-3 + 2e-5; PS 8 windows x (0.04 + 4e-3 + 2e-5)
    assert p2.steps_per_epoch == pytest.approx(32)
    assert p2.allreduce_comm_s == pytest.approx(1.02e-3)
    assert p2.allreduce_epoch_s == pytest.approx(32 * 0.01102)
    assert p2.ps_epoch_s == pytest.approx(8 * 0.04402)
    # N=4: 16 steps; allreduce comm 1.56e-3; PS 4 windows x (0.04 + 8.02e-3)
    assert p4.allreduce_epoch_s == pytest.approx(16 * 0.01156)
    assert p4.ps_epoch_s == pytest.approx(4 * 0.04802)
    assert p4.allreduce_samples_per_s == pytest.approx(6400 / (16 * 0.01156))
    assert p4.ps_samples_per_s == pytest.approx(6400 / (4 * 0.04802))


def test_predict_default_workers_are_powers_of_two_to_1024():
    preds = P.predict(0.01, 1e6, 1_000_000, 32)
    assert [p.workers for p in preds] == [2 ** k for k in range(11)]
    assert preds[-1].steps_per_epoch == pytest.approx(1_000_000 / (1024 * 32))
    # 10 GbE defaults: 1.25e9 B/s, 50 us
    assert preds[1].allreduce_comm_s == pytest.approx(1e6 / 1.25e9 + 2 * 50e-6)


def test_partial_window_is_charged_whole():
    # 10 steps, window 4: 10 x 1 s of compute and 3 exchanges (4 + 4 + 2 steps) of 2 x 1 B / 1 B/s
    p = P.predict(1.0, 1.0, 10, 1, 1.0, 0.0, [1], window=4)[0]
    assert p.ps_epoch_s == pytest.approx(10 * 1 + 3 * 2)
    # fewer steps than one window, even under one step per worker: still one whole exchange per epoch
    (p,) = P.predict(1.0, 1.0, 6, 1, 1.0, 0.0, [8], window=12)
    assert p.steps_per_epoch == pytest.approx(0.75)
    assert p.ps_epoch_s == pytest.approx(0.75 * 1 + 1 * (8 * 2))
    assert [P.exchanges(s, 4) for s in (0.2, 4, 4.0000000001, 4.5, 8)] == [1, 1, 1, 2, 2]


@pytest.mark.parametrize("kwargs", [
    {"compute_s": 0}, {"model_bytes": -1}, {"bandwidth_Bps": 0}, {"n_train": 0}, {"per_worker_batch": 0},
    {"latency_s": -1e-6}, {"window": 0}, {"workers": [0]}, {"compute_s": math.nan}, {"bandwidth_Bps": math.inf},
])
def test_predict_rejects_bad_inputs(kwargs):
    args = {"compute_s": 0.01, "model_bytes": 1e6, "n_train": 100, "per_worker_batch": 10}
    args.update(kwargs)
    with pytest.raises(ValueError):
        P.predict(**args)


def test_forward_flops_mlp():
    # Dense 64 -> 64 and 64 -> 10 on an 8x8x1 input: 2*64*64 + 2*64*10
    assert P.forward_flops(ModelConfig(name="mlp", hidden=[64]), (8, 8, 1), 10) == 9472
    assert P.forward_flops(ModelConfig(name="mlp", hidden=[]), (8, 8), 10) == 2 * 64 * 10


def test_forward_flops_cnn():
    spec = ModelConfig(name="cnn", filters=[32, 64], hidden=[128])
    conv1 = 2 * 32 * 32 * 9 * 3 * 32      # 32x32 output, 3x3x3 kernel, 32 filters
    conv2 = 2 * 16 * 16 * 9 * 32 * 64     # after 2x2 pooling
    dense = 2 * (8 * 8 * 64) * 128 + 2 * 128 * 10
    assert P.forward_flops(spec, (32, 32, 3), 10) == conv1 + conv2 + dense == 12_257_792


def test_forward_flops_cnn_stops_pooling_at_one_pixel():
    # 2x2x1 -> conv(4) 2x2 -> pool 1x1 -> conv(4) 1x1 (no pool) -> Dense(3)
    spec = ModelConfig(name="cnn", filters=[4, 4], hidden=[])
    assert P.forward_flops(spec, (2, 2, 1), 3) == 2 * 4 * 9 * 1 * 4 + 2 * 1 * 9 * 4 * 4 + 2 * 4 * 3


def _record(strategy, elapsed, steps, train_s, **extra):
    return {"config_id": strategy, "strategy": strategy, "workers": 1, "repeat": 0, "status": "ok",
            "steps": steps[-1], "global_batch_size": 64,
            "timings": {"train_s": train_s},
            "curve": [{"epoch": i + 1, "step": s, "elapsed_s": e} for i, (s, e) in enumerate(zip(steps, elapsed))],
            "workload": {"num_parameters": 1000, "sizes": {"train": 1280}}} | extra


@pytest.fixture()
def run_dir(tmp_path):
    recs = [
        _record("single", [1.0, 1.5, 2.0], [10, 20, 30], 2.0),   # steady (2.0-1.0)/20 = 0.05
        _record("single", [1.2, 1.8, 2.4], [10, 20, 30], 2.4, repeat=1),   # steady 0.06
        {"config_id": "single", "strategy": "single", "workers": 1, "repeat": 2, "status": "failed"},
        _record("spark_ps:adag", [1, 2], [5, 10], 2.0, details={"communication_window": 12}, workers=2),
        _record("horovod", [1.0, 1.5, 2.0], [10, 20, 30], 2.0, workers=2),
    ]
    (tmp_path / "results.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    return tmp_path


def test_inputs_from_run(run_dir):
    inp = P.inputs_from_run(run_dir)
    assert inp.step_s == pytest.approx(0.055)              # median of 0.05 and 0.06
    assert inp.step_s_all == pytest.approx((2.0 / 30 + 2.4 / 30) / 2)
    assert inp.model_bytes == 4000 and inp.n_train == 1280 and inp.global_batch == 64
    assert inp.window == 12 and inp.records == 2


def test_inputs_from_run_takes_an_mpi_ps_window_too(tmp_path):
    # the user test: a run with mpi_ps:adag only was predicted with window 1
    recs = [_record("single", [1.0, 1.5, 2.0], [10, 20, 30], 2.0),
            _record("mpi_ps:adag", [1, 2], [5, 10], 2.0, details={"communication_window": 8}, workers=2)]
    (tmp_path / "results.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    assert P.inputs_from_run(tmp_path).window == 8


def test_steady_epoch_is_the_median_interval_so_one_stalled_epoch_does_not_move_it():
    # a parameter server's last epoch also waits for the final commits: 0.17 s against 0.04 s
    curve = [{"epoch": e, "elapsed_s": t} for e, t in [(1, 0.28), (2, 0.32), (3, 0.36), (4, 0.40), (5, 0.44),
                                                        (6, 0.61)]]
    assert P.epoch_s({"curve": curve}) == pytest.approx(0.04)
    assert P.epoch_s({"curve": curve[:2]}) == pytest.approx(0.04)


def test_a_centre_held_over_epochs_is_not_a_zero_second_epoch():
    # helper-38: mpi_ps:easgd with window 32 and 13 steps per epoch, 2 barrier rounds in 4 epochs: epochs 1-2 and
    # 3-4 held one centre each, so the steady epoch was 0 s and advise asked for ever more epochs
    from distbench.costmodel import _epochs_to, _first_epoch_s
    from distbench.results.notes import warmup_share
    from distbench.results.records import model_points

    curve = [{"epoch": e, "step": s, "elapsed_s": t, "test_accuracy": a}
             for e, s, t, a in [(1, 1, 0.297, 0.71), (2, 1, 0.297, 0.71), (3, 2, 0.330, 0.70), (4, 2, 0.330, 0.70)]]
    rec = {"curve": curve, "epochs": 4, "timings": {"train_s": 0.336}}
    assert P.epoch_s(rec) == pytest.approx(0.0165)  # between the centres kept at epochs 2 and 4
    share, first, later = warmup_share(rec)
    assert later == pytest.approx(0.0165) and first == pytest.approx(0.297 - 0.0165)
    assert share == pytest.approx((0.297 - 2 * 0.0165) / 0.336)
    assert _epochs_to(rec, 0.7) == 2.0  # the centre first at 0.71 was made after epoch 1's end
    assert _first_epoch_s(rec, 0.0165) == pytest.approx(0.297 - 0.0165)  # the cost model's warm-up reads the same
    plain = [{**p, "step": e * 13} for e, p in enumerate(curve, 1)]  # steps each epoch: every point kept
    assert [p["epoch"] for p in model_points(plain)] == [1, 2, 3, 4]
    assert [p["epoch"] for p in model_points(curve)] == [2, 4]


def test_a_centre_counts_the_passes_over_the_data_it_holds():
    # helper-39: the same run as above, recorded with data_epochs: the first centre (round 1, at step 32 of 13 per
    # epoch) holds 2.46 epochs; read as epoch 1 its warm-up held 1.46 steady epochs more than it had
    from distbench.costmodel import _epochs_to, _first_epoch_s
    from distbench.results.notes import warmup_share
    from distbench.results.records import model_points

    curve = [{"epoch": e, "step": s, "elapsed_s": t, "test_accuracy": a, "data_epochs": d}
             for e, s, t, a, d in [(1, 1, 0.297, 0.71, 2.4615), (2, 1, 0.297, 0.71, 2.4615), (3, 2, 0.330, 0.70, 4.0),
                                   (4, 2, 0.330, 0.70, 4.0)]]
    rec = {"curve": curve, "epochs": 4, "timings": {"train_s": 0.336}}
    steady = 0.033 / (4.0 - 2.4615)  # steps 33-52 of each replica: 1.54 epochs in 33 ms
    assert P.epoch_s(rec) == pytest.approx(steady)
    _, first, later = warmup_share(rec)
    assert later == pytest.approx(steady) and first == pytest.approx(0.297 - 1.4615 * steady)
    assert _epochs_to(rec, 0.7) == pytest.approx(2.4615)
    assert _first_epoch_s(rec, steady) == pytest.approx(0.297 - 1.4615 * steady)
    # two updates inside the last window (clocks 5 and 6 of 2 replicas, window 32 of 80 steps) both hold all 4
    # epochs of data: the last is kept (a division by their 0 epochs apart ended the sweep's report)
    last = [{"epoch": e, "step": c, "elapsed_s": t, "test_accuracy": 0.8, "data_epochs": d}
            for e, c, t, d in [(1, 2, 0.2, 1.6), (2, 4, 0.3, 3.2), (3, 5, 0.35, 4.0), (4, 6, 0.4, 4.0)]]
    assert [(p["epoch"], p["step"]) for p in model_points(last)] == [(1.6, 2), (3.2, 4), (4.0, 6)]
    assert warmup_share({"curve": last, "timings": {"train_s": 0.4}})[2] == pytest.approx((0.1 / 1.6 + 0.1 / 0.8) / 2)


def test_a_window_as_long_as_the_run_has_no_epoch_ends_in_its_curve():
    # helper-42: window 50 against 40 steps per replica: each replica commits once, at its end, and the two points
    # are those commits 1 ms apart; read as epochs, 0.156 s of warm-up and 0.001 s per epoch advised --epochs 962
    from distbench.costmodel import _first_epoch_s
    from distbench.results.notes import warmup_share

    curve = [{"epoch": 1, "step": 1, "elapsed_s": 0.1564, "test_accuracy": 0.5, "data_epochs": 1.25},
             {"epoch": 2, "step": 2, "elapsed_s": 0.1575, "test_accuracy": 0.6, "data_epochs": 2.0}]
    rec = {"curve": curve, "epochs": 2, "timings": {"train_s": 0.1607},
           "details": {"communication_window": 50, "per_worker_steps": [40, 40]}}
    assert P.epoch_s(rec) == pytest.approx(0.1607 / 2) and warmup_share(rec) is None
    assert _first_epoch_s(rec, 0.08) is None
    rec["details"]["communication_window"] = 8  # 5 commits each: the curve's epochs stand
    assert P.epoch_s(rec) == pytest.approx(0.0011 / 0.75) and warmup_share(rec) is not None


def test_inputs_from_run_one_epoch_falls_back_to_train_s(tmp_path):
    (tmp_path / "results.jsonl").write_text(json.dumps(_record("single", [2.0], [40], 2.0)) + "\n")
    inp = P.inputs_from_run(tmp_path)
    assert inp.step_s == pytest.approx(0.05) and inp.window is None


def test_inputs_from_run_needs_single(tmp_path):
    with pytest.raises(ValueError, match="no results.jsonl"):
        P.inputs_from_run(tmp_path)
    (tmp_path / "results.jsonl").write_text(json.dumps(_record("mirrored", [1.0], [10], 1.0)) + "\n")
    with pytest.raises(ValueError, match="no ok 'single' record"):
        P.inputs_from_run(tmp_path)


def test_measured_rows_next_to_the_prediction_for_their_setting(run_dir):
    inp = P.inputs_from_run(run_dir)
    rows = {m.strategy: m for m in P.measured_vs_predicted(run_dir, inp, 1e9, 0.0)}
    assert set(rows) == {"horovod", "spark_ps:adag"}
    single_epoch = statistics.median([0.5, 0.6])  # steady epochs of the two single records
    hvd, ps = rows["horovod"], rows["spark_ps:adag"]
    assert hvd.scheme == "allreduce" and hvd.measured_epoch_s == pytest.approx(0.5)
    assert hvd.measured_speedup == pytest.approx(single_epoch / 0.5)
    # predicted for the run's setting: global batch 64 over 2 workers, 1280 / 64 = 20 steps of 0.055 / 2 s each
    want = P.predict(0.0275, 4000, 1280, 32, 1e9, 0.0, [2])[0]
    assert hvd.predicted_epoch_s == pytest.approx(want.allreduce_epoch_s)
    assert hvd.predicted_speedup == pytest.approx(20 * 0.055 / want.allreduce_epoch_s)
    assert hvd.ratio == pytest.approx(hvd.measured_speedup / hvd.predicted_speedup)
    assert ps.scheme == "PS" and ps.window == 12 and ps.measured_epoch_s == pytest.approx(1.0)
    assert ps.predicted_epoch_s == pytest.approx(P.predict(0.0275, 4000, 1280, 32, 1e9, 0.0, [2], 12)[0].ps_epoch_s)


def test_measured_rows_carry_the_results_tables_speedup_and_leave_stragglers_out(tmp_path):
    # two epochs: the first holds a warm-up, so the steady speed-up (epoch 2 alone) and the
    # table's (whole training times) differ; predict must show the table's number as well
    from distbench.results.records import new_record
    from distbench.results.stats import summarize
    from distbench.config.scenario import Scenario

    def rec(strategy, workers, first, later, scenario=None):
        return new_record("run", strategy, workers, 0, "ok", scenario=scenario, steps=40, global_batch_size=64,
                          epochs=2, timings={"train_s": first + later},
                          curve=[{"epoch": 1, "step": 20, "elapsed_s": first},
                                 {"epoch": 2, "step": 40, "elapsed_s": first + later}],
                          workload={"num_parameters": 1000, "sizes": {"train": 1280}})
    recs = [rec("single", 1, 0.8, 0.1), rec("horovod", 2, 0.3, 0.2),
            rec("horovod", 2, 3.0, 2.0, scenario=Scenario(worker=1, slowdown=4.0))]
    (tmp_path / "results.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    (m,) = P.measured_vs_predicted(tmp_path, P.inputs_from_run(tmp_path), 1e9, 0.0)  # the 4x row left out
    table = next(s.speedup for s in summarize(recs[:2]) if s.strategy == "horovod")
    assert m.table_speedup == pytest.approx(table) == pytest.approx(0.9 / 0.5)
    assert m.measured_speedup == pytest.approx(0.1 / 0.2)  # steady-state epochs only
    assert P.measured_rows([m])[0][-1] == "1.80x" and P.MEASURED_HEADERS[-1] == "table speed-up"


def test_cli_predict_takes_the_run_dir_positionally(run_dir):
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--max-workers", "4"])
    assert res.exit_code == 0, res.output
    assert "measured in" in res.output and "measured/predicted" in res.output
    assert "table speed-up: the results table's" in " ".join(res.output.split())  # the two definitions named
    assert any(ln.split()[:3] == ["horovod", "2", "allreduce"] for ln in res.output.splitlines())
    res = CliRunner().invoke(main, ["predict"])
    assert res.exit_code == 2 and "missing the run directory: give it as RUN_DIR" in res.output


def test_cli_predict_prints_table_and_writes_plot(run_dir):
    res = CliRunner().invoke(main, ["predict", "--run-dir", str(run_dir), "--bandwidth", "1e9", "--latency", "0",
                                    "--max-workers", "8"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert "55.00 ms at batch 64" in res.output and "PS window 12" in res.output
    rows = [ln.split() for ln in lines if ln.strip() and ln.split()[0].isdigit()]
    assert [r[0] for r in rows] == ["1", "2", "4", "8"]
    assert (run_dir / "predict.png").stat().st_size > 1000
    assert "first-order model" in res.output and "less than one step" not in res.output
    # user test (helper-12): it said "trust the shape", 13x away from predict --target on the same run
    assert "several times off" in res.output and f"distbench predict {run_dir} --target" in " ".join(res.output.split())
    wide = CliRunner().invoke(main, ["predict", "--run-dir", str(run_dir), "--max-workers", "64"])
    assert "from 32 workers each worker takes less than one step per epoch" in wide.output  # 1280 / (32 x 64) < 1
    firsts = [ln.split()[0] for ln in wide.output.splitlines() if ln.strip() and ln.split()[0].isdigit()]
    assert firsts[-1] == "32" and "64" not in firsts  # the table stops at the data's limit


def test_cli_predict_json_matches_api(run_dir):
    res = CliRunner().invoke(main, ["predict", "--run-dir", str(run_dir), "--json", "--window", "2",
                                    "--per-worker-batch", "32", "--max-workers", "4",
                                    "--plot", str(run_dir / "p.png")])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["inputs"]["window"] == 2
    want = P.predict(0.055 / 2, 4000, 1280, 32, P.DEFAULT_BANDWIDTH_BPS, P.DEFAULT_LATENCY_S, [1, 2, 4], 2)
    assert [p["ps_epoch_s"] for p in out["predictions"]] == pytest.approx([p.ps_epoch_s for p in want])
    assert (run_dir / "p.png").exists()
    # user test (helper-16): --json wrote RUN_DIR/predict.png unasked
    assert CliRunner().invoke(main, ["predict", str(run_dir), "--json", "--max-workers", "2"]).exit_code == 0
    assert not (run_dir / "predict.png").exists()


def test_single_step_is_the_median_interval_as_predict_target_takes_it(tmp_path):
    # user test (helper-16): the first-order table quoted 7.42 ms (mean, first to last epoch), --target 7.49 ms
    (tmp_path / "results.jsonl").write_text(json.dumps(_record("single", [1.0, 1.5, 2.0, 3.0], [10, 20, 30, 40],
                                                               3.0)) + "\n")
    assert P.inputs_from_run(tmp_path).step_s == pytest.approx(0.05)  # intervals 0.05, 0.05, 0.1


def test_first_order_on_a_cluster_run_names_a_one_host_run_to_calibrate_from(run_dir):
    # user test (helper-16): it said to run predict CLUSTER_RUN --target, which cannot calibrate on it
    recs = [json.loads(ln) for ln in (run_dir / "results.jsonl").read_text().splitlines()]
    (run_dir / "results.jsonl").write_text("".join(json.dumps({**r, "bandwidth": "1gbit"}) + "\n" for r in recs))
    out = " ".join(CliRunner().invoke(main, ["predict", str(run_dir), "--max-workers", "2"]).output.split())
    assert (f'This run was made on a cluster, which cannot calibrate the per-strategy model: predict from a one-host '
            f'run of the same workload and check it against this one: distbench predict ONE_HOST_RUN --target "N '
            f'nodes x M, RATE" --against {run_dir}') in out


def test_cli_predict_bad_input_exits_2(tmp_path, run_dir):
    res = CliRunner().invoke(main, ["predict", "--run-dir", str(tmp_path / "missing")])
    assert res.exit_code == 2 and "missing' does not exist: expected a run directory" in res.output
    (tmp_path / "empty").mkdir()
    res = CliRunner().invoke(main, ["predict", "--run-dir", str(tmp_path / "empty")])
    assert res.exit_code == 2 and "no results.jsonl" in res.output
    res = CliRunner().invoke(main, ["predict", "--run-dir", str(run_dir), "--bandwidth", "0"])
    assert res.exit_code == 2 and "'0': expected a number > 0, bare (bytes/s)" in res.output
    res = CliRunner().invoke(main, ["predict", "--run-dir", str(run_dir), "--latency", "nan"])
    assert res.exit_code == 2 and "'nan': expected a number >= 0, bare (seconds)" in res.output
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--bandwidth", "10furlongs"])
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert "'10furlongs': expected a number > 0, bare (bytes/s) or with a unit (gbit," in res.output
    for flag in ("--window", "--per-worker-batch", "--samples", "--max-workers"):
        res = CliRunner().invoke(main, ["predict", "--run-dir", str(run_dir), flag, "0"])
        assert res.exit_code == 2 and f"{flag} 0: expected an integer >= 1" in res.output
    res = CliRunner().invoke(main, ["predict", "--run-dir", str(run_dir), "--plot", str(tmp_path / "no" / "p.png")])
    assert res.exit_code == 2 and "cannot write the plot" in res.output


@pytest.mark.parametrize("bandwidth,latency,want_bw,want_lat", [
    ("10Gbit", "50us", 1.25e9, 5e-5), ("800mbit", "0.2ms", 1e8, 2e-4), ("1.25GB/s", "0.001", 1.25e9, 1e-3),
    ("3e8", "1 ms", 3e8, 1e-3), ("25Gbit/s", "50us", 3.125e9, 5e-5),  # advise's spelling of a rate
    # user test (helper-13): --target's spellings; a capital B is a byte, a small b a bit (10Gb/s was 80 Gbit/s)
    ("10gbps", "50us", 1.25e9, 5e-5), ("10Gb", "50us", 1.25e9, 5e-5), ("10 Gb/s", "50us", 1.25e9, 5e-5),
    ("10GbE", "50us", 1.25e9, 5e-5), ("1.25 GB/s", "50us", 1.25e9, 5e-5),
])
def test_cli_predict_takes_units(run_dir, bandwidth, latency, want_bw, want_lat):
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--json", "--max-workers", "2", "--bandwidth", bandwidth,
                                    "--latency", latency])
    assert res.exit_code == 0, res.output
    inputs = json.loads(res.stdout)["inputs"]
    assert inputs["bandwidth_Bps"] == pytest.approx(want_bw) and inputs["latency_s"] == pytest.approx(want_lat)


def test_an_implausible_bare_number_is_used_but_warned_about(run_dir):
    # the user test: `--latency 50` (meant 50 us) silently predicted 50 s per message
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--json", "--max-workers", "2", "--latency", "50",
                                    "--bandwidth", "100"])
    assert res.exit_code == 0 and json.loads(res.stdout)["inputs"]["latency_s"] == 50
    assert "--latency 50: a bare number is seconds, so this is 50 seconds; did you mean a unit" in res.stderr
    assert "--bandwidth 100: a bare number is bytes/s, so this is 100 bytes/s" in res.stderr
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--json", "--max-workers", "2", "--latency", "5e-5"])
    assert res.exit_code == 0 and "warning" not in res.stderr
    # the user test: `--latency 50 us` printed that warning, then the usage error: now one line that says why
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--latency", "50", "us"])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "warning" not in res.stderr
    assert "unexpected extra argument (us); a unit is written without a space: --latency 50us" in res.stderr


def test_a_torn_last_line_is_skipped(run_dir):
    # the user test: a sweep killed mid-write left '{"strategy": "sin' and predict failed with a parser message
    with open(run_dir / "results.jsonl", "a") as f:
        f.write('{"strategy": "sin')
    assert P.inputs_from_run(run_dir).records == 2
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--max-workers", "2", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["inputs"]["records"] == 2


def test_a_hand_edited_field_drops_its_line_with_a_warning_as_report_does(run_dir, caplog):
    # a results.jsonl with a string where a number or a curve belongs stopped predict with a
    # traceback ('str' object has no attribute 'get'); it reads records as report does now
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    horovod = json.loads(lines[4])
    horovod["curve"] = "x"
    single = json.loads(lines[1])
    single["timings"]["train_s"] = "slow"
    lines[1], lines[4] = json.dumps(single), json.dumps(horovod)
    (run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--max-workers", "2", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["inputs"]["records"] == 1  # the other single record
    assert "line 2: timings.train_s = 'slow' is not a number" in caplog.text
    assert "line 5: curve = 'x' is not a list" in caplog.text


def test_a_cluster_run_names_the_target_it_ran_on(run_dir):
    # user test (helper-24): the refusal's template lacked ", emulated", which checking against an emulated run needs
    recs = [json.loads(ln) for ln in (run_dir / "results.jsonl").read_text().splitlines()]
    (run_dir / "results.jsonl").write_text("".join(json.dumps({**r, "bandwidth": "1gbit"}) + "\n" for r in recs))
    (run_dir / "config.json").write_text(json.dumps({"cluster": {"emulate": {"hosts": 3, "bandwidth": "1gbit"}}}))
    out = " ".join(CliRunner().invoke(main, ["predict", str(run_dir), "--max-workers", "2"]).output.split())
    assert f'--target "3 nodes x 1, 1gbit, emulated" --against {run_dir}' in out


def test_first_order_on_a_run_without_distributed_rows_names_what_measures_them(run_dir):
    # user test (helper-26): it pointed to --target, which refuses such a run
    only = [ln for ln in (run_dir / "results.jsonl").read_text().splitlines() if '"single"' in ln]
    (run_dir / "results.jsonl").write_text("\n".join(only) + "\n")
    out = " ".join(CliRunner().invoke(main, ["predict", str(run_dir), "--max-workers", "2"]).output.split())
    assert (f"The per-strategy model (--target) calibrates from the distributed rows: {run_dir} has no distributed row "
            f"to calibrate the model from (no strategy but single ran): distbench run --resume --out {run_dir} "
            "--strategies horovod,multi_worker_mirrored,mpi_ps:adag measures some into it") in out \
        and "--target \"4" not in out
