"""Problems in benchmark sweeps (issue 17): task syntax ``NAME[:INSTANCE]``, problem rows and
their statistics against hand-computed numbers, the policy comparison's bootstrap verdicts on
fixed numbers, bad input, and a real ``swarm-evo sweep --problems`` over two tsp instances."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from scipy import stats

from swarm_evo.sweeps import sweep, sweep_problems, sweep_stats
from swarm_evo.sweeps.sweep_problems import ProblemTask, parse_problem_tasks

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _report(raw, *, instance="kroA100", correct=True, interpretation="lower_better", known_best=21282.0):
    return {"problem": "tsp", "instance": instance, "best_node_id": "n1", "correct": correct,
            "score": None if raw is None else known_best / raw, "score_name": "tour_length", "raw_score": raw,
            "initial_raw_score": 30000.0, "interpretation": interpretation, "known_best": known_best,
            "gap_to_known_best": None if raw is None else raw - known_best}


def _row(raw, policy="two_phase", seed=0, task="tsp:kroA100", **kwargs):
    problem, _, instance = task.partition(":")
    return sweep_problems.problem_row(_report(raw, instance=instance or None, **kwargs),
                                      ProblemTask(problem, instance or None), policy=policy, seed=seed,
                                      run_dir=f"/runs/{task}-{policy}-s{seed}")


def test_task_syntax():
    tasks = parse_problem_tasks("tsp:kroA100, tsp:a280,circle-packing,tsp:kroA100,tsp")
    assert tasks == [ProblemTask("tsp", "kroA100"), ProblemTask("tsp", "a280"), ProblemTask("circle-packing"),
                     ProblemTask("tsp")]
    assert [t.task for t in tasks] == ["tsp:kroA100", "tsp:a280", "circle-packing", "tsp"]
    assert [t.label for t in tasks] == ["tsp-kroA100", "tsp-a280", "circle-packing", "tsp"]
    assert ProblemTask("/problems/my-tsp", "x1").label == "my-tsp-x1"
    assert sweep.run_name(ProblemTask("tsp", "a280").label, "greedy", 2) == "tsp-a280-greedy-s2"
    for bad in ("tsp:", ":kroA100"):
        with pytest.raises(ValueError, match="is not NAME or NAME:INSTANCE"):
            parse_problem_tasks(bad)
    with pytest.raises(ValueError, match="--problems is empty"):
        parse_problem_tasks(" , ")


def test_problem_rows_and_their_summary_next_to_competitions(tmp_path):
    rows = [_row(21500.0, seed=1), _row(21282.0, seed=0), _row(None, seed=2, correct=False),
            _row(22000.0, policy="random", seed=0), _row(23000.0, policy="random", seed=1),
            _row(2.6, task="circle-packing", interpretation="higher_better", known_best=2.635983)]
    row = rows[0]
    assert row["kind"] == "problem" and row["task"] == "tsp:kroA100" and row["instance"] == "kroA100"
    assert (row["score"], row["is_lower_better"], row["valid"], row["error"]) == (21500.0, True, True, None)
    assert row["combined_score"] == pytest.approx(21282 / 21500)
    assert rows[2]["score"] is None and rows[2]["valid"] is False
    competition = sweep.report_row({"competition_id": "comp-a", "score": 0.5, "is_lower_better": False,
                                    "submission_path": "/s.csv", "submission_exists": True, "valid_submission": True},
                                   policy="two_phase", seed=0, run_dir="/runs/comp-a")
    summary = sweep.summarize([competition, *rows])
    assert list(summary) == ["comp-a", "tsp:kroA100", "circle-packing"]
    assert summary["comp-a"]["two_phase"]["score_mean"] == 0.5  # competitions as before
    tp = summary["tsp:kroA100"]["two_phase"]
    assert (tp["runs"], tp["seeds"], tp["valid_runs"], tp["scored_runs"]) == (3, [0, 1, 2], 2, 2)
    assert tp["scores"] == [21282.0, 21500.0, None]
    assert tp["score_mean"] == pytest.approx(21391.0) and tp["score_sem"] == pytest.approx(stats.sem([21282, 21500]))
    assert tp["score_sem"] == pytest.approx(109.0)  # sd of {21282, 21500} = 154.15, / sqrt(2)
    assert tp["combined_score_mean"] == pytest.approx((1 + 21282 / 21500) / 2)
    assert tp["is_lower_better"] is True and tp["score_name"] == "tour_length" and tp["known_best"] == 21282
    assert summary["circle-packing"]["two_phase"]["is_lower_better"] is False
    assert summary["circle-packing"]["two_phase"]["score_sem"] is None  # one run

    table = sweep_problems.problem_table(summary)
    assert [(r["task"], r["policy"]) for r in table] == [("tsp:kroA100", "two_phase"), ("tsp:kroA100", "random"),
                                                         ("circle-packing", "two_phase")]
    assert table[1]["score (mean ± SEM)"] == "22500.00000 ± 500.00000" and table[1]["direction"] == "lower is better"
    assert [r["competition"] for r in sweep.summary_table(summary)] == ["comp-a"]

    sweep.write_outputs([competition, *rows], tmp_path)
    grading = [json.loads(line) for line in (tmp_path / sweep.REPORTS_FILE).read_text().splitlines()]
    problem_lines = [json.loads(line) for line in (tmp_path / sweep_problems.PROBLEM_REPORTS_FILE).read_text().splitlines()]
    assert [r["competition_id"] for r in grading] == ["comp-a"] and problem_lines == rows  # (NaN thresholds)
    assert json.loads((tmp_path / sweep.SUMMARY_FILE).read_text()) == json.loads(json.dumps(summary))


def test_a_failed_problem_run_counts_without_a_score():
    row = sweep_problems.failed_problem_row(ProblemTask("tsp", "a280"), score_name="tour_length", is_lower_better=True,
                                            known_best=2579.0, policy="greedy", seed=0, run_dir="/r", error="boom")
    assert row["error"] == "run failed: boom" and row["score"] is None and sweep.is_failed_row(row)
    group = sweep.summarize([row])["tsp:a280"]["greedy"]
    assert (group["runs"], group["failed_runs"], group["valid_runs"], group["score_mean"]) == (1, 1, 0, None)


# ---------------------------------------------------------------------------------------------
# Policy comparison (swarm_evo.sweeps.sweep_stats.compare) on fixed numbers


def test_compare_a_clear_win_for_a_lower_is_better_score():
    result = sweep_stats.compare([21300, 21350, 21320], [22400, 22500, 22450], lower_is_better=True)
    assert result["advantage"] == pytest.approx(22450 - 21323.333, abs=1e-3)  # other − reference: positive = better
    assert 0 < result["low"] <= result["advantage"] <= result["high"]
    # the resampled means can only range over the sample extremes
    assert result["low"] >= 22400 - 21350 and result["high"] <= 22500 - 21300
    assert result["verdict"] == "better" and (result["n_reference"], result["n_other"]) == (3, 3)


def test_compare_a_clear_loss_for_a_higher_is_better_score():
    result = sweep_stats.compare([2.60, 2.61, 2.605], [2.63, 2.631, 2.629], lower_is_better=False)
    assert result["advantage"] == pytest.approx(2.605 - 2.63)
    assert result["low"] <= result["advantage"] <= result["high"] < 0
    assert result["verdict"] == "worse"


def test_compare_overlapping_samples_make_no_difference():
    result = sweep_stats.compare([10.0, 14.0, 12.0, 9.0], [11.0, 13.0, 10.0, 12.5], lower_is_better=True)
    assert result["low"] < 0 < result["high"] and result["verdict"] == "no difference"
    # the same data read as higher-is-better: the interval flips sign, the verdict stays
    flipped = sweep_stats.compare([10.0, 14.0, 12.0, 9.0], [11.0, 13.0, 10.0, 12.5], lower_is_better=False)
    assert flipped["advantage"] == pytest.approx(-result["advantage"])
    assert flipped["low"] == pytest.approx(-result["high"]) and flipped["verdict"] == "no difference"


def test_compare_constant_samples_and_too_few_runs():
    same = sweep_stats.compare([2579.0] * 3, [2579.0] * 3, lower_is_better=True)
    assert (same["advantage"], same["low"], same["high"], same["verdict"]) == (0.0, 0.0, 0.0, "no difference")
    apart = sweep_stats.compare([2579.0] * 3, [2600.0] * 3, lower_is_better=True)
    assert (apart["low"], apart["high"], apart["verdict"]) == (21.0, 21.0, "better")
    one = sweep_stats.compare([1.0], [2.0, 3.0], lower_is_better=False)
    assert one["verdict"] == "too few runs" and one["low"] is None and one["advantage"] == -1.5
    with pytest.raises(ValueError, match="at least one score per policy"):
        sweep_stats.compare([], [1.0], lower_is_better=False)
    assert sweep_stats.mean_and_sem([1.0, 2.0, 4.0, 7.0])[1] == pytest.approx(stats.sem([1, 2, 4, 7]))
    assert not math.isnan(apart["advantage"])


# ---------------------------------------------------------------------------------------------
# The command line


def _sweep(argv):
    from swarm_evo.cli.commands import main

    return main(["sweep", *argv])


@pytest.mark.parametrize(("argv", "words"), [
    ([], ["give --competitions A,B (with --data-dir) and/or --problems"]),
    (["--problems", "tsp:nope"], ["--problems tsp:nope: unknown instance 'nope' of problem 'tsp'",
                                  "available instances: a280, berlin52, ch150, kroA100"]),
    (["--problems", "tsp:"], ["--problems: 'tsp:' is not NAME or NAME:INSTANCE"]),
    (["--problems", "circle-packing:big"], ["problem 'circle-packing' takes no instance"]),
    (["--problems", "tsp", "--competitions", "sklearn-wine"], ["--data-dir is required with --competitions"]),
])
def test_cli_bad_problem_input_is_exit_2_with_one_line(prefect_server, tmp_path, capsys, argv, words):
    code = _sweep([*argv, "--problem-data-dir", str(SHARED_DATA), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("swarm-evo: error: "), err
    assert all(word in err for word in words), err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_sweep_over_two_tsp_instances(prefect_server, tmp_path, capsys):
    """``swarm-evo sweep --problems tsp:berlin52,tsp:kroA100`` (one seed, one policy, 2 nodes per
    run): one run directory per instance, rows equal to the runs' own problem_report.json, the
    summary's mean equal to the raw tour length."""
    config = tmp_path / "config.yaml"
    config.write_text("search: {steps_per_epoch: 2, phase1_target_nodes: 2, parallel_workers: 1}\n")
    out = tmp_path / "out"
    code = _sweep(["--problems", "tsp:berlin52,tsp:kroA100", "--data-dir", str(SHARED_DATA), "--seeds", "1",
                   "--policies", "greedy", "--max-steps", "2", "--model", "offline", "--out", str(out),
                   "--config", str(config)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "tsp:kroA100" in printed and "lower is better" in printed
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["tsp-berlin52-greedy-s0", "tsp-kroA100-greedy-s0"]
    rows = [json.loads(line) for line in (out / sweep_problems.PROBLEM_REPORTS_FILE).read_text().splitlines()]
    assert [r["task"] for r in rows] == ["tsp:berlin52", "tsp:kroA100"]
    summary = json.loads((out / sweep.SUMMARY_FILE).read_text())
    for row in rows:
        report = json.loads((Path(row["run_dir"]) / "problem_report.json").read_text())
        journal = json.loads((Path(row["run_dir"]) / "journal.json").read_text())
        assert report["instance"] == row["instance"] == journal["info"]["instance"]
        assert row["score"] == report["raw_score"] and row["known_best"] == report["known_best"]
        assert len(journal["nodes"]) == 2 and journal["info"]["policy"] == "greedy"
        assert summary[row["task"]]["greedy"]["score_mean"] == row["score"]
    assert rows[1]["known_best"] == 21282 and rows[0]["known_best"] == 7542
