"""Report rendering from hand-written records."""

from __future__ import annotations

import csv

from distbench.results.records import new_record
from distbench.results.report import build, render_markdown, table_rows, write_report
from distbench.results.notes import warmup_note
from distbench.results.stats import summarize


def _ok(strategy, workers, repeat, acc, train_s, sps, ttt):
    return new_record("run", strategy, workers, repeat, "ok", final_test_accuracy=acc, target_accuracy=0.9,
                      timings={"total_s": train_s + 5, "startup_s": 4, "train_s": train_s, "eval_s": 1},
                      samples_per_s=sps, time_to_target_s=ttt)


RECORDS = [
    _ok("single", 1, 0, 0.95, 10.0, 1000, 4.0),
    _ok("single", 1, 1, 0.93, 12.0, 900, 5.0),
    _ok("single", 1, 2, 0.94, 14.0, 800, None),
    _ok("mirrored", 2, 0, 0.92, 5.5, 2000, 3.0),
    new_record("run", "mirrored", 2, 1, "failed", reason="worker 1 failed with exit code 3"),
    new_record("run", "tpu", 2, 0, "unavailable", reason="no TPU found: TPUClusterResolver: no name"),
]


def test_summary_numbers():
    s = {x.config_id: x for x in summarize(RECORDS)}
    single, mirrored = s["single_w1"], s["mirrored_w2"]
    assert single.accuracy.median == 0.94 and single.accuracy.min == 0.93 and single.accuracy.max == 0.95
    assert single.train_s.median == 12.0 and single.time_to_target_s.median == 4.5
    assert single.reached_target == 2 and single.speedup == 1.0
    assert single.ttt.value is None and single.ttt.not_reached  # MLPerf: a non-reaching run stays in the mean
    assert mirrored.ok == 1 and mirrored.repeats == 2
    assert abs(mirrored.speedup - 12.0 / 5.5) < 1e-12 and abs(mirrored.scaling_efficiency - 6.0 / 5.5) < 1e-12
    assert s["tpu_w2"].ok == 0 and s["tpu_w2"].speedup is None


def test_markdown_and_csv(tmp_path):
    md = render_markdown(RECORDS)
    assert ("| single | 1 | ok | 0.940 [0.930-0.950] | 12.00 [10.00-14.00] | 4.0 | 17.0 [15.0-19.0] | 900 [800-1000] | "
            "not reached (2/3 reached) | 1.00x | 1.00 | 1.00 |") in md
    assert "| mirrored | 2 | 1/2 ok | 0.920 | 5.50 | 4.0 | 10.5 | 2000 | 3.00 | 2.18x | 1.09 | - |" in md
    assert "kept out of speed-up and time to target" in md  # why start-up is not in any speed-up
    assert "- tpu (2 workers) (unavailable): no TPU found" in md  # named as the table and headline name it
    assert "- mirrored (2 workers) (failed, ok): worker 1 failed with exit code 3" in md
    paths = write_report(RECORDS, tmp_path)
    assert [p.name for p in paths[:4]] == ["report.md", "summary.csv", "summary.json", "report.html"]
    rows = list(csv.DictReader(open(paths[1])))
    assert [r["config_id"] for r in rows] == ["single_w1", "mirrored_w2", "tpu_w2"]
    assert float(rows[0]["acc_median"]) == 0.94 and rows[2]["status"] == "unavailable"
    assert float(rows[0]["startup_s_median"]) == 4.0 and float(rows[0]["total_s_max"]) == 19.0
    assert rows[2]["reasons"].startswith("no TPU found")


def _ps(workers, acc, st_median, st_max, loss=0.5):
    return new_record("run", "mpi_ps:downpour", workers, 0, "ok", final_test_accuracy=acc, final_test_loss=loss,
                      target_accuracy=0.9, timings={"total_s": 9, "startup_s": 4, "train_s": 2.0, "eval_s": 1},
                      samples_per_s=1000, time_to_target_s=1.0 if acc >= 0.9 else None,
                      workload={"dataset": "digits", "num_classes": 10},
                      curve=[{"elapsed_s": 2.0, "epoch": 1, "step": 9, "test_loss": loss, "test_accuracy": acc}],
                      details={"staleness": {"median": st_median, "max": st_max}})


def test_collapse_is_flagged_in_table_and_headline():
    # The case: DOWNPOUR over MPI with 4 workers collapsed while 2 workers did well.
    recs = [_ok("single", 1, 0, 0.95, 10.0, 1000, 4.0), _ps(2, 0.969, 0, 1), _ps(4, 0.267, 3, 5),
            _ps(8, 0.11, 6, 9, loss=None)]
    s = {x.workers: x for x in summarize(recs) if x.strategy == "mpi_ps:downpour"}
    assert s[2].flags == [] and s[4].flags == ["below target", "collapsed"]
    assert s[8].flags == ["diverged", "below target", "collapsed"]  # NaN loss (stored as null) and chance level
    assert (s[4].staleness_median, s[4].staleness_max) == (3, 5)
    md = render_markdown(recs)
    assert "| mpi_ps:downpour | 4 | ok, collapsed | 0.267 |" in md and md.count("| 3/5 |") == 1
    assert "| single | 1 | ok | 0.950 | 10.00 | 4.0 | 15.0 | 1000 | 4.00 | 1.00x | 1.00 | 1.00 | - |" in md
    assert ("Caution: mpi_ps:downpour (4 workers) collapsed, median test accuracy 0.267 (target 0.9), commit "
            "staleness median 3, max 5, while mpi_ps:downpour (2 workers) reached 0.969") in md
    assert "Caution: mpi_ps:downpour (8 workers) diverged" in md


def test_no_staleness_column_without_parameter_servers():
    md = render_markdown(RECORDS)
    assert "staleness" not in md and "Caution" not in md


def _curve(acc, *times):
    return [{"elapsed_s": t, "epoch": i + 1, "step": 10 * (i + 1), "test_loss": 0.5, "test_accuracy": acc}
            for i, t in enumerate(times)]


def _run(strategy, workers, acc, train_s, repeat=0):
    return new_record("run", strategy, workers, repeat, "ok", final_test_accuracy=acc, target_accuracy=0.9,
                      epochs=2, timings={"total_s": train_s + 20, "startup_s": 20, "train_s": train_s, "eval_s": 0},
                      samples_per_s=1000 / train_s, time_to_target_s=None, curve=_curve(acc, train_s / 2, train_s))


def test_headline_lists_every_tie_and_always_names_the_shortest_training():
    # the run: four synchronous strategies at the same accuracy, none reaching 0.9
    recs = [_run("single", 1, 0.867, 0.77), _run("mirrored", 2, 0.867, 0.44), _run("horovod", 2, 0.867, 0.86),
            _run("multi_worker_mirrored", 2, 0.867, 1.01), _run("spark_ps:adag", 2, 0.586, 2.16)]
    (h,) = build(recs).headlines
    text = " ".join(h.sentences)
    assert "No configuration reached the target test accuracy 0.9, so none is ranked by time to target" in text
    assert ("Most accurate: single (1 worker), median test accuracy 0.867, tied with mirrored (2 workers), "
            "horovod (2 workers) and multi_worker_mirrored (2 workers), +28.1 points over spark_ps:adag") in text
    assert ("Training time alone (secondary: it ignores accuracy): shortest mirrored (2 workers), below target, "
            "0.44 s (1.75x single), then single (1 worker) at 0.77 s") in text
    assert text.count("from a single run") == 1  # the caveat once per group
    assert [t.config_id for t in h.accurate.ties] == ["mirrored_w2", "horovod_w2", "multi_worker_mirrored_w2"]


def test_headline_says_so_when_single_wins_and_when_all_tie():
    recs = [_run("single", 1, 0.9, 0.5), _run("horovod", 2, 0.9, 0.8), _run("mirrored", 2, 0.9, 0.6)]
    text = " ".join(build(recs).headlines[0].sentences)
    assert "Accuracy: all 3 configurations that ran tie at median test accuracy 0.900." in text
    assert ("Training time alone (it ignores accuracy, so it ranks nothing): shortest single (1 worker), 0.50 s; no "
            "distributed configuration trained faster here: the quickest, mirrored (2 workers), took 0.60 s "
            "(0.83x single)") in text
    assert "train with single" not in text  # no verdict from training time: nothing reached the target


def test_warmup_note_when_the_first_epoch_dominates():
    slow_start = [_run("single", 1, 0.9, 0.77)]
    slow_start[0]["curve"] = _curve(0.9, 0.71, 0.77)
    note = warmup_note(slow_start)
    assert note.startswith("Warm-up: the first epoch of single (1 worker) took 0.710 s against 0.060 s for each later one: "
                           "the extra 0.650 s is 84% of its training time; with 2 epochs")  # 0.65 / 0.77
    assert "about --epochs 98 would bring it under 10%" in note  # 0.65 s warm-up < 10% of 0.71 + 97 x 0.06 s
    near_zero = [_run("single", 1, 0.9, 0.74)]
    near_zero[0]["curve"] = _curve(0.9, 0.73, 0.735, 0.74)  # later epochs ~5 ms: ~1,300 epochs would be needed,
    assert "about --epochs 1305 would bring it under 10%" in warmup_note(near_zero)  # 6.5 s (helper-32: refused)
    near_zero[0]["curve"] = _curve(0.9, 100.0, 100.005, 100.01)  # 200,000 epochs of 5 ms: over 10 minutes
    near_zero[0]["timings"]["train_s"] = 100.01
    note = warmup_note(near_zero)
    assert "--epochs" not in note and "bigger workload" in note
    assert "(under 10% would take about 179,991 epochs, 900 s of training)" in note, note
    assert note.endswith("(distbench predict RUN_DIR).")  # no directory known (a merged report)
    assert warmup_note(near_zero, run_dir="runs/my run").endswith("(distbench predict 'runs/my run').")
    # a configuration's median over its runs, not its slowest run (helper-33: 0.552 s of 0.552, 0.283, 0.234)
    three = [_run("horovod", 2, 0.9, 1.0, repeat=i) for i in range(3)]
    for r, first in zip(three, (0.552, 0.283, 0.234)):
        r["curve"] = _curve(0.9, first, first + 0.05, first + 0.10)
        r["timings"]["train_s"] = first + 0.10
    assert warmup_note(three).startswith("Warm-up: the first epoch of horovod (2 workers) took 0.283 s against 0.050 "
                                         "s for each later one: the extra 0.233 s is 61% of its training time")
    steady = [_run("single", 1, 0.9, 2.0)]
    steady[0]["curve"] = _curve(0.9, 0.55, 1.05, 1.55, 2.0)
    assert warmup_note(steady) is None
    assert "one epoch" in warmup_note([{**steady[0], "epochs": 1}])


def test_ps_notes_explain_a_trailing_row_and_commits_that_never_overlapped():
    ps = _run("spark_ps:adag", 2, 0.586, 2.16)
    ps["details"] = {"staleness": {"median": 0, "max": 0}}
    recs = [_run("single", 1, 0.867, 0.77), _run("horovod", 2, 0.867, 0.86), ps]
    notes = build(recs).notes
    assert any(n.startswith("spark_ps:adag (2 workers) reached 0.586 against 0.867 for single (1 worker): ADAG "
                            "divides each commit by its window") and "after 2 epochs" in n for n in notes)
    assert any(n.startswith("Every commit of spark_ps:adag (2 workers) had staleness 0") and "its replicas" in n
               for n in notes)
    dyn = {**ps, "strategy": "mpi_ps:dynsgd", "config_id": "mpi_ps-dynsgd_w2"}
    both = [n for n in build(recs + [dyn]).notes if "staleness 0" in n]  # one sentence names every such row
    assert both == ["Every commit of spark_ps:adag (2 workers) and mpi_ps:dynsgd (2 workers) had staleness 0: no "
                    "other worker committed between a worker's pull and its commit, so their replicas barely "
                    "overlapped in time and their speed is not parallelism."]
    ps["details"] = {"staleness": {"median": 1, "max": 3}}
    ps["final_test_accuracy"] = 0.85
    assert not [n for n in build(recs).notes if "spark_ps" in n]  # close enough, and overlapping


def test_per_replica_batchnorm_rows_are_named_in_a_note():
    per = "2 layers: 0 synchronized (batch moments over the global batch by tf.distribute all-reduce), 2 per-replica " \
          "(batch moments over each replica's per-replica batch)"
    single, mirrored = _run("single", 1, 0.917, 0.8), _run("mirrored", 2, 0.925, 0.9)
    single["details"], mirrored["details"] = {"batchnorm": per}, {"batchnorm": per}
    notes = [n for n in build([single, mirrored]).notes if n.startswith("BatchNormalization:")]
    assert notes == ["BatchNormalization: mirrored (2 workers) normalises with per-replica batch moments (2 of 2 "
                     "layers: each replica's own slice of the global batch, where single uses the whole batch), so "
                     "accuracy differences from single come partly from that, not only from the strategy; build the "
                     "model with BatchNormalization(synchronized=True) for the same arithmetic as single."]
    mirrored["replicas"] = 1  # mirrored on one GPU: one replica normalises over the global batch, like single
    assert not [n for n in build([single, mirrored]).notes if n.startswith("BatchNormalization:")]
    mirrored["replicas"] = 2
    mirrored["details"] = {"batchnorm": per.replace("0 synchronized", "2 synchronized").replace("2 per-replica",
                                                                                                 "0 per-replica")}
    assert not [n for n in build([single, mirrored]).notes if n.startswith("BatchNormalization:")]
    mirrored["details"] = {"batchnorm": "none"}
    assert not [n for n in build([single, mirrored]).notes if n.startswith("BatchNormalization:")]


def test_the_row_that_started_the_shared_spark_engine_is_marked_and_explained():
    def spark(strategy, startup, finished, log="logs/spark-engine-1.log", status="ok"):
        r = _ok(strategy, 2, 0, 0.95, 1.0, 1000, 0.5) if status == "ok" else \
            new_record("run", strategy, 2, 0, status, reason="boom")
        r["timings"] = {**(r["timings"] or {}), "startup_s": startup}
        r.update(log=log, finished_unix=finished, details={"spark_session": "shared"} if status == "ok" else {})
        return r
    recs = [_ok("single", 1, 0, 0.95, 1.0, 1000, 0.5), spark("spark_ps:adag", 2.5, 200.0),
            spark("spark_ps:averaging", 23.3, 100.0), spark("spark_ps:easgd", 3.1, 300.0)]
    d = build(recs)
    md = render_markdown(recs, data=d)
    assert "| spark_ps:averaging | 2 | ok | 0.950 | 1.00 | 23.3* |" in md  # it ran first: it paid the start
    assert "| spark_ps:adag | 2 | ok | 0.950 | 1.00 | 2.5 |" in md
    from distbench.results.htmlpage import render_html

    assert '<td class="n">23.3*</td>' in render_html(d, []) and '<td class="n">2.5*</td>' not in render_html(d, [])
    (note,) = [n for n in d.notes if n.startswith("Shared Spark engine")]
    assert ("the start-up marked * (spark_ps:averaging (2 workers), 23.3 s) includes starting the engine" in note
            and "reused it started in 2.5-3.1 s" in note and "share_session = false" in note)
    # an engine whose first configuration failed: nothing ok paid its start; its own engine per row: no note
    failed_first = recs[:2] + [spark("spark_ps:averaging", 0.0, 50.0, status="failed")]
    assert "*" not in " ".join(" ".join(row) for row in table_rows(build(failed_first).summaries))
    own = [r for r in recs if r["strategy"] == "single"] + [{**recs[1], "details": {},
                                                             "log": "logs/spark_ps-adag_w2_r0.log"}]
    assert not [n for n in build(own).notes if n.startswith("Shared Spark engine")]
    # the user test: with one spark_ps row the note said the sweep's configurations "share" the engine
    (alone,) = [n for n in build(recs[:2]).notes if n.startswith("Shared Spark engine")]
    assert "that the sweep's spark_ps configurations share" not in alone
    assert alone.endswith("which later spark_ps configurations of a sweep reuse; these records have no other.")


def test_the_row_that_started_the_shared_mpi_engine_is_marked_and_explained_apart_from_spark():
    def ps(strategy, startup, finished, log, key):
        r = _ok(strategy, 2, 0, 0.95, 1.0, 1000, 0.5)
        r["timings"] = {**(r["timings"] or {}), "startup_s": startup}
        r.update(log=log, finished_unix=finished, details={key: "shared"})
        return r
    recs = [_ok("single", 1, 0, 0.95, 1.0, 1000, 0.5),
            ps("spark_ps:adag", 20.0, 100.0, "logs/spark-engine-1.log", "spark_session"),
            ps("spark_ps:easgd", 1.5, 110.0, "logs/spark-engine-1.log", "spark_session"),
            ps("mpi_ps:adag", 11.7, 120.0, "logs/mpi-engine-1.log", "mpi_engine"),
            ps("mpi_ps:easgd", 0.3, 130.0, "logs/mpi-engine-1.log", "mpi_engine")]
    d = build(recs)
    md = render_markdown(recs, data=d)
    assert "| mpi_ps:adag | 2 | ok | 0.950 | 1.00 | 11.7* |" in md and "| spark_ps:adag | 2 | ok | 0.950 | 1.00 | 20.0* |" in md
    assert "| mpi_ps:easgd | 2 | ok | 0.950 | 1.00 | 0.3 |" in md
    (spark,) = [n for n in d.notes if n.startswith("Shared Spark engine")]
    (mpi,) = [n for n in d.notes if n.startswith("Shared MPI engine")]
    assert "(spark_ps:adag (2 workers), 20.0 s)" in spark and "reused it started in 1.5 s" in spark
    assert mpi == ("Shared MPI engine: the start-up marked * (mpi_ps:adag (2 workers), 11.7 s) includes starting the "
                   "engine (mpirun, its ranks' Python and TensorFlow imports) that the sweep's mpi_ps configurations "
                   "share; the mpi_ps configurations that reused it started in 0.3 s. [mpi] share_engine = false gives "
                   "each configuration its own start.")


def test_merged_runs_with_other_targets_are_each_ranked_against_their_own():
    # the user test: `report run1 run2` (targets 0.8 and 0.9) ranked workload 2 "to 0.8"
    a = [_run("single", 1, 0.85, 0.5), _run("mirrored", 2, 0.85, 0.6)]
    b = [{**_run(s, n, 0.95, t), "epochs": 3, "target_accuracy": 0.95} for s, n, t in
         (("single", 1, 0.7), ("mirrored", 2, 0.8))]
    for r in a:
        r["target_accuracy"] = 0.8
    heads = build(a + b).headlines
    assert len(heads) == 2
    texts = [" ".join(h.sentences) for h in heads]
    assert "the target test accuracy 0.8," in texts[0] and "the target test accuracy 0.95," in texts[1], texts


def test_a_slow_run_near_chance_whose_loss_falls_is_not_called_diverged():
    # the user test: ADAG at 0.455 after 2 epochs on 3 classes (1.5x chance = 0.5) was "diverged"
    slow, stuck = _ps(2, 0.455, 0, 1, loss=1.02), _ps(4, 0.34, 0, 1, loss=7.5)
    for r in (slow, stuck):
        r["workload"]["num_classes"] = 3
    s = {x.workers: x for x in summarize([slow, stuck])}
    assert "diverged" not in s[2].flags  # 1.02 < ln 3 = 1.0986: it learns, slowly
    assert "diverged" in s[4].flags  # chance accuracy and a loss far above a uniform guess's
    # the user test: alpha = 2.5, accuracy 0.45 of 10 classes but the test loss rose from 3.1 to 25.4
    backwards = _ps(2, 0.45, 0, 1, loss=25.4)
    backwards["curve"].insert(0, {"elapsed_s": 1.0, "epoch": 1, "step": 4, "test_loss": 3.1, "test_accuracy": 0.57})
    one, b = summarize([_ok("single", 1, 0, 0.95, 10.0, 1000, 4.0), backwards])
    assert "diverged" in b.flags and one.speedup == 1.0 and b.speedup is None and b.scaling_efficiency is None
    overfit = _ps(2, 0.9, 0, 1, loss=0.6)  # a rising but small test loss (over-fitting) is not divergence
    overfit["curve"].insert(0, {"elapsed_s": 1.0, "epoch": 1, "step": 4, "test_loss": 0.2, "test_accuracy": 0.9})
    assert "diverged" not in summarize([overfit])[0].flags
    confident = _ps(2, 0.93, 0, 1, loss=3.0)  # at the target, over-confident (loss 3 > ln 10): not diverged
    confident["curve"].insert(0, {"elapsed_s": 1.0, "epoch": 1, "step": 4, "test_loss": 0.3, "test_accuracy": 0.9})
    assert "diverged" not in summarize([confident])[0].flags


def test_every_configuration_diverged_says_the_workload_does_not_train():
    # the user test: learning_rate = 1e6; advise asked for more epochs and the caution spoke of "other settings"
    from distbench.results.advice import advise

    recs = [_run("single", 1, 0.1, 0.5), _run("horovod", 2, 0.1, 0.6)]
    for r in recs:
        r["curve"][-1]["test_loss"] = None  # NaN loss
    (h,) = build(recs).headlines
    assert h.sentences[0].startswith("Caution: every configuration that ran collapsed or diverged: the workload's "
                                     "settings do not train this model here (lower training.learning_rate")
    assert not [t for t in h.sentences if "leads above only in its other settings" in t]
    # nothing compares runs that do not train (the user test: "Most accurate", "Training time alone" followed)
    assert not [t for t in h.sentences if t.startswith(("Most accurate", "Training time alone", "No configuration"))]
    adv = advise(recs, "runs/x")
    assert adv.headline.startswith("No advice: every configuration that ran collapsed or diverged")
    assert adv.next_command is None and "Lower training.learning_rate" in adv.reasons[-1]


def test_merged_runs_of_one_workload_with_other_targets_say_so():
    # the user test: `report t80 t90` pooled single's repeats scored against 0.8 and 0.9 without a word
    from distbench.results.headline import terminal_lines

    a, b = _run("single", 1, 0.85, 0.5), _run("single", 1, 0.85, 0.5, repeat=1)
    a["target_accuracy"] = 0.8
    data = build([a, b])
    assert ("The merged runs were scored against different target accuracies (0.8, 0.9): each record's time to "
            "target is against its own run's target; pass --target-accuracy to score them all against one.") in data.notes
    assert any(t.startswith("Recommendation (distbench advise on one of the run directories for the reasons)")
               for t in terminal_lines(data, None))


def test_a_model_that_fits_its_training_data_is_not_diverged_when_the_test_split_disagrees():
    # the user test: a shifted, balanced test set from another source; mirrored's training loss 0.092 (lower than
    # single's) but test accuracy 0.427 of 3 classes and test loss 3.0: it was "diverged", its speed-up blanked
    recs = []
    for strategy, workers, train_loss in (("single", 1, 0.095), ("mirrored", 2, 0.092)):
        r = _run(strategy, workers, 0.427, 0.5)
        r["workload"] = {"num_classes": 3}
        r["details"] = {"last_train_loss": train_loss}
        for p in r["curve"]:
            p["test_loss"] = 3.0
        recs.append(r)
    d = build(recs)
    s = {x.strategy: x for x in d.summaries}
    assert "diverged" not in s["mirrored"].flags and s["mirrored"].speedup is not None
    (note,) = [n for n in d.notes if n.startswith("Training fits, the test split does not")]
    assert "mirrored (2 workers): training loss 0.092, test loss 3.000, test accuracy 0.427" in note
    assert "(a uniform guess has loss ln 3 = 1.099 and accuracy 0.333)" in note and "not divergence" in note
    for r in recs:  # a training loss no better than half a uniform guess's: the test rules decide again
        r["details"]["last_train_loss"] = 0.9
    d = build(recs)
    assert "diverged" in {x.strategy: x for x in d.summaries}["mirrored"].flags
    assert not [n for n in d.notes if n.startswith("Training fits")]


def test_a_diverged_parameter_server_row_gets_no_it_is_just_slow_hint():
    ps = _run("mpi_ps:easgd", 2, 0.405, 0.3)
    ps["details"] = {"diverged": True}
    notes = build([_run("single", 1, 0.867, 0.77), ps]).notes
    assert not [n for n in notes if "may need more epochs" in n]  # its caution says it diverged
    ps["details"] = {}
    assert [n for n in build([_run("single", 1, 0.867, 0.77), ps]).notes if "may need more epochs" in n]
    # helper-44: DOWNPOUR at 0.744 after epoch 1 and 0.436 after 5 was told it "may need more epochs to catch up"
    ps = _run("mpi_ps:downpour", 2, 0.436, 0.3)
    ps["curve"][0]["test_accuracy"] = 0.744
    (note,) = [n for n in build([_run("single", 1, 0.961, 0.77), ps]).notes if n.startswith("mpi_ps:downpour")]
    assert note.startswith("mpi_ps:downpour (2 workers) fell to 0.436 from 0.744 at its best (median over its runs), "
                           "against 0.961 for single (1 worker)") and "does not catch up with more epochs" in note


def _timed(strategy, workers, train_s, repeat=0, first_extra=0.0, cores=2, kind=None, gpus=()):
    """An ok record of 3 epochs of 1,400 samples each, its first ``first_extra`` s longer."""
    t, curve = 0.0, []
    for e in range(3):
        t += train_s / 3 + (first_extra if e == 0 else 0.0)
        curve.append({"elapsed_s": t, "epoch": e + 1, "step": 10 * (e + 1), "test_accuracy": 0.95, "test_loss": 0.2})
    return new_record("run", strategy, workers, repeat, "ok", final_test_accuracy=0.95, target_accuracy=0.9, epochs=3,
                      samples=4200, samples_per_s=4200 / t, timings={"total_s": t + 5, "startup_s": 4, "train_s": t,
                                                                    "eval_s": 1},
                      curve=curve, details={"cluster_kind": kind} if kind else {},
                      provenance={"hostname": "h", "cpu_model": "c", "cpu_count": cores, "gpus": list(gpus)})


def test_a_speed_up_above_what_the_shared_cores_can_give_is_flagged_with_its_likely_cause():
    from distbench.results.headline import terminal_lines

    # issue 30: 'mpi_ps:adag (2 workers) 3.85x, eff. 1.92' on 2 cores and 3.11x for 4 emulated hosts on 2 cores,
    # with nothing said
    recs = [_timed("single", 1, 3.0), _timed("mpi_ps:adag", 2, 3.0 / 3.85), _timed("mirrored", 2, 1.6),
            _timed("mpi_ps:downpour", 4, 3.0 / 3.11, kind="emulated")]
    data = build(recs)
    (note,) = [n for n in data.notes if n.startswith("Speed-up above")]
    assert note.startswith("Speed-up above what the hardware can give (the excess is not parallelism): mpi_ps:adag "
                           "(2 workers) 3.85x (its 2 workers shared this machine's 2 cores: at most 2x); "
                           "mpi_ps:downpour (4 workers) 3.11x (its 4 workers ran on emulated hosts that share this "
                           "machine's 2 cores: at most 2x).")
    assert "mirrored" not in note  # 1.88x on 2 workers and 2 cores: possible
    assert ("Noise is likely: one run of it or of single (use --repeats 3 or more): mpi_ps:adag (2 workers) and "
            "mpi_ps:downpour (4 workers).") in note
    assert ("A weaker baseline is likely: in steady state (epochs 2..E) each worker, or each core the workers shared, "
            "processed more samples per second than single did with the whole machine") in note
    assert ("mpi_ps:adag (2 workers) 2,695 samples/s per worker against single's 1,400; mpi_ps:downpour (4 workers) "
            "2,177 samples/s per core against single's 1,400.") in note
    assert note in terminal_lines(data) and note in render_markdown(recs, data=data)
    # repeated runs, a speed-up from single's slow first epoch: the warm-up, not noise
    warm = build([_timed("single", 1, 3.0, r, first_extra=2.0) for r in range(3)] +
                 [_timed("horovod", 2, 2.2, r) for r in range(3)])
    (note,) = [n for n in warm.notes if n.startswith("Speed-up above")]
    assert note == ("Speed-up above what the hardware can give (the excess is not parallelism): horovod (2 workers) "
                    "2.27x (its 2 workers shared this machine's 2 cores: at most 2x). Single's one-off first-epoch "
                    "warm-up is likely: in steady state (epochs 2..E) the speed-up is within the bound: horovod (2 "
                    "workers) 1.36x.")
    # more cores than workers: the workers bound it; on GPUs (or real hosts) only the workers do
    roomy = build([_timed("single", 1, 3.0, cores=16), _timed("horovod", 4, 0.8, cores=16),
                   _timed("mirrored", 2, 1.4, cores=16)])
    (note,) = [n for n in roomy.notes if n.startswith("Speed-up above")]
    assert "mirrored (2 workers) 2.14x (its 2 workers shared this machine's 16 cores: at most 2x)" in note
    assert "horovod" not in note  # 3.75x on 4 workers
    gpu = build([_timed("single", 1, 3.0, gpus=["GPU 0"]), _timed("mirrored", 2, 1.4, gpus=["GPU 0"])])
    assert any("(its 2 workers can each at best match single: at most 2x)" in n for n in gpu.notes)
    assert not [n for n in build([_timed("single", 1, 3.0), _timed("mirrored", 2, 1.6)]).notes
                if n.startswith("Speed-up above")]
