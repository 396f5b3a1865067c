"""The headline and the lines under the terminal table: one criterion ranks the
configurations (time to target, as the recommendation does), training time is a labelled
secondary fact, a straggler sweep's leaders say which rows they are among, and the legend
describes only the columns shown."""

from __future__ import annotations

from distbench.results.headline import legend, terminal_lines
from distbench.results.report import build
from distbench.config.scenario import Scenario
from tests.results.test_advice import rec, runs


def test_time_to_target_ranks_and_training_time_is_secondary_and_the_recommendation_agrees():
    # the user test's run: spark_ps:averaging reaches 0.9 first, single has the shortest training time
    records = runs("single", 1, [0.50, 0.52, 0.54], train_s=0.20) + \
        runs("spark_ps:averaging", 2, [0.25, 0.26, 0.27], train_s=0.30) + \
        runs("mirrored", 2, [0.60, 0.61, 0.62], train_s=0.40)
    data = build(records)
    (h,) = data.headlines
    assert h.fastest.summary.strategy == "spark_ps:averaging" and h.quickest.summary.strategy == "single"
    text = " ".join(h.sentences)
    # the user tests: a PS row first to 0.9 in fewer passes read as "use the parameter server";
    # that nothing trained faster than single comes first, then the ranking
    assert text.startswith("Training time alone (it ignores accuracy, so it ranks nothing): shortest single "
                           "(1 worker), 0.20 s; no distributed configuration trained faster here")
    assert h.sentences[1].startswith("Fastest to 0.9 test accuracy (the ranking criterion, as in the "
                                     "recommendation): spark_ps:averaging (2 workers), 0.26 s")
    assert "train with single" not in text  # the old contradicting verdict
    assert data.advice.recommended == "spark_ps:averaging (2 workers)"
    lines = terminal_lines(data, "runs/x")
    assert ("Recommendation (distbench advise runs/x for the reasons): Recommended: spark_ps:averaging (2 workers); "
            "runner-up: single (1 worker).") in lines
    assert lines.index(next(t for t in lines if t.startswith("Recommendation"))) == len(h.sentences)


def test_collapsed_rows_are_not_ranked_as_in_the_recommendation():
    records = runs("single", 1, [0.5]) + runs("mpi_ps:downpour", 2, [0.2]) + runs("mpi_ps:downpour", 4, [0.1])
    records[-1]["final_test_accuracy"] = 0.3  # reached 0.9 on its way, then collapsed
    (h,) = build(records).headlines
    assert h.fastest.summary.label == "mpi_ps:downpour (2 workers)"
    assert any(t.startswith("Caution: mpi_ps:downpour (4 workers) collapsed") for t in h.sentences)
    # user test (helper-43): the collapsed row, shortest in training time, was named as the quickest
    assert h.quickest.summary.label == "mpi_ps:downpour (2 workers)" and h.accurate.summary.strategy == "single"


def test_a_straggler_sweep_counts_its_unslowed_rows_and_prints_a_verdict():
    records = [rec("single", 1, 0, 0.8, train_s=1.0, acc=0.95)]
    for slow, delay, train, ttt in ((1.0, 0.0, 1.0, 0.8), (4.0, 1.5, 2.5, 2.3)):
        records.append(rec("horovod", 2, 0, ttt, train_s=train, scenario=Scenario(1, slow), delay=delay))
    for slow, delay, train, ttt in ((1.0, 0.0, 1.2, 1.0), (4.0, 1.5, 2.7, 1.1)):
        records.append(rec("mpi_ps:adag", 2, 0, ttt, train_s=train, scenario=Scenario(1, slow), delay=delay))
    data = build(records)
    (h,) = data.headlines
    assert h.sentences[0] == ("Leaders among the 3 configurations without a slowed worker; the 2 with one are judged "
                              "against their 1x runs (Stragglers).")
    assert "Accuracy: all 3 configurations without a slowed worker tie at median test accuracy 0.950." in h.sentences
    verdict = next(t for t in terminal_lines(data) if t.startswith("Stragglers:"))
    assert verdict == ("Stragglers: with one worker 4x slower, fastest to 0.9: mpi_ps:adag (2 workers, w1 4x), 1.10 s; "
                       "least slowed: mpi_ps:adag (2 workers), time to target +10% over its 1x run; most: horovod "
                       "(2 workers), time to target +187% (per configuration: report.md, Stragglers).")
    plain = build([r for r in records if r["scenario"] is None or r["scenario"]["slowdown"] == 1.0])
    assert not any(t.startswith("Stragglers:") for t in terminal_lines(plain))


def test_legend_describes_only_the_columns_shown():
    narrow = legend(["strategy", "workers", "status", "test acc", "train s", "to target s", "speed-up"])
    assert narrow == ("test acc, train s: median [min-max] over repeats; to target: MLPerf rule; speed-up: "
                      "single's train s / the row's, same hardware.")
    for absent in ("samples/s", "eff.", "temporal", "stale", "Start-up", "total s"):
        assert absent not in narrow
    wide = legend(["strategy", "test acc", "train s", "start-up s", "total s", "samples/s", "to target s",
                   "speed-up", "eff.", "temporal", "stale"])
    assert "samples/s: median" in wide and "eff.: scaling efficiency" in wide and "temporal: Hermans'" in wide
    assert ("Start-up s (spawn to the first training step: processes, framework, cluster) and total s (spawn to "
            "the end of training) are kept out of speed-up and time to target") in wide
    assert legend(["strategy", "workers", "start-up s"]).startswith("Start-up s (spawn") and "is kept out" in \
        legend(["start-up s"])
    assert legend(["strategy", "workers", "status"]) == ""


def test_a_leader_that_trains_slower_than_single_says_it_needs_fewer_passes():
    # the user test's default sweep: a PS row reaches the target first although its training took longer
    records = runs("single", 1, [0.50, 0.52, 0.54], train_s=0.20) + \
        runs("spark_ps:aeasgd", 2, [0.25, 0.26, 0.27], train_s=0.40)
    (h,) = build(records).headlines
    assert h.sentences[1].endswith("; it gets there in fewer passes over the data, not by training faster: its "
                                   "whole training took 2.00x single's time (speed-up 0.50x).")


def test_the_noise_caveat_names_the_row_with_a_single_run():
    records = runs("single", 1, [0.20, 0.21, 0.22], train_s=0.2) + runs("mirrored", 2, [0.30], train_s=0.2)
    (h,) = build(records).headlines
    (fastest,) = [t for t in h.sentences if t.startswith("Fastest to")]
    assert fastest.endswith("(MLPerf score over 3 runs), 1.43x faster than mirrored (2 workers) (0.30 s); "
                            "mirrored (2 workers) has a single run, so run-to-run noise is unknown: use "
                            "--repeats 3 or more before choosing.")


def test_two_times_compared_in_a_sentence_never_print_the_same():
    from distbench.results.headline import _distinct_digits

    assert _distinct_digits(0.0712, 0.0749) == 3  # "0.071 s" vs "0.075 s", not "0.07 s" twice
    assert _distinct_digits(0.21, 0.42) == 2 and _distinct_digits(0.5, None) == 2
    assert _distinct_digits(0.07, 0.07) == 4  # equal times: at most 4 decimals


def test_no_configuration_is_named_most_accurate_when_every_one_ties():
    # issue 30: accuracies that print alike (0.9504, 0.9500, 0.9496 all read 0.950) named one "most accurate",
    # "+0.0 points" over another; the advice's reasons and the HTML star named one too
    from distbench.results.htmlpage import render_html

    recs = [rec("single", 1, 0, None, train_s=0.5, acc=0.9504), rec("horovod", 2, 0, None, train_s=0.8, acc=0.9500),
            rec("mirrored", 2, 0, None, train_s=0.6, acc=0.9496)]
    data = build(recs)
    (h,) = data.headlines
    assert "Accuracy: all 3 configurations that ran tie at median test accuracy 0.950." in h.sentences
    assert not [t for t in terminal_lines(data) + data.advice.reasons if "Most accurate" in t or "+0.0 points" in t]
    assert "Accuracy: all 3 configurations that ran tie at median test accuracy 0.950." in data.advice.reasons
    assert "&#9733; most accurate" not in render_html(data, [])
    # within the tie (0.0005) but printed apart: still a tie, its range shown
    two = build([rec("single", 1, 0, None, train_s=0.5, acc=0.9506), rec("horovod", 2, 0, None, train_s=0.8, acc=0.9502)])
    assert "Accuracy: both configurations that ran tie at median test accuracy 0.950-0.951." in two.headlines[0].sentences
    # a real lead keeps its name and its star
    lead = build([rec("single", 1, 0, None, train_s=0.5, acc=0.96), rec("horovod", 2, 0, None, train_s=0.8, acc=0.95)])
    assert lead.headlines[0].sentences[-1].startswith("Most accurate: single (1 worker), median test accuracy 0.960, "
                                                      "+1.0 points over horovod (2 workers) (0.950)")
    assert render_html(lead, []).count("&#9733; most accurate") == 1
    # user test: a parameter server 'most accurate' by 4.8 points had taken twice single's optimizer steps
    ps = build([rec("single", 1, 0, None, train_s=0.5, acc=0.86), rec("tf_ps", 2, 0, None, train_s=9.0, acc=0.91)])
    assert [t for t in ps.headlines[0].sentences if t.startswith("Most accurate")] == [
        "Most accurate: tf_ps (2 workers), median test accuracy 0.910 (from 2x the optimizer steps of a synchronous "
        "run, each on 1/2 of the global batch), +5.0 points over single (1 worker) (0.860); from a single run, so "
        "run-to-run noise is unknown: use --repeats 3 or more before choosing."]
