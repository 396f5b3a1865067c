"""The per-strategy cost model (costmodel.py) and its calibration table (calibrate.py):
figures worked by hand from synthetic records and a synthetic calibration; the CLI's
one-line errors for what is missing."""

import dataclasses
import json
import math
import os

import pytest
from click.testing import CliRunner

from distbench import calibrate as K
from distbench import costmodel as CM
from distbench.cli import main
from distbench.cluster.emulated import EMULATED_VETH_BPS
from distbench.config import ConfigError
from distbench.results.advice import advise, keep_accuracy, parse_target
from distbench.results.records import new_record, time_to_target
from distbench.results.store import read_records

CAL = {"cores": 2, "points": [
    {"threads": 2, "batch": 64, "step_s": 0.004}, {"threads": 2, "batch": 32, "step_s": 0.0025},
    {"threads": 2, "batch": 16, "step_s": 0.0016},
    {"threads": 1, "batch": 64, "step_s": 0.007}, {"threads": 1, "batch": 32, "step_s": 0.004},
    {"threads": 1, "batch": 16, "step_s": 0.0026}]}
WORKLOAD = {"num_parameters": 1000, "sizes": {"train": 1280}}  # 4,000 bytes; 1280 // 64 = 20 steps per epoch


def rec(strategy, workers, epoch, warm=0.5, threads=1, window=None, accs=(0.5, 0.92, 0.95), repeat=0):
    """An ok record whose steady epoch is ``epoch`` s and whose first epoch took ``warm`` s more."""
    curve = [{"epoch": i + 1, "step": 20 * (i + 1), "elapsed_s": warm + epoch * (i + 1), "test_accuracy": a,
              "test_loss": 1.0 - a}
             for i, a in enumerate(accs)]
    details = {"intra_op_threads": threads, **({"communication_window": window} if window else {})}
    return new_record("run", strategy, workers, repeat, "ok", steps=60, epochs=3, global_batch_size=64,
                      target_accuracy=0.9, time_to_target_s=time_to_target(curve, 0.9),
                      final_test_accuracy=accs[-1], final_test_loss=1.0 - accs[-1], timings={"train_s": curve[-1]["elapsed_s"]}, curve=curve,
                      workload=WORKLOAD, details=details)


@pytest.fixture()
def run_dir(tmp_path):
    recs = [rec("single", 1, 0.1, threads=2), rec("horovod", 2, 0.2), rec("horovod", 4, 0.6),
            rec("mpi_ps:adag", 2, 0.3, window=2, accs=(0.5, 0.8, 0.91)),
            rec("spark_ps:adag", 2, 0.3, window=2, accs=(0.1, 0.2, 0.3))]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (tmp_path / K.CALIBRATION_FILE).write_text(json.dumps(CAL))
    return tmp_path


def by_name(preds):
    return {p.strategy: p for p in preds}


def test_a_one_host_batch_splits_over_the_target_and_the_runs_worker_counts():
    # user test (helper-23): --batch-size 126 for 7 workers, which the run's 4 workers could not split
    assert CM.one_host_batch(120, 7, [2, 3, 4], 1437) == (168, [2, 3, 4])
    assert CM.one_host_batch(120, 512, [2, 3, 4], 1437) == (512, [2, 4])  # 1,536 is past the data: --workers 2,4
    assert CM.one_host_batch(120, 1293, [2, 3, 4], 1437) == (1293, [3])  # 1293 = 3 x 431
    assert CM.one_host_batch(120, 1291, [2, 3, 4], 1437) is None  # a prime: 2 x 1291 is past the data
    # user test (helper-27): a prime target found none (no count divides it) though 2 x 121 fits, and 4 x 121
    assert CM.one_host_batch(120, 121, [2, 3, 4], 1293) == (484, [2, 4])
    assert CM.one_host_batch(120, 250, [2, 3, 4], 1293) == (500, [2, 4])  # was 250 with 2 alone


def test_a_target_no_one_host_batch_fits_says_so(run_dir):
    # user test (helper-24): 121 workers were told --batch-size 121, which the run's 2 and 4 workers cannot split
    with pytest.raises(ValueError, match="no global batch within the data's 1280 training samples splits over them "
                                         "and over a worker count of the run \\(2, 4\\)"):
        CM.predict_strategies(run_dir, parse_target("641 nodes, 10gbit").cluster())
    with pytest.raises(ValueError, match="--batch-size 508 --out NEW_RUN_DIR"):  # 127 x 4: the run's counts too
        CM.predict_strategies(run_dir, parse_target("127 nodes, 10gbit").cluster())
    assert CM.one_host_batch(64, 3, [], 0) == (66, [])


def test_compute_table_interpolates_log_log_and_never_below_the_smallest_batch():
    assert K.compute_s(CAL, 64, 2) == pytest.approx(0.004)
    assert K.compute_s(CAL, 45.254834, 2) == pytest.approx((0.004 * 0.0025) ** 0.5)  # geometric midpoint
    assert K.compute_s(CAL, 4, 2) == pytest.approx(0.0016)            # a step's fixed cost
    assert K.compute_s(CAL, 128, 1) == pytest.approx(0.014)           # proportional above the largest
    assert K.compute_s(CAL, 32, 3) == pytest.approx(0.0025)           # the nearest thread count measured
    assert K.batch_ladder(120, [3, 5]) == [120, 60, 40, 30, 24, 20, 15, 7, 3]
    assert K.thread_counts(0, 4) == [4, 2, 1] and K.thread_counts(3, 8) == [3]
    # user test (helper-13): a noisy point below a smaller batch's time is pooled with it (their mean)
    noisy = {"cores": 2, "points": [{"threads": 1, "batch": 20, "step_s": 0.00363},
                                    {"threads": 1, "batch": 30, "step_s": 0.00438},
                                    {"threads": 1, "batch": 40, "step_s": 0.00411}]}
    assert K.compute_s(noisy, 40, 1) == K.compute_s(noisy, 35, 1) == pytest.approx(0.004245)
    assert K.compute_s(noisy, 80, 1) == pytest.approx(2 * 0.004245)
    # user test (helper-15): one slow small batch (2.25 ms at 3) set every batch up to 20 to its time
    slow = {"cores": 2, "points": [{"threads": 1, "batch": b, "step_s": v} for b, v in
                                   ((3, 0.00225), (7, 0.0011), (15, 0.00119), (20, 0.0021), (30, 0.003))]}
    assert K.compute_s(slow, 15, 1) == pytest.approx((0.00225 + 0.0011 + 0.00119) / 3)
    assert K.compute_s(slow, 20, 1) == pytest.approx(0.0021)


def test_emulated_target_at_a_measured_size_is_the_run_plus_the_link(run_dir):
    preds, inputs = CM.predict_strategies(run_dir, parse_target("4 nodes x 1, 1gbit, emulated").cluster())
    h = by_name(preds)["horovod"]
    # compute and framework cost are the run's own at 4 workers on this machine (0.6 s per epoch); the ring's
    # 2 x 3/4 x 4000 B per step fit in the emulated link's token bucket (500 KB at 1 Gbit/s): they cross at the
    # veth's own speed, half of it under the framework cost (OVERLAP)
    veth = 6000 / EMULATED_VETH_BPS * (1 - CM.OVERLAP)
    assert h.epoch_s == pytest.approx(20 * (0.03 + veth)) and h.terms_s["link"] == pytest.approx(20 * veth)
    assert h.terms_s["compute"] == pytest.approx(20 * 0.0026 * 2)     # 4 processes of 1 thread on 2 cores
    assert h.epochs_to_target == 2 and h.time_to_target_s == pytest.approx(0.5 + 2 * h.epoch_s)
    assert h.notes == [] and inputs["model_bytes"] == 4000 and inputs["global_batch"] == 64


def test_one_node_like_this_machine_is_the_run_at_that_count(run_dir):
    # user test (helper-20): "1 node x 4" took the 2-worker row's framework cost (multi_worker_mirrored at 0.47
    # of its own measured 4-worker epoch); one node without --node-step or GPUs is this machine, as measured
    h = by_name(CM.predict_strategies(run_dir, parse_target("1 node x 4").cluster())[0])["horovod"]
    assert h.epoch_s == pytest.approx(20 * 0.03) and h.terms_s["link"] == 0 and h.notes == []
    other = parse_target("1 node x 4").cluster(node_step_s=0.002)  # another machine: its own cores, not these
    assert "framework cost taken as at 2 workers" in " ".join(by_name(CM.predict_strategies(run_dir, other)[0])[
        "horovod"].notes)


def test_an_emulated_link_charges_what_exceeds_its_token_bucket():
    c = parse_target("4 nodes x 1, 1gbit, emulated").cluster()
    f, burst = CM.wire_factor("horovod", 1e9), 1e9 / 8 / 250          # 4 ms at the rate
    V = EMULATED_VETH_BPS  # what the bucket lets through crosses at the veth's own speed
    per_step, bound = CM._link("horovod", c, 4.5e6, 10, None)
    assert per_step == pytest.approx(f * (2 * 3 / 4 * 4.5e6 - burst) / 1.25e8 + burst / V) and bound == 0
    real = parse_target("4 nodes x 1, 1gbit, 0 us latency").cluster()  # a real link has no bucket to spend
    assert CM._link("horovod", real, 4.5e6, 10, None)[0] == pytest.approx(f * 2 * 3 / 4 * 4.5e6 / 1.25e8)
    f = CM.wire_factor("mpi_ps:adag", 1e9)  # each exchange: commit out, pull in, each M past the bucket
    per_step, bound = CM._link("mpi_ps:adag", c, 4.5e6, 10, 2)
    assert per_step == pytest.approx(5 * 2 * (f * (4.5e6 - burst) / 1.25e8 + burst / V) / 10)
    assert bound == pytest.approx(5 * 4 * 2 * (f * (4.5e6 - burst) / 1.25e8 + burst / V))  # one at a time
    # at 10 Gbit/s the 5 MB bucket holds a 4.5 MB message whole: it crosses at the veth's speed, not for free
    fast = parse_target("4 nodes x 1, 10gbit, emulated").cluster()
    assert CM._link("mpi_ps:easgd", fast, 4.5e6, 10, 2)[0] == pytest.approx(5 * 4 * 2 * 4.5e6 / V / 10)
    # the bucket refills at the rate between exchanges (user test, helper-15: at 2 Mbit/s, 19 KB was charged nothing)
    slow = parse_target("3 nodes x 1, 2 Mbit/s, emulated").cluster()
    f, R = CM.wire_factor("horovod", 2e6), 2e6 / 8
    assert CM._link("horovod", slow, 19240, 10, None, idle_s=0.004)[0] == pytest.approx(
        f * (2 * 2 / 3 * 19240 - R * 0.004) / R + R * 0.004 / V)
    assert CM._link("horovod", slow, 19240, 10, None, idle_s=1.0)[0] == pytest.approx(  # a full 64 KiB bucket
        2 * 2 / 3 * 19240 / V)                                                          # holds it
    f = CM.wire_factor("mpi_ps:adag", 2e6)
    assert CM._link("mpi_ps:adag", slow, 19240, 10, 2, idle_s=0.004)[0] == pytest.approx(  # 2 steps to refill
        5 * 2 * (f * (19240 - R * 0.008) / R + R * 0.008 / V) / 10)


def test_horovod_mpi_moves_the_bytes_of_the_allreduce_open_mpi_picks_for_its_world_size():
    # Open MPI 4.1 (coll/tuned): Rabenseifner's for MBs below 8 ranks; at 3 ranks one rank is folded
    # in first and sent the result last, 2 M more than a power of two's 2 (p'-1)/p' M
    assert CM.openmpi_allreduce(2, 4.5e6) == ("Rabenseifner's reduce-scatter + allgather", pytest.approx(4.5e6))
    assert CM.openmpi_allreduce(3, 4.5e6)[1] == pytest.approx(3 * 4.5e6)
    assert CM.openmpi_allreduce(4, 4.5e6)[1] == pytest.approx(1.5 * 4.5e6)
    assert CM.openmpi_allreduce(3, 20000) == ("ring", pytest.approx(4 / 3 * 20000))      # 16-64 KB at 3 ranks
    assert CM.openmpi_allreduce(6, 4000) == ("recursive doubling", pytest.approx(2 * 4000 + 2 * 4000))
    assert CM.openmpi_allreduce(1, 4.5e6) == ("none", 0.0)
    real = parse_target("3 nodes x 1, 1gbit, 0 us latency").cluster()
    f = CM.wire_factor("horovod_mpi", 1e9)
    assert CM._link("horovod_mpi", real, 4.5e6, 10, None)[0] == pytest.approx(f * 3 * 4.5e6 / 1.25e8)
    assert CM._link("horovod", real, 4.5e6, 10, None)[0] == pytest.approx(
        CM.wire_factor("horovod", 1e9) * 4 / 3 * 4.5e6 / 1.25e8)                           # Gloo: a ring


def test_real_target_drops_core_sharing_and_extrapolates_the_framework_cost(run_dir):
    fw2, fw4 = 0.01 - 0.004, (0.03 - 0.0026 * 2) / 2                 # normalised by the sharing they ran with
    f = CM.wire_factor("horovod", 1e9)  # Gloo's time on a 1 Gbit/s link over bytes / rate
    link = 2 * 7 / 8 * 4000 * f / 1.25e8 + 2 * 7 * 50e-6
    preds, _ = CM.predict_strategies(run_dir, parse_target("8 nodes x 1, 1 Gbit/s").cluster())
    h = by_name(preds)["horovod"]
    # dedicated nodes: a node's 2 threads at batch 8 (the calibration's floor); the 4-worker row
    # oversubscribed the 2 cores, so the framework cost is the 2-worker row's
    assert h.epoch_s == pytest.approx(20 * (0.0016 + fw2 + link - CM.OVERLAP * min(fw2, link)))
    assert ("framework cost taken as at 2 workers (the only count measured without oversubscribing the cores)"
            in h.notes)
    assert "epochs to target from its curve at 4 workers (extrapolated to 8)" in h.notes
    # emulated on this machine, 8 workers share its 2 cores: the straight line through 2 and 4
    preds, _ = CM.predict_strategies(run_dir, parse_target("8 nodes x 1, 1 Gbit/s, emulated").cluster())
    h = by_name(preds)["horovod"]
    fw8 = fw4 + (fw4 - fw2) * (8 - 4) / (4 - 2)
    veth = 2 * 7 / 8 * 4000 / EMULATED_VETH_BPS * (1 - CM.OVERLAP)  # the ring's 7 KB fit in the link's bucket
    assert h.epoch_s == pytest.approx(20 * (0.0026 * 4 + fw8 * 4 + veth))
    assert "framework cost extrapolated from 2 and 4 workers" in h.notes


def test_link_factor_is_interpolated_in_log_rate_between_its_measured_rates(monkeypatch):
    monkeypatch.setitem(CM.WIRE_FACTOR, "horovod", ((1e8, 1.6), (1e9, 1.1)))
    assert CM.wire_factor("horovod", 1e8) == 1.6 and CM.wire_factor("horovod", 1e9) == 1.1
    assert CM.wire_factor("horovod", 10 ** 8.5) == pytest.approx(1.35)   # half way in log rate
    assert CM.wire_factor("horovod", 1e7) == 1.6 and CM.wire_factor("horovod", 1e10) == 1.1  # held outside
    assert CM.wire_factor("mpi_ps:downpour", 1e9) == CM.WIRE_FACTOR["mpi_ps:"][1][1]  # by its family
    assert CM.wire_factor("mpi_ps:easgd", 1e9) == CM.WIRE_FACTOR["mpi_ps:easgd"][1][1]  # its own


def test_a_target_outside_the_fitted_rates_says_which_factor_it_used(run_dir):
    notes = {r: by_name(CM.predict_strategies(run_dir, parse_target(f"2 nodes, {r}").cluster())[0])["horovod"].notes
             for r in ("1gbit", "10gbit")}
    assert not any("fitted at" in n for n in notes["1gbit"])
    assert "its link factor was fitted at 100 Mbit/s and 1 Gbit/s; the nearest one is used at 10 Gbit/s" in \
        notes["10gbit"]


def test_a_falling_framework_line_is_held_at_the_smallest_measured():
    # user test: a noisy 2-worker row above the 3-worker one extrapolated 8 MPI ranks to no cost at all
    assert CM._framework({2: 0.04, 3: 0.01}, 8) == (
        0.01, "extrapolated from 2 and 3 workers, held at the smallest measured (the line falls)")
    v, how = CM._framework({2: 0.01, 3: 0.02}, 5)  # a rising line is followed
    assert v == pytest.approx(0.04) and how == "extrapolated from 2 and 3 workers"


def test_parameter_server_windows_and_server_link(run_dir):
    preds, _ = CM.predict_strategies(run_dir, parse_target("4 nodes, 100 Mbit/s").cluster())
    p = by_name(preds)
    m = p["mpi_ps:adag"]
    f = CM.wire_factor("mpi_ps:adag", 1e8)
    assert f == CM.WIRE_FACTOR["mpi_ps:"][0][1] and CM.wire_factor("nonesuch", 1e8) == 1.0
    own = 10 * (2 * 4000 * f / 1.25e7 + 2 * 50e-6)                    # 10 windows of 2 steps: commit + pull
    assert m.epoch_s == pytest.approx(20 * (0.0016 + 0.011) + own - 20 * CM.OVERLAP * min(0.011, own / 20))
    assert "framework cost taken as at 2 workers (the only count measured)" in m.notes
    # a 400 KB model would make the server's link (4 workers' exchanges) the bound
    slow, _ = CM.predict_strategies(run_dir, parse_target("4 nodes, 1 Mbit/s").cluster())
    assert by_name(slow)["mpi_ps:adag"].epoch_s == pytest.approx(10 * 4 * 2 * 4000 * f / 1.25e5)
    # spark_ps never reached 0.9: no time to target, ranked after those that did
    assert p["spark_ps:adag"].time_to_target_s is None and p["spark_ps:adag"].rank == len(preds)
    assert [q.rank for q in preds] == list(range(1, len(preds) + 1))


def test_missing_inputs_name_the_command_that_measures_them(run_dir, tmp_path_factory, monkeypatch, capsys):
    with pytest.raises(ValueError, match=("global batch of 128, which the target.s 128 and the run.s 2, 4 workers "
                                          f"split: distbench run {run_dir}/config.json --batch-size 128 ")):
        CM.predict_strategies(run_dir, parse_target("128 nodes, 10gbit").cluster())
    # helper-12: a batch bigger than the data cannot be the fix
    with pytest.raises(ValueError, match="the data's 1280 training samples cap a target at 1280 workers"):
        CM.predict_strategies(run_dir, parse_target("2000 nodes, 10gbit").cluster())
    (run_dir / K.CALIBRATION_FILE).unlink()
    # helper-12: without workload/ calibrate cannot measure, so it is not the fix named
    with pytest.raises(ValueError, match=f"no compute calibration: {run_dir} holds no workload/ .* distbench run "
                                         f"{run_dir}/config.json --out NEW_RUN_DIR"):
        CM.predict_strategies(run_dir, parse_target("4 nodes, 10gbit").cluster())
    (run_dir / "config.json").write_text(json.dumps({"training": {"global_batch_size": 64}, "run": {"workers": [2]}}))
    with pytest.raises(ConfigError, match="holds no workload/"):
        K.calibrate(run_dir)
    (run_dir / "workload").mkdir()
    with pytest.raises(ValueError, match=f"no compute calibration: distbench calibrate {run_dir} measures it"):
        CM.predict_strategies(run_dir, parse_target("4 nodes, 10gbit").cluster())
    # user test (helper-35): where measuring it failed (a factory not importable from here), that is the error
    def fails(rd):
        raise ConfigError("model.factory = 'mymodels:build': cannot import module 'mymodels'; run distbench from ...")

    monkeypatch.setattr(K, "calibrate", fails)
    monkeypatch.setattr(K, "_FAILED", {})
    K.ensure(run_dir)
    assert "cannot import" not in capsys.readouterr().err  # said once, by the refusal below (helper-36: twice)
    with pytest.raises(ValueError, match="no compute calibration, and measuring it failed: model.factory = "
                                         "'mymodels:build': cannot import module 'mymodels'"):
        CM.predict_strategies(run_dir, parse_target("4 nodes, 10gbit").cluster())
    empty = tmp_path_factory.mktemp("nosingle")
    (empty / "results.jsonl").write_text(json.dumps(rec("horovod", 2, 0.2)) + "\n")
    with pytest.raises(ValueError, match=f"no ok 'single' record.*--strategies single --out {empty} --resume"):
        CM.predict_strategies(empty, parse_target("4 nodes, 10gbit").cluster())
    # user test: single recorded unavailable (a GPU machine without CUDA): --resume keeps it, so it is not suggested
    with (empty / "results.jsonl").open("a") as f:
        f.write(json.dumps(new_record("run", "single", 1, 0, "unavailable", reason="no CUDA; fix it")) + "\n")
    # the model needs single and the distributed rows in one directory: the whole sweep again (helper-25)
    with pytest.raises(ValueError, match=(f"no ok 'single' record \\(unavailable: no CUDA\\).*once that is fixed, "
                                          f"distbench run {empty}/config.json --out {empty}-again measures it with "
                                          "the rest of the sweep")):
        CM.predict_strategies(empty, parse_target("4 nodes, 10gbit").cluster())
    from distbench.predict import no_single

    assert f"--strategies single --out {empty}-single" in no_single(empty, read_records(empty), "predict needs it")
    # user test (helper-26): a single that timed out was offered the same command again
    (empty / "config.json").write_text(json.dumps({"run": {"timeout_s": 30}}))
    timed_out = [new_record("run", "single", 1, 0, "timeout", reason="timed out after 30 s; it was training")]
    said = no_single(empty, timed_out, "predict needs it", with_rest=True)
    assert f"(timeout: timed out after 30 s): predict needs it; distbench run {empty}/config.json --timeout 120 " \
           f"--out {empty}-again measures it" in said and "once that is fixed" not in said
    # user test (helper-25): the reasons were Python's ("('points')", "'>' not supported between ...")
    for text, said in (("{}", "no 'points': expected a non-empty list of {threads, batch, step_s}"),
                       ("[]", "a JSON list, expected an object with 'cores' and 'points'"),
                       ('{"cores": 2, "points": []}', "no 'points'"),
                       ('{"cores": 2, "points": [{"threads": 1, "batch": 8, "step_s": "1"}]}',
                        'point 0 is {"threads": 1, "batch": 8, "step_s": "1"}, expected numbers'),
                       ('{"cores": 2, "points": [{"threads": 1, "batch": 8, "step_s": 0}]}', 'point 0 is {"threads": 1, "batch": 8, "step_s": 0}: step_s must be > 0'),
                       ('{"points": [{"threads": 1, "batch": 8, "step_s": 1}]}', "'cores' is None"),
                       ("{", "not readable JSON"),
                       # user test (helper-26): a traceback, and "Cannot specify ',' with 's'."
                       (json.dumps({**CAL, "workload": "abc"}), "'workload' is \"abc\", expected"),
                       (json.dumps({**CAL, "workload": {"num_parameters": "4810"}}), "'workload' is {\"num_par"),
                       (json.dumps({**CAL, "global_batch": "120"}), "'global_batch' is '120'")):
        (run_dir / K.CALIBRATION_FILE).write_text(text)
        with pytest.raises(ValueError) as e:
            CM.predict_strategies(run_dir, parse_target("4 nodes, 10gbit").cluster())
        assert f"is not a calibration file ({said}" in str(e.value) and "distbench calibrate" in str(e.value)


def test_cli_predict_target_table_json_and_errors(run_dir):
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "4 nodes x 1, 1gbit, emulated", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)  # the shape of advise --json's target_predictions (user test, helper-15)
    assert doc["target"]["emulated"] and doc["target"]["latency_s"] == 0 and doc["strategies"][0]["rank"] == 1
    assert doc["target"]["workers"] == 4 and doc["inputs"]["validated"].startswith("against emulated clusters")
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "4 nodes 10gbit"])
    assert res.exit_code == 0 and "horovod" in res.output and "Assumed: links of 10 Gbit/s" in res.output
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "4 nodes 2kbit"])  # helper-22: 1.72e+03 s
    assert res.exit_code == 0 and "e+0" not in res.output and " min " in res.output, res.output
    from distbench.text import duration_text, seconds_text

    assert (seconds_text(1720.4), seconds_text(0.0123), duration_text(3 * 86400)) == ("28.7 min", "0.0123 s", "3 days")
    assert (seconds_text(8.43e-5), seconds_text(0.0)) == ("84.3 us", "0 s")  # helper-30: 8.43e-05 s
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "4 nodes 10gbit", "--bandwidth", "1gbit"])
    assert res.exit_code == 2 and "--bandwidth belongs to the first-order table" in res.output
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "4 nodes 10gbit", "--max-workers", "2"])
    assert res.exit_code == 2 and "--max-workers belongs to the first-order table" in res.output  # helper-21
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "lots"])
    assert res.exit_code == 2 and "--target 'lots'" in res.output
    # helper-12: predict takes --target-accuracy as advise does; 0.94 is reached one epoch later than 0.9
    at = {a: json.loads(CliRunner().invoke(main, ["predict", str(run_dir), "--target", "2 nodes, 1gbit", "--json"] +
                                           (["--target-accuracy", a] if a else [])).output)
          for a in (None, "0.94", "94%")}  # helper-36: "94%" was "not a valid float"
    hv = {a: next(p for p in d["strategies"] if p["strategy"] == "horovod") for a, d in at.items()}
    assert hv[None]["epochs_to_target"] == 2 and hv["0.94"]["epochs_to_target"] == 3 == hv["94%"]["epochs_to_target"]
    assert at["0.94"]["inputs"]["target_accuracy"] == 0.94
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "2 nodes, 1gbit", "--target-accuracy", "94"])
    assert res.exit_code == 2 and "--target-accuracy 94: expected a test accuracy in (0, 1] (a fraction: for 94% write 0.94)" in res.output
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "2 nodes, 1gbit", "--target-accuracy", "0.94%"])
    assert res.exit_code == 2 and "'0.94%' is 0.0094 of the test samples: did you mean 0.94" in res.output  # h-37
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target-accuracy", "0.9"])
    assert res.exit_code == 2 and "predict: --target-accuracy needs --target" in res.output
    # user test (helper-14): no strategy reaching the accuracy ranked by epoch time without a word; --node-step units
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "2 nodes, 1gbit", "--target-accuracy", "0.999"])
    assert res.exit_code == 0 and "No strategy reaches 0.999 in the run's curves: the ranks are by seconds per epoch" \
        in " ".join(res.output.split())
    steps = {a: json.loads(CliRunner().invoke(main, ["predict", str(run_dir), "--target", "2 nodes, 1gbit", "--json",
                                                     "--node-step", a]).stdout)["strategies"]
             for a in ("4ms", "0.004")}
    assert steps["4ms"] == steps["0.004"]
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "2 nodes, 1gbit", "--node-step", "250"])
    assert res.exit_code == 0 and "--node-step 250: a bare number is seconds, so this is 250 seconds" in res.stderr


def test_an_unlikely_target_is_used_but_warned_about(run_dir):
    # user test (helper-13): 10 kbit/s, 1 s of latency and a latency on an emulated cluster passed without a word
    assert parse_target("4 nodes, 1gbit").warnings() == []
    assert "did you mean Mbit/s" in parse_target("4 nodes, 10 kbit/s").warnings()[0]
    assert "did you mean Gbit/s" in parse_target("4 nodes, 10 Tbit/s").warnings()[0]
    assert "check its unit (us, ms or s)" in parse_target("4 nodes, 1gbit, 1 s latency").warnings()[0]
    assert parse_target("4 nodes, 1gbit, 50 ms latency").warnings() == [  # user test (helper-43): said nothing
        "a latency of 50 ms per message is a wide-area network's, over 1000x a datacentre's (tens of microseconds): "
        "check its unit (us, ms or s)"]
    assert parse_target("4 nodes, 1gbit, 5 ms latency").warnings() == []
    assert "shapes the rate only" in parse_target("4 nodes, 1gbit, 5 ms, emulated").warnings()[0]
    # user test (helper-20): a rate given for one node was dropped without a word
    assert "the 10 Gbit/s given is unused" in parse_target("our 4-GPU cluster at 10gbit").warnings()[0]
    assert parse_target("8 GPUs").warnings() == []
    assert parse_target("1 node x 2, emulated").warnings() == [  # user test (helper-24): dropped silently
        "one emulated host is this machine itself: 'emulated' changes nothing for one node"]
    assert parse_target("2 nodes x 4 TPUs, 10gbit").warnings()[0].startswith("TPUs are predicted as GPUs")  # h-21
    four = parse_target("4x2@10gbit")  # user test (helper-25): the --emulate form, read as a real cluster silently
    assert (four.nodes, four.per_node, four.emulated) == (4, 2, False) and four.warnings() == [
        "'4x2@10gbit' is the form of --emulate; read as a real cluster of dedicated nodes: to predict this machine's "
        "emulated cluster write \"4x2@10gbit, emulated\""]
    assert parse_target("4x2@10gbit, emulated").warnings() == [] == parse_target("4 x 2, 10gbit").warnings()
    assert "is the form of --emulate" in parse_target("4x2@10gbit, 50us").warnings()[0]  # helper-27
    # user test (helper-27): Results.advise said nothing of them, advise --json had no field for them
    from distbench.api import Results

    with pytest.warns(UserWarning, match="is the form of --emulate"):
        adv = Results(run_dir).advise(target="4x2@10gbit")
    assert adv.to_dict()["target_warnings"] == four.warnings()
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "2 nodes, 10 kbit/s"])
    assert res.exit_code == 0 and "distbench: warning: --target: a link of 10 kbit/s" in res.output
    res = CliRunner().invoke(main, ["advise", str(run_dir), "--target", "2 nodes, 10 kbit/s"])
    assert "distbench: warning: --target: a link of 10 kbit/s" in res.output
    with pytest.warns(UserWarning, match="did you mean"):
        from distbench.api import Results

        Results(run_dir).predict("2 nodes, 10 kbit/s")


def test_the_error_band_says_when_a_target_lies_outside_the_validated_cells(run_dir):
    band = {t: CM.predict_strategies(run_dir, parse_target(t).cluster())[1]["validated"]
            for t in ("3 nodes x 1, 1gbit, emulated", "8 nodes x 2, 25gbit")}
    assert band["3 nodes x 1, 1gbit, emulated"] == CM.VALIDATED
    assert band["8 nodes x 2, 25gbit"].endswith("this target's 8 nodes, 16 workers, 2 workers per node, 25 Gbit/s, "
                                                 "dedicated nodes lie outside those cells, which the band does not "
                                                 "cover")
    # user test (helper-18): GPUs went unsaid
    gpus = CM.predict_strategies(run_dir, parse_target("4 nodes x 2 GPUs, 10gbit").cluster())[1]["validated"]
    assert "8 workers, 2 workers per node, GPUs, dedicated nodes lie outside" in gpus
    # user test (helper-26): one node (this machine's own kind) was "dedicated nodes"
    one = CM.predict_strategies(run_dir, parse_target("1 node x 2").cluster())[1]["validated"]
    assert one.endswith("this target's 1 node, 2 workers per node lie outside those cells, which the band does not "
                        "cover")


def test_advise_target_names_the_predicted_leader(run_dir):
    records = [json.loads(ln) for ln in (run_dir / "results.jsonl").read_text().splitlines()]
    adv = advise(records, run_dir, parse_target("4 nodes x 1, 1gbit, emulated"))
    text = "\n".join(adv.target)
    assert adv.target_recommended == "single"  # 0.1 s epochs beat every distributed row here
    assert "Predicted fastest to 0.9 there: single" in text and "Error band:" in text
    assert adv.to_dict()["target_recommended"] == "single"
    data = json.loads(json.dumps(adv.to_dict()))["target_predictions"]  # as advise --json prints it
    assert data["target"]["nodes"] == 4 and data["target"]["emulated"] is True
    rows = {p["strategy"]: p for p in data["strategies"]}
    assert rows["single"]["rank"] == 1 and rows["horovod"]["epoch_s"] == pytest.approx(20 * 0.03, rel=1e-3)
    assert data["inputs"]["validated"].startswith("against emulated clusters")
    far = advise(records, run_dir, parse_target("4 nodes, 1 kbit/s"))
    assert "does not decide" not in "\n".join(far.target)



def test_advise_target_lists_the_costs_of_the_targets_leaders(run_dir, monkeypatch):
    # user test (helper-16): the Operational cost named this host's runner-up, not the one predicted for the target
    from distbench.results import advice as A

    records = [json.loads(ln) for ln in (run_dir / "results.jsonl").read_text().splitlines()]
    leaders = [CM.StrategyPrediction("single", 1), CM.StrategyPrediction("spark_ps:adag", 4, window=4)]
    monkeypatch.setattr(A, "_target_sentences", lambda *a: (["t"], leaders, {}))
    adv = advise(records, run_dir, parse_target("4 nodes x 1, 1gbit"))
    assert adv.target_recommended == "single" and "spark_ps:adag" in dict(adv.costs)


def test_run_emulate_flag_sets_the_emulated_cluster():
    from distbench import config
    from distbench.cli.sweep import _emulate
    from distbench.config import ConfigError

    cfg = config.override(config.load(None), cluster__emulate=_emulate("4x2@10gbit"))
    e = cfg.cluster.emulate
    assert (e.hosts, e.slots, e.bandwidth) == (4, 2, "10gbit")
    assert _emulate("3") == {"hosts": 3} and _emulate(None) is None
    with pytest.raises(ConfigError, match="--emulate 'four': expected HOSTS"):
        _emulate("four")
    t = parse_target("3 nodes x 1, 1gbit, emulated")
    assert t.emulated and t.latency_s == 0 and t.workers == 3
    assert parse_target("3 nodes x 1, 1gbit, emulated, 20 us").latency_s == pytest.approx(20e-6)
    assert not parse_target("3 nodes, 1gbit").emulated


def test_cli_predict_against_a_cluster_run(run_dir):
    # the run itself stands in for a cluster run here: its 2-worker rows next to the prediction at 2 workers
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "2 nodes x 1, 1gbit, emulated",
                                    "--against", str(run_dir), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["measured"]["horovod"]["epoch_s"] == [pytest.approx(0.2)]
    # user test (helper-13): a one-host run or other links do not check a cluster prediction, said
    assert doc["against_warning"] == f"{run_dir} does not check this prediction: it ran on one host, not on a cluster"
    rows = CM.against_rows([CM.StrategyPrediction("horovod", 2, epoch_s=0.25, time_to_target_s=1.0)],
                           doc["measured"])
    assert rows == [["horovod", "0.25 s", "0.2 s", "1.25", "1 s", "0.9 s", "1.11"]]
    # user test (helper-16): the JSON had the measured seconds but no ratios
    (hv,) = [a for a in doc["against"] if a["strategy"] == "horovod"]
    pred = next(p for p in doc["strategies"] if p["strategy"] == "horovod")
    assert hv["epoch_ratio"] == pytest.approx(pred["epoch_s"] / 0.2) and hv["measured_epoch_s"] == [pytest.approx(0.2)]
    # user test (helper-19): the warning came after the ratios it undercuts, on stderr only
    out = " ".join(CliRunner().invoke(main, ["predict", str(run_dir), "--target", "2 nodes x 1, 1gbit, emulated",
                                             "--against", str(run_dir)]).stdout.split())
    assert out.index(f"warning: {run_dir} does not check this prediction") < out.index(f"measured in {run_dir}")
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--against", str(run_dir), "--node-step", "0.1"])
    assert res.exit_code == 2 and "predict: --node-step and --against need --target" in res.output



def test_a_window_sweep_predicts_each_window_on_its_own(run_dir):
    # user test (helper-39): windows 2 and 8 of mpi_ps:adag were pooled into one prediction, unsaid
    with (run_dir / "results.jsonl").open("a") as f:
        r = rec("mpi_ps:adag", 2, 0.1, window=8, accs=(0.9, 0.95, 0.96))
        f.write(json.dumps({**r, "config_id": "mpi_ps-adag_w2_win8", "communication_window": 8}) + "\n")
    preds = CM.predict_strategies(run_dir, parse_target("2 nodes, 10gbit").cluster())[0]
    ps = sorted((p for p in preds if p.strategy == "mpi_ps:adag"), key=lambda p: p.window)
    assert [(p.window, p.label) for p in ps] == [(2, "mpi_ps:adag (window 2)"), (8, "mpi_ps:adag (window 8)")]
    assert ps[0].epoch_s > 2 * ps[1].epoch_s  # 0.3 s against 0.1 s measured: not their median
    assert next(p for p in preds if p.strategy == "spark_ps:adag").label == "spark_ps:adag"  # one window: no label
    rows = CM.table_rows(preds, 0.9)
    assert {r[1] for r in rows} >= {"mpi_ps:adag (window 2)", "mpi_ps:adag (window 8)", "spark_ps:adag"}
    adv = advise(CM.read_records(run_dir), run_dir, parse_target("2 nodes, 10gbit"))
    assert adv.target_recommended == "mpi_ps:adag (window 8)"
    assert "mpi_ps:adag (window 8)" in " ".join(adv.target)
    assert next(s for s in adv.target_predictions["strategies"] if s["window"] == 8)["label"] == "mpi_ps:adag (window 8)"
    measured = CM.measured_on(run_dir, 2)  # the run stands in for a cluster run: each window against its own
    assert measured["mpi_ps:adag (window 8)"]["epoch_s"] == [pytest.approx(0.1)]
    ratios = {a["strategy"]: a["measured_epoch_median_s"] for a in CM.against(preds, measured)}
    assert ratios["mpi_ps:adag (window 2)"] == pytest.approx(0.3) and ratios["mpi_ps:adag (window 8)"] == pytest.approx(0.1)


def test_a_window_that_held_the_whole_run_is_named_not_predicted(run_dir):
    # user test (helper-43): window 1000 against 60 steps per replica was ranked second on the target,
    # extrapolated from a curve whose points are each replica's one commit at its end
    with (run_dir / "results.jsonl").open("a") as f:
        r = rec("mpi_ps:easgd", 2, 0.01, window=1000, accs=(0.9, 0.95, 0.96))
        r["details"]["per_worker_steps"] = [60, 60]
        f.write(json.dumps({**r, "config_id": "mpi_ps-easgd_w2_win1000", "communication_window": 1000}) + "\n")
    target = parse_target("2 nodes, 10gbit")
    preds, inputs = CM.predict_strategies(run_dir, target.cluster())
    assert "mpi_ps:easgd" not in by_name(preds) and inputs["not_predicted_once"] == ["mpi_ps:easgd (window 1000)"]
    assert ("Not predicted (its window is at least the steps each replica took in the whole run, so each replica "
            "committed once") in CM.not_predicted_text(inputs)
    adv = advise(CM.read_records(run_dir), run_dir, target)
    assert adv.target_recommended != "mpi_ps:easgd (window 1000)"
    assert any("mpi_ps:easgd (window 1000)." in line for line in adv.target)


def test_a_one_epoch_single_is_named_as_the_reason_a_calibration_cannot_anchor(run_dir):
    # user test (helper-45): 1 epoch of single (7.8 ms a step, mostly its first epoch's one-off) refused the
    # calibration, and the fix named (calibrate again) gave the same error every time
    recs = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    one = rec("single", 1, 2.0, warm=0.0, threads=2, accs=(0.8,))  # 2.0 s for 20 steps: 0.1 s a step
    one["epochs"] = 1
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [one] + recs[1:]))
    with pytest.raises(ValueError, match=(f"single's step in {run_dir} \\(100 ms\\) is from a run of 1 epoch, whose "
                                          "time is mostly its one-off first epoch .* distbench run "
                                          f"{run_dir}/config.json --out {run_dir}-e3 --epochs 3 measures one")):
        CM.predict_strategies(run_dir, parse_target("2 nodes, 10gbit").cluster())


def test_a_window_is_named_when_the_sweeps_other_windows_committed_once(run_dir):
    # user test (helper-45): windows 5 and 60, 60 committed once: the one left was printed without its window
    with (run_dir / "results.jsonl").open("a") as f:
        r = rec("mpi_ps:adag", 2, 0.01, window=1000, accs=(0.9, 0.95, 0.96))
        r["details"]["per_worker_steps"] = [60, 60]
        f.write(json.dumps({**r, "config_id": "mpi_ps-adag_w2_win1000", "communication_window": 1000}) + "\n")
    preds = CM.predict_strategies(run_dir, parse_target("2 nodes, 10gbit").cluster())[0]
    assert next(p for p in preds if p.strategy == "mpi_ps:adag").label == "mpi_ps:adag (window 2)"


def test_against_says_when_singles_own_epoch_differs_and_shows_its_row(run_dir, tmp_path_factory):
    # user test (helper-25): the emulated run's single took 2.3x as long per step, and every ratio held it unsaid
    other = tmp_path_factory.mktemp("slower")
    (other / "results.jsonl").write_text(json.dumps(rec("single", 1, 0.25, threads=2)) + "\n"
                                         + json.dumps(rec("horovod", 2, 0.2)) + "\n")
    text = CM.against_mismatch(run_dir, other, parse_target("2 nodes x 1, 1gbit, emulated").cluster())
    assert text.endswith(f"{other}'s single took 2.50x as long per epoch as in the run predicted from (0.25 s against "
                         "0.1 s): this machine ran at another speed for the two runs (its load), and every ratio "
                         "holds that")
    assert CM.against_mismatch(run_dir, other, parse_target("2 nodes x 1, 1gbit").cluster()).count("single took") == 0
    assert set(CM.measured_on(other, 2)) == {"single", "horovod"}  # single's own row, at its one worker
    # helper-26: a bigger model's single is slower for its own reason, not the machine's load
    bigger = tmp_path_factory.mktemp("bigger")
    (bigger / "results.jsonl").write_text("".join(json.dumps({**rec(n, w, e, threads=t), "workload": {
        **WORKLOAD, "num_parameters": 4000}}) + "\n" for n, w, e, t in (("single", 1, 0.25, 2), ("horovod", 2, 0.2, 1))))
    text = CM.against_mismatch(run_dir, bigger, parse_target("2 nodes x 1, 1gbit, emulated").cluster())
    assert "ran another workload" in text and "single took" not in text
    # helper-36: a run of another model is refused, not tabled
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "2 nodes x 1, 1gbit, emulated",
                                    "--against", str(bigger)])
    assert res.exit_code == 2 and (f"--against {bigger} trained another model or other data (parameters 4000 (here "
                                   in " ".join(res.output.split())), res.output
    # helper-26: single's row (1 worker) hid that the run has none at the target's count
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "3 nodes x 1, 1gbit, emulated",
                                    "--against", str(other)])
    assert f"{other} has no ok row at 3 workers of a predicted strategy (it has 1, 2)" in " ".join(res.output.split())
    assert CM.against_mismatch(run_dir, run_dir) == ""


def test_against_a_run_of_another_workload_is_said(run_dir, tmp_path_factory):
    other = tmp_path_factory.mktemp("other")
    r = rec("horovod", 2, 0.2)
    (other / "results.jsonl").write_text(json.dumps({**r, "epochs": 5, "global_batch_size": 32}) + "\n")
    assert CM.against_mismatch(run_dir, run_dir) == ""
    text = CM.against_mismatch(run_dir, other)
    assert "global batch 32 (here 64)" in text and "epochs 5 (here 3)" in text and "does not check" in text
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "2 nodes x 1, 1gbit, emulated",
                                    "--against", str(other)])
    assert res.exit_code == 0 and "warning: " in res.output and "ran another workload" in res.output
    cluster = tmp_path_factory.mktemp("cluster")
    (cluster / "results.jsonl").write_text(json.dumps({**r, "bandwidth": "1gbit", "hosts": ["a", "b"]}) + "\n")
    c10 = parse_target("2 nodes x 1, 10gbit").cluster()
    assert CM.against_mismatch(run_dir, cluster, c10).endswith(
        "its links ran at 1 Gbit/s, the target's at 10 Gbit/s")
    assert CM.against_mismatch(run_dir, cluster, parse_target("2 nodes x 1, 1gbit").cluster()) == ""
    (cluster / "results.jsonl").write_text(json.dumps({**r, "bandwidth": "1gbit", "hosts": ["a", "b"],
                                                       "details": {"cluster_id": "c1"}}) + "\n")
    assert CM.against_mismatch(run_dir, cluster, parse_target("2 nodes x 1, 1gbit").cluster()).endswith(
        "it ran on this machine's emulated cluster: add ', emulated' to the target")
    assert CM.against_mismatch(run_dir, cluster, parse_target("2 nodes x 1, 1gbit, emulated").cluster()) == ""
    # user test (helper-21): a 2-host CPU run "checked" a one-node GPU target without a word
    assert CM.against_mismatch(run_dir, cluster, parse_target("2 GPUs").cluster()).endswith(
        "it ran on several hosts, the target is one node; it ran on CPUs, the target's workers are GPUs")
    # another layout of the same worker count (helper-16: a 4 x 1 run checked a 2 x 2 target without a word)
    (cluster / "config.json").write_text(json.dumps({"cluster": {"emulate": {"hosts": 2, "slots": 1}}}))
    assert CM.against_mismatch(run_dir, cluster, parse_target("2 nodes x 1, 1gbit, emulated").cluster()) == ""
    (cluster / "config.json").write_text(json.dumps({"cluster": {"emulate": {"hosts": 4, "slots": 1}}}))
    assert CM.against_mismatch(run_dir, cluster, parse_target("2 nodes x 2, 1gbit, emulated").cluster()).endswith(
        "it ran on 4 emulated hosts x 1, the target is 2 nodes x 2")
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "4 nodes x 2, 1gbit", "--against",
                                    str(cluster)])
    assert "has no ok row at 8 workers of a predicted strategy (it has 2)" in " ".join(res.output.split())


def test_strategies_without_a_cluster_form_are_named_not_dropped(run_dir):
    # user test: mirrored and keras_jax rows vanished from predict --target without a word
    with (run_dir / "results.jsonl").open("a") as f:
        f.write(json.dumps(rec("mirrored", 2, 0.15, threads=2)) + "\n")  # one process, the machine's 2 threads
    c = parse_target("4 nodes x 2, 10gbit").cluster()
    preds, inputs = CM.predict_strategies(run_dir, c)
    assert "mirrored" not in by_name(preds) and inputs["not_predicted"] == ["mirrored"]
    assert "Not predicted (one process on one machine's devices, no form on a cluster of nodes): mirrored." in \
        CM.describe("4 nodes x 2, 10gbit", c, inputs)
    # user test (helper-27): a strategy from a plugin was "one machine's devices", on one node too
    text = CM.not_predicted_text({"not_predicted": ["mirrored", "my_plugin:foo"], "run_dir": "r"})
    assert text == ("Not predicted (one process on one machine's devices, no form on a cluster of nodes): mirrored. "
                    "Not predicted (no cost model for it: the model knows ring allreduce (multi_worker_mirrored, "
                    "horovod, horovod_mpi, keras_jax:multi_process), tf_ps and the parameter servers (spark_ps:*, "
                    "mpi_ps:*)): my_plugin:foo.")
    # user test (helper-12): on one node (a machine's devices) it is a candidate, at its measured step
    preds, inputs = CM.predict_strategies(run_dir, parse_target("2 GPUs, 10gbit").cluster())
    m = by_name(preds)["mirrored"]
    assert inputs["not_predicted"] == [] and m.epoch_s == pytest.approx(0.15) and m.terms_s["link"] == 0
    # one process with the machine's 2 threads for both replicas, as mirrored runs: its own step again
    with (run_dir / "results.jsonl").open("a") as f:
        f.write(json.dumps(rec("mirrored", 4, 0.3, threads=2)) + "\n")
    m = by_name(CM.predict_strategies(run_dir, parse_target("1 node x 4, 10gbit").cluster())[0])["mirrored"]
    assert m.epoch_s == pytest.approx(0.3) and m.terms_s["compute"] == pytest.approx(20 * 0.0016)
    # 4 GPUs do not time-slice 2 cores as 4 logical CPU devices did: the 2-replica row's framework cost (helper-17)
    m = by_name(CM.predict_strategies(run_dir, parse_target("4 GPUs, 10gbit").cluster())[0])["mirrored"]
    assert m.epoch_s == pytest.approx(20 * (0.0016 + 0.15 / 20 - 0.0025))
    assert "framework cost taken as at 2 workers (the only count measured without oversubscribing the cores)" in m.notes
    # user test (helper-15): a run on an emulated cluster lost its strategies without a word
    with (run_dir / "results.jsonl").open("a") as f:
        f.write(json.dumps({**rec("tf_ps", 3, 0.9), "bandwidth": "1gbit"}) + "\n")
    preds, inputs = CM.predict_strategies(run_dir, c)
    assert "tf_ps" not in by_name(preds) and inputs["not_predicted_links"] == ["tf_ps"]
    assert "Not predicted (measured only over the shaped links of an emulated cluster; the model calibrates from " \
           "one-host rows: predict from a one-host run of this workload): tf_ps." in CM.describe("x", c, inputs)


def test_a_diverged_run_is_said_next_to_its_time_to_target(run_dir):
    # user test (helper-15): mpi_ps:easgd crossed 0.5 once, then diverged to a loss of 5e30, and ranked second
    with (run_dir / "results.jsonl").open("a") as f:
        f.write(json.dumps({**rec("mpi_ps:easgd", 2, 0.2, accs=(0.51, 0.03, 0.37)), "final_test_loss": 5e30}) + "\n")
    p = by_name(CM.predict_strategies(run_dir, parse_target("2 nodes, 1gbit").cluster(), 0.5)[0])["mpi_ps:easgd"]
    assert p.epochs_to_target == 1 and any(n.startswith("diverged in 1 of its runs at 2 workers") for n in p.notes)
    # not reached at all: no "chance crossing" (helper-16), but the divergence is why (helper-28: read as slow)
    p = by_name(CM.predict_strategies(run_dir, parse_target("4 nodes, 1gbit").cluster(), 0.99)[0])["mpi_ps:easgd"]
    assert p.epochs_to_target is None and not any("chance crossing" in n for n in p.notes)
    assert "diverged in 1 of its runs at 2 workers (final test loss not finite or over 1e+06; advise and the report leave it out): not reached for that " \
        "reason, not for its speed" in p.notes and "its curve at 2 workers is the nearest measured (the target is " \
        "at 4)" in p.notes
    assert not any("diverged" in n for n in by_name(CM.predict_strategies(
        run_dir, parse_target("2 nodes, 1gbit").cluster(), 0.5)[0])["horovod"].notes)
    with (run_dir / "results.jsonl").open("a") as f:  # helper-23: a NaN loss is stored as null, and was not said
        f.write(json.dumps({**rec("tf_ps", 2, 0.2, accs=(0.51, 0.03, 0.1)), "final_test_loss": None}) + "\n")
    p = by_name(CM.predict_strategies(run_dir, parse_target("2 nodes, 1gbit").cluster(), 0.5)[0])["tf_ps"]
    assert any(n.startswith("diverged in 1 of its runs at 2 workers") for n in p.notes)


def test_one_parameter_server_bounds_the_epoch_of_many_workers(run_dir):
    # user test (helper-23): mpi_ps:adag at 120 workers predicted as fast as at 2; the server serves one exchange
    # at a time: N x ceil(steps / window) exchanges per epoch, each its measured CPU seconds
    r = rec("mpi_ps:adag", 2, 0.3, window=2, repeat=1)
    r["details"].update(server_busy_s=0.2, per_worker_exchanges=[10, 10])  # 10 ms per exchange
    with (run_dir / "results.jsonl").open("a") as f:
        f.write(json.dumps(r) + "\n")
    rows = CM.measured_rows(CM.read_records(run_dir), 20)
    assert rows[("mpi_ps:adag", 2, 2)].server_s == pytest.approx(0.01)  # the one repeat that recorded it
    few = by_name(CM.predict_strategies(run_dir, parse_target("2 nodes, 10gbit").cluster())[0])["mpi_ps:adag"]
    many = by_name(CM.predict_strategies(run_dir, parse_target("32 nodes, 10gbit").cluster())[0])["mpi_ps:adag"]
    assert not any(n.startswith("bounded by its server") for n in few.notes)  # 2 x 10 x 10 ms: below its 0.3 s epoch
    assert many.epoch_s == pytest.approx(32 * 10 * 0.01) and many.epoch_s > 3 * few.epoch_s
    assert "bounded by its server: 32 workers x 10 exchanges per epoch at 10 ms of its CPU each (measured at 2 " \
           "workers)" in many.notes
    assert sum(many.terms_s.values()) == pytest.approx(many.epoch_s)
    spark = by_name(CM.predict_strategies(run_dir, parse_target("32 nodes, 10gbit").cluster())[0])["spark_ps:adag"]
    assert not any(n.startswith("bounded by its server") for n in spark.notes)  # not recorded: no bound, said
    assert any(n.startswith("not bounded by its server's time per exchange, which this run did not record")
               for n in spark.notes)


def test_single_on_a_target_is_its_own_measured_step(run_dir):
    # user test (helper-15): single took the calibration's compute (higher than its measured step) and ignored
    # --node-step, though the Assumed line quotes the measured step as the figure --node-step replaces
    c = parse_target("2 nodes, 1gbit").cluster()
    slow = {**CAL, "points": [{**p, "step_s": 2 * p["step_s"]} for p in CAL["points"]]}
    (run_dir / K.CALIBRATION_FILE).write_text(json.dumps(slow))
    single = by_name(CM.predict_strategies(run_dir, c)[0])["single"]
    assert single.epoch_s == pytest.approx(0.1) and single.terms_s["framework"] == 0
    single = by_name(CM.predict_strategies(run_dir, parse_target("2 nodes, 1gbit").cluster(0.001))[0])["single"]
    assert single.epoch_s == pytest.approx(20 * 0.001)


def test_gpus_on_a_node_share_neither_compute_nor_cores(run_dir):
    # user test (helper-15/16): "1 node x 8 GPUs" computed each GPU's share 4x slower (8 processes
    # time-slicing 2 cores), so 8 GPUs computed slower than single on one
    fw2, speed = 0.01 - 0.004, 0.002 / 0.005  # horovod's framework cost at 2 workers; the node step over single's
    gpus, cpus = (by_name(CM.predict_strategies(run_dir, parse_target(t).cluster(0.002))[0])["horovod"]
                  for t in ("1 node x 8 GPUs, 1gbit", "1 node x 8, 1gbit"))
    assert gpus.terms_s["compute"] == pytest.approx(20 * 0.0016 * speed)  # batch 8 with single's 2 threads, alone
    assert gpus.terms_s["framework"] == pytest.approx(20 * fw2)  # a core or more per GPU; unscaled (helper-17)
    assert cpus.terms_s["compute"] == pytest.approx(20 * 0.0026 * 4 * speed)  # 1 thread each, 8 on 2 cores
    assert cpus.terms_s["framework"] == pytest.approx(20 * fw2 * 4 * speed)
    _, inputs = CM.predict_strategies(run_dir, parse_target("1 node x 8 GPUs, 1gbit").cluster())
    assert any("each GPU computes its share of the batch like single here" in a and "a node has a CPU core or more "
               "per GPU" in a for a in inputs["assumed"])
    # an emulated target's hosts are this machine whatever the text calls its workers
    em = by_name(CM.predict_strategies(run_dir, parse_target("2 nodes x 1 GPU, 1gbit, emulated").cluster())[0])
    assert em["horovod"].epoch_s == pytest.approx(by_name(CM.predict_strategies(
        run_dir, parse_target("2 nodes x 1, 1gbit, emulated").cluster())[0])["horovod"].epoch_s)


def test_keras_jax_over_processes_is_a_ring_and_its_one_process_forms_are_named(run_dir):
    # issue 34: the multi-process form is predicted as a synchronous all-reduce; the one-process forms cannot leave
    with (run_dir / "results.jsonl").open("a") as f:
        for name in ("keras_jax:multi_process", "keras_jax:data_parallel"):
            f.write(json.dumps(rec(name, 2, 0.3)) + "\n")
    c = parse_target("4 nodes x 1, 1gbit").cluster()
    preds, inputs = CM.predict_strategies(run_dir, c)
    kj = by_name(preds)["keras_jax:multi_process"]
    hv = by_name(preds)["horovod"]
    assert kj.epoch_s is not None and kj.terms_s["link"] > 0
    assert kj.terms_s["link"] == pytest.approx(hv.terms_s["link"] / CM.wire_factor("horovod", 1e9), rel=0.35)
    assert "its transport's link factor is not measured: bytes / rate assumed" in kj.notes
    assert inputs["not_predicted"] == ["keras_jax:data_parallel"]


def test_fit_finds_the_link_factor_at_which_the_prediction_meets_the_measured_epoch(tmp_path, monkeypatch):
    # benchmarks/predict_validation.py --fit: the figures of WIRE_FACTOR come from it
    import importlib
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    pv = importlib.import_module("predict_validation")
    big = {"num_parameters": 1_000_000, "sizes": {"train": 1280}}  # 4 MB: beyond the 100 Mbit/s bucket
    monkeypatch.setitem(WORKLOAD, "num_parameters", big["num_parameters"])
    one, cell = tmp_path / "large-onehost", tmp_path / "large-2x100mbit"
    for d, recs in ((one, [rec("single", 1, 0.1, threads=2), rec("horovod", 2, 0.2)]), (cell, [rec("horovod", 2, 9.0)])):
        d.mkdir()
        (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (one / K.CALIBRATION_FILE).write_text(json.dumps(CAL))
    before = CM.wire_factor
    f = pv.fit_wire_factors(tmp_path)["horovod"]["2x100mbit"]
    assert 1.0 < f < 8.0 and CM.wire_factor is before  # the module's function is put back
    monkeypatch.setitem(CM.WIRE_FACTOR, "horovod", ((1e8, f), (1e9, f)))
    got = by_name(CM.predict_strategies(one, parse_target(pv.target_text("2x100mbit")).cluster())[0])["horovod"]
    assert got.epoch_s == pytest.approx(9.0, rel=0.01)


def test_results_predict_is_a_dataframe_that_keeps_the_inputs_and_the_error_band(run_dir):
    from distbench.api import Results

    df = Results(run_dir).predict("4 nodes x 1, 1gbit, emulated")
    assert set(df.strategy) == {"single", "horovod", "mpi_ps:adag", "spark_ps:adag"}
    h = df[df.strategy == "horovod"].iloc[0]
    assert h.epoch_s == pytest.approx(20 * 0.03, rel=1e-3) and h.workers == 4
    assert h.warmup_s == pytest.approx(0.5) and h.epochs_to_target == 2  # user test (helper-20): shown
    inputs = df.attrs["inputs"]
    assert inputs["model_bytes"] == 4000 and inputs["validated"].startswith("against emulated clusters")
    assert inputs["assumed"] and inputs["measured"]
    assert df.attrs["target"] == {"text": "4 nodes x 1, 1gbit, emulated", "nodes": 4, "per_node": 1, "workers": 4,
                                  "bandwidth_Bps": 1.25e8, "latency_s": 0.0, "emulated": True, "gpus": False}
    # user test (helper-13): a negative node_step gave negative times, ranked first; errors name the keywords
    for kwargs, needle in [({"node_step": -1}, "node_step=-1: expected seconds > 0"),
                           ({"node_step": float("nan")}, "node_step=nan"), ({"node_step": "fast"}, "node_step='fast'"),
                           ({"target_accuracy": 2}, "target_accuracy=2: expected a test accuracy")]:
        with pytest.raises(ConfigError, match=needle):
            Results(run_dir).predict("4 nodes x 1, 1gbit", **kwargs)
    # user test (helper-18): "5" was refused as "expected seconds > 0"; it is seconds, as the CLI's --node-step 5
    assert Results(run_dir).predict("4 nodes x 1, 1gbit", node_step="0.001").equals(
        Results(run_dir).predict("4 nodes x 1, 1gbit", node_step=0.001))
    with pytest.raises(ConfigError, match="^target='4 nodes': no bandwidth"):
        Results(run_dir).predict("4 nodes")
    with pytest.raises(ConfigError, match="target_accuracy=0: expected"):
        Results(run_dir).advise(target_accuracy=0)
    assert Results(run_dir).predict("4 nodes x 1, 1gbit", target_accuracy=0.95).attrs["inputs"]["target_accuracy"] \
        == 0.95
    # user test (helper-15): node_step=100 passed without a word (the CLI warns); advise takes it as predict does
    with pytest.warns(UserWarning, match="node_step=100 is 100 seconds per step: did you mean milliseconds"):
        Results(run_dir).predict("4 nodes x 1, 1gbit", node_step=100)
    adv = Results(run_dir).advise("4 nodes x 1, 1gbit", node_step=0.001)
    single = next(p for p in adv.target_predictions["strategies"] if p["strategy"] == "single")
    assert single["epoch_s"] == pytest.approx(20 * 0.001)
    with pytest.raises(ConfigError, match="node_step= needs target="):
        Results(run_dir).advise(node_step=0.001)
    res = CliRunner().invoke(main, ["advise", str(run_dir), "--target", "4 nodes, 1gbit", "--node-step", "1ms",
                                    "--json"])
    assert res.exit_code == 0, res.output
    single = next(p for p in json.loads(res.stdout)["target_predictions"]["strategies"] if p["strategy"] == "single")
    assert single["epoch_s"] == pytest.approx(20 * 0.001)
    assert json.loads(res.stdout)["target_warnings"] == []
    # helper-28: a bare --node-step 250 was warned about on stderr only, not in --json's target_warnings
    res = CliRunner().invoke(main, ["advise", str(run_dir), "--target", "4 nodes, 1gbit", "--node-step", "250",
                                    "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["target_warnings"] == [
        "--node-step 250: a bare number is seconds, so this is 250 seconds; did you mean a unit (e.g. 4ms or 0.004)?"]
    res = CliRunner().invoke(main, ["advise", str(run_dir), "--node-step", "1ms"])
    assert res.exit_code == 2 and "advise: --node-step needs --target" in res.output
    # user test (helper-16): a node step on an emulated target (this machine's nodes) changed every number silently
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "2 nodes x 1, 1gbit, emulated", "--node-step",
                                    "1ms"])
    assert res.exit_code == 2 and "--node-step does not apply to an emulated target" in res.output
    res = CliRunner().invoke(main, ["advise", str(run_dir), "--target", "2 nodes x 1, 1gbit, emulated", "--node-step",
                                    "1ms"])
    assert res.exit_code == 2 and "advise: --node-step does not apply to an emulated target" in res.output
    with pytest.raises(ConfigError, match="node_step= does not apply to an emulated target"):
        Results(run_dir).predict("2 nodes x 1, 1gbit, emulated", node_step=0.001)
    # a unit is not a bare number: no warning (helper-16: "--node-step 20s" was told it was bare); Python takes units
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "2 nodes, 1gbit", "--node-step", "20s"])
    assert res.exit_code == 0 and "bare number" not in res.stderr
    assert Results(run_dir).predict("4 nodes x 1, 1gbit", node_step="1ms").equals(
        Results(run_dir).predict("4 nodes x 1, 1gbit", node_step=0.001))


def test_validation_tables_advise_on_both_sides_per_cell(tmp_path, monkeypatch):
    # benchmarks/predict_validation.py: advise --target from the one-host run against advise on the measured cell
    import importlib
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    pv = importlib.import_module("predict_validation")

    def ranked(*names):
        return {"target_recommended": names[0],
                "target_predictions": {"strategies": [{"strategy": n, "rank": i} for i, n in enumerate(names, 1)]}}

    def compared(verdict, *names):
        return {"verdict": verdict, "headline": "h", "compared": [{"strategy": n, "workers": 2} for n in names]}

    answers = {"a": (ranked("single", "horovod"), compared("single", "single", "horovod")),
               "b": (ranked("horovod", "tf_ps"), compared("overlap", "tf_ps", "horovod")),
               "c": (ranked("tf_ps"), compared("clear", "horovod")),
               "d": (ranked("tf_ps"), compared("too_few", "horovod"))}
    # the one-host answer is the one for the cell asked about: the --target text is the cell's name here
    monkeypatch.setattr(pv, "target_text", lambda cell: cell)
    monkeypatch.setattr(pv, "_advise_json", lambda args, log: answers[args[2]][0] if "--target" in args
                        else answers[Path(args[0]).name][1])
    monkeypatch.setattr(pv, "measured", lambda run: {} if run.name == "n" else {"single": {}})
    dirs = {"m": {"onehost": tmp_path / "x", **{c: tmp_path / c for c in "abcdn"}}}
    text = "\n".join(pv.advise_agreement(tmp_path, dirs))
    assert "| m | a | single (then horovod) | recommends single (runner-up horovod) | yes |" in text
    assert "| m | b | horovod (then tf_ps) | no clear winner: tf_ps and horovod within noise | within noise |" in text
    assert "| m | c | tf_ps | recommends horovod (runner-up -) | no |" in text
    assert "| m | d | tf_ps | too_few: h | not counted |" in text and "| m | n |" not in text
    assert "Same recommended strategy: 2 of 3 cells (1 with a clear measured winner, 1 where" in text
    assert "the same where advise named one: 1 of 1 cells" in text
    assert pv.advise_agreement(tmp_path, {"m": {"onehost": tmp_path / "x", "n": tmp_path / "n"}}) == []


def test_advise_target_run_next_says_what_the_emulation_leaves_out(run_dir, monkeypatch):
    # user test (helper-15): Run next measured on an emulated cluster without saying it drops the latency given
    from distbench.cluster import netns

    monkeypatch.setattr(netns, "available", lambda: (True, ""))
    records = [{**json.loads(ln), "repeat": i} for ln in (run_dir / "results.jsonl").read_text().splitlines()
               for i in range(3)]  # enough repeats for a verdict, so that Run next is the target's
    adv = advise(records, str(run_dir), parse_target("2 nodes, 1gbit, 200 us latency"))
    sudo = "sudo " if os.geteuid() != 0 else ""  # not as root (helper-17: no sudo installed there)
    assert adv.next_command.startswith(f"{sudo}distbench run") and "--emulate 2x1@1gbit" in adv.next_command
    (line,) = [t for t in adv.target if t.startswith("Run next measures these")]
    assert "shape the rate only (not the 200 us of latency)" in line
    assert line.endswith(f"--target '2 nodes x 1, 1 Gbit/s, emulated' --against {run_dir}-emulated-2x1-1gbit.")
    adv = advise(records, str(run_dir), parse_target("2 nodes, 1gbit, emulated"))
    assert not any(t.startswith("Run next measures these on an emulated cluster of this machine") for t in adv.target)
    # no caveat (the target is the emulated cluster), but the compare command (helper-33: none was named)
    assert (f"Run next measures these on the emulated cluster the target names; distbench predict {run_dir} --target "
            f"'2 nodes, 1gbit, emulated' --against {run_dir}-emulated-2x1-1gbit compares it with this prediction."
            ) in adv.target
    adv = advise(records, str(run_dir), parse_target("2 nodes, 25gbit"))  # user test (helper-18): unreachable here
    assert "the unshaped emulated bridge carried one TCP stream at about 16 Gbit/s where it was measured " \
           "(docs/cluster.md), below the target's 25 Gbit/s" in " ".join(adv.target)
    assert "so it checks the framework costs at the target's size, not its link rate or compute;" in " ".join(
        adv.target)  # helper-23: it said it checked the link rate too


def test_advise_target_says_why_there_is_no_run_next_and_how_long_one_takes(run_dir, monkeypatch):
    # user test (helper-21): Run next vanished without a word, and one at 2 Mbit/s would have run into its timeout
    from distbench.cluster import netns

    monkeypatch.setattr(netns, "available", lambda: (True, ""))
    records = [{**json.loads(ln), "repeat": i} for ln in (run_dir / "results.jsonl").read_text().splitlines()
               for i in range(3)]

    def target_of(text):
        adv = advise(records, str(run_dir), parse_target(text))
        return adv.next_command, " ".join(adv.target)

    cmd, text = target_of("16 nodes, 1gbit")
    assert cmd is None and "No Run next on this machine: it emulates 8 workers at most" in text
    cmd, text = target_of("1 node x 16")  # helper-24: one node is not emulated
    assert cmd is None and "No Run next on this machine: it runs 8 workers at most" in text
    cmd, text = target_of("9 nodes, 1gbit")  # helper-24: a batch 9 do not split gets its one-host run at any size
    assert cmd.startswith(f"distbench run {run_dir}/config.json --batch-size 72 --out ")
    cmd, text = target_of("3 nodes, 1gbit")  # 64 samples over 3 workers; helper-22: the command in Run next too
    # helper-23: 66 split over 3 but not over the run's 4 workers, which distbench run refuses: 72 does both
    assert cmd == (f"distbench run {run_dir}/config.json --batch-size 72 --out {run_dir}-batch-72 && distbench "
                   f"calibrate {run_dir}-batch-72")
    assert "Run next is a one-host run at a global batch of 72, which the target's 3 workers and the run's worker " \
        "counts (2, 4) split (this run's 64 does not split over 3), and its calibration; then distbench advise " \
        f"{run_dir}-batch-72 --target '3 nodes, 1gbit' predicts from it." in text
    assert "Run next measures these on an emulated cluster" not in text  # helper-23: it said both
    # user test (helper-28): once that run exists, distbench run refuses its --out: advise from it instead
    done = run_dir.parent / f"{run_dir.name}-batch-72"
    (done / "workload").mkdir(parents=True)  # what distbench run checks (helper-29: results.jsonl was)
    cmd, text = target_of("3 nodes, 1gbit")
    assert cmd is None and (f"No Run next: {done} already holds its run (distbench run refuses a directory that holds "
                            f"one): distbench advise {done} --target '3 nodes, 1gbit' predicts from it.") in text
    monkeypatch.setattr(netns, "available", lambda: (False, "not root"))
    cmd, text = target_of("2 nodes, 1gbit")
    assert cmd is None and "an emulated cluster needs root, ip and tc (not root)" in text
    monkeypatch.setattr(netns, "available", lambda: (True, ""))
    cmd, text = target_of("2 nodes, 3 bit/s")  # user test (helper-22): "@3e-06mbit", which run --emulate refuses
    assert cmd is None and "it emulates links of 1 kbit/s to 1 Tbit/s, not 3 bit/s" in text
    assert "--emulate 2x1@500kbit" in target_of("2 nodes, 500kbit")[0]
    monkeypatch.chdir(run_dir)  # helper-22: "." made --out .-emulated-..., inside the run
    cmd = advise(records, ".", parse_target("2 nodes, 1gbit")).next_command
    assert f"--out {run_dir}-emulated-2x1-1gbit" in cmd
    # helper-32: once followed, its compare command lost ', emulated' (predict then warned) and --target-accuracy
    (run_dir.parent / f"{run_dir.name}-emulated-2x1-1gbit" / "workload").mkdir(parents=True)
    adv = keep_accuracy(advise(records, str(run_dir), parse_target("2 nodes, 1gbit")), str(run_dir), 0.8)
    assert (f"distbench predict {run_dir} --target '2 nodes x 1, 1 Gbit/s, emulated' --against {run_dir}-emulated-2x1-"
            "1gbit --target-accuracy 0.8 compares it with this prediction.") in " ".join(adv.target), adv.target
    assert f"distbench advise {run_dir}-emulated-2x1-1gbit --target-accuracy 0.8 advises from it" in " ".join(
        adv.target)
    (run_dir / "config.json").write_text(json.dumps({"run": {"timeout_s": 1.0}}))
    cmd, text = target_of("4 nodes, 2 Mbit/s")  # 3 epochs of 0.6 s and more: past a 1 s limit
    assert " --timeout 60 --out " in cmd
    assert "Run next is predicted to train for about" in text and "the run's limit of 1 s per configuration is " \
        "raised with --timeout 60" in text
    (run_dir / "config.json").write_text(json.dumps({"run": {"timeout_s": 1800.0}}))
    cmd, text = target_of("4 nodes, 2 Mbit/s")  # seconds: nothing to say
    assert "--timeout" not in cmd and "Run next is predicted" not in text
    adv = advise(records, str(run_dir), parse_target("4 nodes, 2 Mbit/s"))
    assert adv.to_dict()["target_predictions"]["run_next"] == {"command": cmd, "predicted_train_s": None, "why": None}


def test_a_run_next_of_days_gets_one_repeat_and_the_epochs_to_target(run_dir, monkeypatch):
    # user test (helper-22): a Run next of 72 h was offered with --repeats 3, its duration in prose only
    from distbench.cluster import netns
    from distbench.results import advice as A

    monkeypatch.setattr(netns, "available", lambda: (True, ""))
    records = [{**json.loads(ln), "repeat": i} for ln in (run_dir / "results.jsonl").read_text().splitlines()
               for i in range(3)]
    adv = advise(records, str(run_dir), parse_target("4 nodes, 2 kbit/s"))
    run_next = adv.to_dict()["target_predictions"]["run_next"]
    assert run_next["command"] == adv.next_command and " --repeats 1 " in adv.next_command
    assert run_next["predicted_train_s"] > A.RUN_NEXT_LONG_S and run_next["why"] in adv.target
    assert "configurations x 1 repeat(s)" in run_next["why"] and "; it has 1 repeat, where 3 repeats of 3 epochs " \
        "would take " in run_next["why"]
    assert " --epochs " not in adv.next_command  # its 3 epochs: a curve needs them all to reach the target
    epochs = {p["strategy"]: p["epochs_to_target"] for p in adv.target_predictions["strategies"]}
    leaders = adv.next_command.split("--strategies ")[1].split()[0].split(",")
    cut = math.ceil(max(epochs[n] for n in leaders)) + 1
    adv = advise([{**r, "epochs": 30} for r in records], str(run_dir), parse_target("4 nodes, 2 kbit/s"))
    assert f" --epochs {cut} --repeats 1 " in adv.next_command  # 30 epochs: days, and the target reached by 3
    assert f"each strategy reached the target by epoch {cut - 1} in the one-host run" in " ".join(adv.target)
    adv = advise(records, str(run_dir), parse_target("3 nodes, 1gbit"))
    assert adv.to_dict()["target_predictions"]["run_next"]["why"].startswith("Run next is a one-host run at a global")
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))  # 3 repeats each
    monkeypatch.setattr(A, "RUN_NEXT_MAX_S", 3600.0)  # helper-23: a Run next of 100 days was offered
    adv = advise(records, str(run_dir), parse_target("4 nodes, 2 kbit/s"))
    run_next = adv.to_dict()["target_predictions"]["run_next"]
    assert adv.next_command is None and run_next["command"] is None and run_next["predicted_train_s"] > 3600
    assert run_next["why"].startswith("No Run next on this machine: measuring the leaders at the target's size would "
                                      "train for about 1.") and run_next["why"] in adv.target
    assert "Run next measures these" not in " ".join(adv.target)
    monkeypatch.undo()
    monkeypatch.setattr(netns, "available", lambda: (True, ""))
    adv = advise([{**r, "target_accuracy": 0.999} for r in records], str(run_dir), parse_target("4 nodes, 1gbit"))
    assert adv.to_dict()["target_predictions"]["run_next"] == {  # helper-23: the key was absent, a KeyError
        "command": None, "predicted_train_s": None, "why": "no strategy is predicted to reach 0.999 there"}
    res = CliRunner().invoke(main, ["advise", str(run_dir), "--target", "4 nodes, 2 kbit/s", "--target-accuracy",
                                    "0.5", "--json"])
    doc = json.loads(res.stdout)  # --target-accuracy changes the command: --json's run_next says the same
    assert doc["target_predictions"]["run_next"]["command"] == doc["next_command"]
    assert "--target-accuracy 0.5" in doc["next_command"]
    from distbench.api import Results  # helper-24: the API's Run next lacked the accuracy the CLI's has

    adv = Results(run_dir).advise(target="4 nodes, 2 kbit/s", target_accuracy=0.5)
    assert adv.next_command == doc["next_command"] and adv.target_predictions["run_next"]["command"] == adv.next_command


def test_warm_up_of_a_shared_engine_row_is_from_its_fresh_processes():
    # a sweep's shared MPI/Spark engine keeps its processes between configurations: repeats after the first
    # ran with warm kernels (first epoch 40-120 ms shorter on 2 cores), which no cluster run has
    def shared(repeat, warm, engine_start_s):
        r = rec("mpi_ps:adag", 2, 0.3, warm=warm, window=2, repeat=repeat)
        r["details"]["mpi_engine"] = "shared"
        r["timings"]["phases"] = {"engine_start_s": engine_start_s}
        return r

    rows = CM.measured_rows([shared(0, 0.5, 7.0), shared(1, 0.1, 0.1), shared(2, 0.1, 0.2)], 20)
    assert rows[("mpi_ps:adag", 2, 2)].warmup_s == pytest.approx(0.5)
    rows = CM.measured_rows([shared(1, 0.1, 0.1), shared(0, 0.5, 7.0), shared(2, 0.3, 6.5)], 20)  # a new engine
    assert rows[("mpi_ps:adag", 2, 2)].warmup_s == pytest.approx(0.4)
    plain = [rec("horovod", 2, 0.2, warm=w, repeat=i) for i, w in enumerate((0.5, 0.1, 0.2))]  # own processes
    assert CM.measured_rows(plain, 20)[("horovod", 2, None)].warmup_s == pytest.approx(0.2)


def test_a_row_that_reached_the_target_in_some_runs_says_so(run_dir):
    # user test (helper-17): 2 of 3 runs counted as reached without a word
    recs = [rec("tf_ps", 2, 0.3, repeat=i, accs=a) for i, a in
            enumerate([(0.5, 0.92, 0.95), (0.5, 0.8, 0.85), (0.5, 0.6, 0.93)])]
    with (run_dir / "results.jsonl").open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in recs)
    t = by_name(CM.predict_strategies(run_dir, parse_target("2 nodes, 1gbit").cluster())[0])["tf_ps"]
    assert t.epochs_to_target == 2.5 and "reached the target in 2 of 3 runs at 2 workers: its epochs to target " \
        "are theirs" in t.notes
    t = by_name(CM.predict_strategies(run_dir, parse_target("2 nodes, 1gbit").cluster(), 0.94)[0])["tf_ps"]
    assert t.time_to_target_s is None and "reached the target in 1 of 3 runs at 2 workers: counted as not " \
        "reached (half or fewer)" in t.notes


def test_advise_target_needs_a_distributed_strategy_and_a_batch_the_target_splits(run_dir, monkeypatch):
    from distbench.cluster import netns

    monkeypatch.setattr(netns, "available", lambda: (True, ""))
    recs = [{**json.loads(ln), "repeat": i} for ln in (run_dir / "results.jsonl").read_text().splitlines()
            for i in range(3)]
    # user test (helper-17): on a cluster run every distributed row is uncalibrated: "fastest: single", alone
    shaped = [r if r["strategy"] == "single" else {**r, "bandwidth": "1gbit"} for r in recs]
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in shaped))
    adv = advise(shaped, str(run_dir), parse_target("4 nodes x 2, 10gbit"))
    assert adv.target_recommended is None and not (adv.next_command or "").count("--emulate")
    assert any(t.startswith(f"No prediction: {run_dir} was made on a cluster: the model calibrates each strategy "
                            "from one-host rows, and it has none") for t in adv.target)
    assert adv.target_refused.startswith(f"{run_dir} was made on a cluster")
    assert adv.to_dict()["target_refused"] == adv.target_refused and adv.to_dict()["target_predictions"] is None
    # user test (helper-26): advise --target exited 0 with the prediction refused (predict exits 2)
    res = CliRunner().invoke(main, ["advise", str(run_dir), "--target", "4 nodes x 2, 10gbit"])
    assert res.exit_code == 2 and "distbench: advise: no prediction for --target:" in res.output
    assert res.output.startswith(adv.headline[:40])  # the advice itself is printed first
    # one-host rows of strategies with no cluster form only (mirrored): nothing distributed to rank either
    mirrored = [r for r in recs if r["strategy"] == "single"] + [{**rec("mirrored", 2, 0.15, threads=2), "repeat": i}
                                                                 for i in range(3)]
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in mirrored))
    adv = advise(mirrored, str(run_dir), parse_target("4 nodes x 2, 10gbit"))
    assert adv.target_recommended is None and any(t.startswith(
        f"No distributed strategy can be predicted from {run_dir}, so nothing to rank against single. Not predicted "
        "(one process on one machine's devices") for t in adv.target)
    # user test (helper-27): it named no command
    assert f"distbench run --resume --out {run_dir} --strategies horovod,multi_worker_mirrored,mpi_ps:adag measures " \
        "strategies the model predicts on a cluster" in adv.target_refused
    assert adv.target_refused.startswith("No distributed strategy can be predicted")
    assert "distbench advise ONE_HOST_RUN --target" in " ".join(advise(shaped, str(run_dir)).reasons)
    # user test (helper-17): 64 samples over 3 workers was predicted silently, and Run next measured it (refused)
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    adv = advise(recs, str(run_dir), parse_target("3 nodes, 1gbit"))
    assert "the run's global batch of 64 split over 3 workers (21.3 samples each), which a run cannot do: " \
           "a run on the target itself needs a global batch its 3 workers split (66); a one-host run to predict " \
           "from at a global batch of 72, which the target's 3 and the run's 2, 4 workers split: " \
           f"distbench run {run_dir}/config.json --batch-size 72 --out NEW_RUN_DIR" in " ".join(
               adv.target)  # helper-24: read as the one-host run's batch, which its 4 workers could not split
    assert "--emulate" not in (adv.next_command or "")


def test_a_one_node_target_needs_no_link(run_dir, monkeypatch):
    # user test (helper-17): "8 GPUs" was refused for want of a bandwidth, then advised about a 10gbit link
    # and an emulated 1x8 cluster
    from distbench.cluster import netns

    monkeypatch.setattr(netns, "available", lambda: (True, ""))
    t = parse_target("4 GPUs")
    assert t.data()["bandwidth_Bps"] is None and json.loads(json.dumps(t.data()))["workers"] == 4
    preds, inputs = CM.predict_strategies(run_dir, t.cluster())
    assert all(p.terms_s["link"] == 0 for p in preds if p.epoch_s is not None)
    assert inputs["assumed"][0].startswith("one node: its workers exchange over no network link")
    # user test (helper-18): mirrored, not in the run, was absent from a one-node ranking without a word
    assert inputs["not_measured"] == ["mirrored"] and CM.not_predicted_text(inputs).startswith(
        f"Not measured in this run: mirrored, tf.distribute's strategy for one machine's devices; distbench run "
        f"{run_dir}/config.json --out {run_dir} --resume --strategies mirrored measures it.")
    assert CM.predict_strategies(run_dir, parse_target("2 nodes, 1gbit").cluster())[1]["not_measured"] == []
    assert CM.describe(t.text, t.cluster(), inputs).startswith("4 GPUs: 1 node(s) x 4 = 4 workers, one node: no "
                                                               "network link;")
    recs = [{**json.loads(ln), "repeat": i} for ln in (run_dir / "results.jsonl").read_text().splitlines()
            for i in range(3)]
    adv = advise(recs, str(run_dir), parse_target("1 node x 4, 10gbit"))
    assert adv.next_command.startswith("distbench run") and "--emulate" not in adv.next_command
    monkeypatch.setattr(netns, "available", lambda: (False, "not root"))  # one node needs no emulated cluster
    assert advise(recs, str(run_dir), parse_target("1 node x 4")).next_command.startswith("distbench run")
    monkeypatch.setattr(netns, "available", lambda: (True, ""))
    adv = advise(recs, str(run_dir), t)  # 4 GPUs: 4 CPU processes here would measure oversubscription (helper-19)
    assert "--workers 4" not in (adv.next_command or "")
    assert any(x.startswith("No Run next on this machine: it has no GPUs") for x in adv.target)  # said (helper-20)
    adv = advise(recs, str(run_dir), parse_target("4 TPUs"))  # helper-22: the reason said GPUs
    assert any(x.startswith("No Run next on this machine: it has no TPUs, and 4 CPU processes") and x.endswith(
        "not 4 TPUs.") for x in adv.target)
    assert not any("Communication is" in x or "Run next measures" in x for x in adv.target)
    gpus, rate = parse_target("4 GPUs, 10gbit, emulated").warnings()
    assert gpus == "an emulated cluster's hosts are this machine's CPUs: the GPUs named are not emulated"
    assert "the 10 Gbit/s given is unused" in rate
    # user test (helper-20): a run that has the leaders at that count was told to measure them again
    only = [r for r in recs if r["strategy"] in ("single", "horovod")]
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in only))
    adv = advise(only, str(run_dir), parse_target("1 node x 4"))
    assert adv.next_command is None and ("No Run next: this run already measured horovod at 4 workers on this "
                                         "machine, and one node like this machine is predicted from those rows (their "
                                         "median epoch and epochs to target; distbench advise ranks their measured "
                                         "times to target, MLPerf's score).") in adv.target
    # helper-30: it offered predict --against the run itself, which compares the rows with themselves; with a node
    # step (another machine's node) the prediction differs from the rows, and the check means something
    stepped = dataclasses.replace(parse_target("1 node x 4"), node_step_s=0.002)
    assert (f"This run already measured horovod at 4 workers on this machine: distbench predict {run_dir} --target "
            f"'1 node x 4' --against {run_dir} compares them with the prediction.") in advise(
        only, str(run_dir), stepped).target


def test_a_calibration_slower_than_single_is_scaled_to_its_step(run_dir):
    # user test (helper-17): the table's 8.75 ms at the run's batch exceeded single's whole 7.49 ms step
    slow = {**CAL, "points": [{**p, "step_s": 2 * p["step_s"]} for p in CAL["points"]]}  # 8 ms at batch 64
    (run_dir / K.CALIBRATION_FILE).write_text(json.dumps(slow))
    preds, inputs = CM.predict_strategies(run_dir, parse_target("8 nodes x 1, 1 Gbit/s").cluster())
    assert by_name(preds)["horovod"].terms_s["compute"] == pytest.approx(20 * 2 * 0.0016 * 0.005 / 0.008)
    assert "scaled by 0.63 to single's own step at batch 64, which its compute there exceeded" in inputs["measured"][1]
    (run_dir / K.CALIBRATION_FILE).write_text(json.dumps(CAL))  # 4 ms under single's 5 ms: as measured
    assert "scaled" not in CM.predict_strategies(run_dir, parse_target("8 nodes, 1gbit").cluster())[1]["measured"][1]


def test_dedicated_nodes_take_the_warm_up_of_a_row_that_did_not_oversubscribe(tmp_path):
    # user test (helper-17): 8 dedicated workers took the 4-worker warm-up, 4 processes on 2 cores
    recs = [rec("single", 1, 0.1, threads=2), rec("horovod", 2, 0.2, warm=0.1), rec("horovod", 4, 0.6, warm=0.9)]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (tmp_path / K.CALIBRATION_FILE).write_text(json.dumps(CAL))
    h = by_name(CM.predict_strategies(tmp_path, parse_target("8 nodes, 1gbit").cluster())[0])["horovod"]
    assert h.time_to_target_s == pytest.approx(0.1 + 2 * h.epoch_s) and h.warmup_s == pytest.approx(0.1)
    assert "warm-up as at 2 workers (without oversubscribing the cores)" in h.notes
    em = by_name(CM.predict_strategies(tmp_path, parse_target("4 nodes, 1gbit, emulated").cluster())[0])["horovod"]
    assert em.time_to_target_s == pytest.approx(0.9 + 2 * em.epoch_s)  # this machine's hosts: as the run shared them


def test_results_predict_against_a_cluster_run(run_dir, tmp_path_factory):
    # user test (helper-17): predict --against had no Python form
    from distbench.api import Results

    with pytest.warns(UserWarning, match="against=.*it ran on one host, not on a cluster"):  # helper-20: silent
        df = Results(run_dir).predict("2 nodes x 1, 1gbit, emulated", against=Results(run_dir))
    hv = df[df.strategy == "horovod"].iloc[0]
    assert hv.measured_epoch_s == pytest.approx(0.2) and hv.epoch_ratio == pytest.approx(hv.epoch_s / 0.2)
    assert df.attrs["against_warning"].endswith("it ran on one host, not on a cluster")
    with pytest.raises(ConfigError, match="against='.*': expected a run directory holding results.jsonl"):
        Results(run_dir).predict("2 nodes, 1gbit", against=tmp_path_factory.mktemp("empty"))


def test_advise_target_calls_two_leaders_within_the_error_band_a_tie(run_dir, monkeypatch):
    # user test (helper-18): 0.457 s and 0.494 s were a ranking, not a tie
    def two(*a, **k):
        preds = [CM.StrategyPrediction("single", 1, 0.1, 1.0, 2, {"compute": 0.1, "framework": 0.0, "link": 0.0},
                                       rank=1),
                 CM.StrategyPrediction("horovod", 2, 0.1, 1.05, 2, {"compute": 0.05, "framework": 0.04, "link": 0.01},
                                       rank=2)]
        return preds, {"model_bytes": 4000, "target_accuracy": 0.9, "measured": [], "assumed": [], "validated": "v"}

    monkeypatch.setattr(CM, "predict_strategies", two)
    records = [json.loads(ln) for ln in (run_dir / "results.jsonl").read_text().splitlines()]
    adv = advise(records, str(run_dir), parse_target("2 nodes, 1gbit"))
    assert "then horovod (1.05 s), within the model's 10% median error of each other: a tie." in " ".join(adv.target)
    assert adv.to_dict()["target_predictions"]["tied"] == ["single", "horovod"]  # user test (helper-20): in --json


def test_a_calibration_of_another_workload_or_machine_is_refused_with_the_command(run_dir):
    # user test (helper-24): a calibration.json copied from another workload was used without a word
    single = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
    own = {"data_sha256": "d1", "initial_weights_sha256": "w1", "num_parameters": 1000}
    theirs = {**single, "initial_weights_sha256": "w1", "workload": {**WORKLOAD, "data_sha256": "d1"},
              "provenance": {"cpu_model": "AMD EPYC", "cpu_count": 2}}
    lines = [json.dumps(theirs)] + (run_dir / "results.jsonl").read_text().splitlines()[1:]
    (run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")
    target = parse_target("4 nodes, 1gbit").cluster()
    fix = f"remove {run_dir / K.CALIBRATION_FILE} and run 'distbench calibrate {run_dir}'"
    for doc, said in (({**CAL, "workload": {**own, "num_parameters": 4810}},
                       "another run (4,810 parameters against the run's 1,000)"),
                      ({**CAL, "workload": {**own, "data_sha256": "d2"}}, "another run (data_sha256 differs)"),
                      ({**CAL, "global_batch": 120}, "another run (a global batch of 120 against the run's 64)"),
                      ({**CAL, "cpu": "Intel Xeon", "workload": own},
                       "another run (another machine (2 x Intel Xeon) than its runs' (2 x AMD EPYC))"),
                      # user test (helper-27): only the first difference was named
                      ({**CAL, "global_batch": 120, "workload": {**own, "num_parameters": 4810, "data_sha256": "d2"}},
                       "another run (4,810 parameters against the run's 1,000; data_sha256 differs; a global batch "
                       "of 120 against the run's 64)")):
        (run_dir / K.CALIBRATION_FILE).write_text(json.dumps(doc))
        with pytest.raises(ValueError) as e:
            CM.predict_strategies(run_dir, target)
        assert said in str(e.value) and fix in str(e.value)
    (run_dir / K.CALIBRATION_FILE).write_text(json.dumps({**CAL, "cpu": "AMD EPYC", "global_batch": 64,
                                                          "workload": own}))
    assert CM.predict_strategies(run_dir, target)[0]  # its own: predicted
    assert K.workload_of(run_dir) == own


def test_a_calibration_far_from_singles_own_step_is_refused_or_doubted(run_dir):
    # user test (helper-25): 10 s per step was used "scaled by 0.00"; 1 ns put every step in the framework term
    target = parse_target("4 nodes, 1gbit").cluster()
    for f, said in ((2000, "takes 8 s per step at batch 64, 1.6e+03x single's own measured step (5 ms)"),
                    (1e-3, "takes 4 us per step at batch 64, 0.0008x single's own")):
        (run_dir / K.CALIBRATION_FILE).write_text(json.dumps(
            {**CAL, "points": [{**p, "step_s": p["step_s"] * f} for p in CAL["points"]]}))
        with pytest.raises(ValueError, match="it is not a measurement of this run's workload on this machine; remove"):
            CM.predict_strategies(run_dir, target)
        with pytest.raises(ValueError) as e:
            CM.predict_strategies(run_dir, target)
        assert said in str(e.value)
    # helper-25: a copy from a 4x bigger model, 0.49 of single's step, was used without a word
    (run_dir / K.CALIBRATION_FILE).write_text(json.dumps(
        {**CAL, "workload": {}, "points": [{**p, "step_s": p["step_s"] * 0.6} for p in CAL["points"]]}))
    assumed = CM.predict_strategies(run_dir, target)[1]["assumed"]
    assert any(a.startswith("the calibration's step at batch 64 (2.4 ms) is 0.48 of single's own measured step (5 ms)")
               for a in assumed), assumed
    assert not any("records no workload" in a for a in assumed)
    (run_dir / K.CALIBRATION_FILE).write_text(json.dumps(CAL))  # an older file: used, and said to be unchecked
    assert any(a.startswith("calibration.json records no workload (an older distbench wrote it)")
               for a in CM.predict_strategies(run_dir, target)[1]["assumed"])


def test_predict_of_a_run_with_no_distributed_row_is_refused_before_calibrating(run_dir):
    # user test (helper-25): predict ranked single alone and exited 0, after 20 s of calibration
    only = [ln for ln in (run_dir / "results.jsonl").read_text().splitlines() if '"single"' in ln]
    (run_dir / "results.jsonl").write_text("\n".join(only) + "\n")
    (run_dir / K.CALIBRATION_FILE).unlink()
    (run_dir / "workload").mkdir()
    res = CliRunner().invoke(main, ["predict", str(run_dir), "--target", "4 nodes x 2, 10gbit"])
    assert res.exit_code == 2 and not (run_dir / K.CALIBRATION_FILE).exists(), res.output
    assert (f"distbench: error: predict: {run_dir} has no distributed row to calibrate the model from (no strategy but "
            f"single ran): distbench run --resume --out {run_dir} --strategies horovod,multi_worker_mirrored,"
            "mpi_ps:adag measures some into it") in " ".join(res.output.split()), res.output
    # user test (helper-27): a distributed row that failed went unsaid, and --resume keeps it
    failed = new_record("run", "horovod", 2, 0, "failed", reason="horovodrun exited 1; log tail")
    said = CM.no_distributed(run_dir, [failed])
    assert said == (f"{run_dir} has no distributed row to calibrate the model from: horovod failed (horovodrun exited "
                    f"1); once that is fixed, distbench run {run_dir}/config.json --out {run_dir}-again measures them "
                    "with single (a --resume keeps recorded configurations as they are)")
    # user test (helper-28): timed-out rows were told "once that is fixed", at the same limit
    (run_dir / "config.json").write_text(json.dumps({"run": {"timeout_s": 1800}}))
    timed = new_record("run", "tf_ps", 2, 0, "timeout", reason="killed at 1800 s")
    assert CM.no_distributed(run_dir, [timed]).endswith(
        f"tf_ps timeout (killed at 1800 s); distbench run {run_dir}/config.json --timeout 7200 --out {run_dir}-again "
        "measures them with single (a --resume keeps recorded configurations as they are)")
