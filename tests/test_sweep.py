"""Benchmark sweeps (SPEC §12, issue 6): the summary's statistics against hand-computed numbers,
the JSONL rows, and a real in-process sweep through ``swarm-evo sweep`` with the offline model
on two built-in scikit-learn competitions (2 seeds, 2 policies, one node per run): summary.json agrees with the
runs' own grade_report.json files, the JSONL lines are those reports plus policy, seed and
run_dir, and Prefect recorded each run as a subflow of the sweep and the table artifact."""

from __future__ import annotations

import argparse
import asyncio
import json
import math

import pytest
import yaml
from scipy import stats

from mlebench_reference import competition_report_from_dict

from swarm_evo.sweeps import sweep
from swarm_evo.competition import CompetitionReport

COMPETITIONS = ("sklearn-breast-cancer", "sklearn-diabetes")
SEEDS = 2
POLICIES = ("two_phase", "random")
MAX_STEPS = 1  # one draft per run: the sweep is under test here, not the search


def _row(competition="comp-a", policy="two_phase", seed=0, score=None, **fields) -> dict:
    report = CompetitionReport(
        competition_id=competition, score=score, is_lower_better=False, submission_path=f"/runs/{seed}/s.csv",
        submission_exists=score is not None, valid_submission=score is not None, **fields,
    )
    return sweep.report_row(report, policy=policy, seed=seed, run_dir=f"/runs/{competition}-{policy}-s{seed}")


def _sweep_main(argv: list[str]) -> int:
    """`swarm-evo sweep ...` through swarm_evo.cli.commands.main once `sweep` is wired there, else
    through this module's parser with the same sub-command."""
    from swarm_evo.cli import commands as cli
    from swarm_evo.cli.sweep_cli import add_sweep_parser, run_sweep

    parser = cli._parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if "sweep" in sub.choices:
        return cli.main(argv)
    standalone = argparse.ArgumentParser(prog="swarm-evo")
    add_sweep_parser(standalone.add_subparsers(dest="command", required=True))
    return run_sweep(standalone.parse_args(argv))


# ---------------------------------------------------------------------------------------------
# Pure: statistics, rows, files


def test_summary_numbers_match_hand_computed_ones():
    rows = [
        # comp-a / two_phase: 3 seeds, scores 0.80 0.85 0.90, one medal (gold), two above median
        _row(seed=2, score=0.90, any_medal=True, gold_medal=True, above_median=True),
        _row(seed=0, score=0.80),
        _row(seed=1, score=0.85, above_median=True),
        # comp-a / greedy: one scored run and one invalid submission
        _row(policy="greedy", seed=0, score=0.70, above_median=True),
        _row(policy="greedy", seed=1, score=None, error="submission has 3 rows, expected 4"),
        # comp-b / random: a run that crashed before grading
        sweep.failed_row("comp-b", is_lower_better=True, policy="random", seed=0, run_dir="/runs/x", error="boom"),
    ]
    summary = sweep.summarize(rows)
    assert list(summary) == ["comp-a", "comp-b"] and list(summary["comp-a"]) == ["two_phase", "greedy"]

    two = summary["comp-a"]["two_phase"]
    assert {k: two[k] for k in ("runs", "valid_submissions", "any_medal", "gold_medal", "silver_medal",
                                "above_median", "scored_runs", "failed_runs")} == {
        "runs": 3, "valid_submissions": 3, "any_medal": 1, "gold_medal": 1, "silver_medal": 0,
        "above_median": 2, "scored_runs": 3, "failed_runs": 0}
    assert two["seeds"] == [0, 1, 2] and two["scores"] == [0.80, 0.85, 0.90]
    # mean 0.85; sample sd = sqrt(((-.05)^2 + 0 + .05^2) / 2) = 0.05; SEM = 0.05 / sqrt(3)
    assert two["score_mean"] == pytest.approx(0.85)
    assert two["score_sem"] == pytest.approx(0.05 / math.sqrt(3)) == pytest.approx(0.028867513)
    assert two["score_sem"] == pytest.approx(stats.sem([0.80, 0.85, 0.90]))  # scipy: ddof=1

    greedy = summary["comp-a"]["greedy"]
    assert (greedy["runs"], greedy["valid_submissions"], greedy["above_median"], greedy["scored_runs"]) == (2, 1, 1, 1)
    assert greedy["scores"] == [0.70, None]
    assert greedy["score_mean"] == pytest.approx(0.70) and greedy["score_sem"] is None  # one score: no SEM

    crashed = summary["comp-b"]["random"]
    assert crashed["runs"] == 1 and crashed["failed_runs"] == 1 and crashed["valid_submissions"] == 0
    assert crashed["score_mean"] is None and crashed["score_sem"] is None and crashed["is_lower_better"] is True

    table = sweep.summary_table(summary)
    assert [(r["competition"], r["policy"]) for r in table] == [
        ("comp-a", "two_phase"), ("comp-a", "greedy"), ("comp-b", "random")]
    assert table[0]["score (mean ± SEM)"] == "0.85000 ± 0.02887"
    assert table[1]["score (mean ± SEM)"] == "0.70000" and table[2]["score (mean ± SEM)"] == "-"


def test_mean_and_sem():
    assert sweep.mean_and_sem([]) == (None, None)
    assert sweep.mean_and_sem([3.0]) == (3.0, None)
    mean, sem = sweep.mean_and_sem([1.0, 2.0, 4.0, 7.0])
    assert mean == pytest.approx(3.5) and sem == pytest.approx(stats.sem([1.0, 2.0, 4.0, 7.0]))
    assert sem == pytest.approx(math.sqrt(((2.5**2) + 1.5**2 + 0.5**2 + 3.5**2) / 3) / 2)


def test_rows_and_files(tmp_path):
    rows = [_row(seed=0, score=0.5), _row(seed=1, score=0.7),
            sweep.failed_row("comp-a", is_lower_better=False, policy="two_phase", seed=2,
                             run_dir=tmp_path / "r2", error="flow run ended Crashed: killed")]
    summary = sweep.write_outputs(rows, tmp_path / "out")
    lines = (tmp_path / "out" / sweep.REPORTS_FILE).read_text().splitlines()
    # NaN (absent thresholds, as MLE-bench's from_dict loads them) != NaN: compare the JSON texts
    assert [json.dumps(json.loads(line)) for line in lines] == [json.dumps(r) for r in rows]
    for line in lines:
        row = json.loads(line)
        assert list(row)[-3:] == ["policy", "seed", "run_dir"]
        report = CompetitionReport.model_validate({k: v for k, v in row.items() if k not in sweep.ROW_EXTRA_FIELDS})
        assert set(row) == set(CompetitionReport.model_fields) | set(sweep.ROW_EXTRA_FIELDS)
        assert report.competition_id == "comp-a" and report.gold_threshold is None
        assert competition_report_from_dict(row)["competition_id"] == "comp-a"  # MLE-bench loads it
    assert json.loads((tmp_path / "out" / sweep.SUMMARY_FILE).read_text()) == summary == sweep.summarize(rows)
    assert rows[2]["error"] == "run failed: flow run ended Crashed: killed" and sweep.is_failed_row(rows[2])
    assert rows[2]["submission_exists"] is False and rows[2]["score"] is None
    assert not sweep.is_failed_row(_row(score=None, error="submission has no id column"))


def test_parsing_inputs():
    assert sweep.parse_seeds(3) == [0, 1, 2] and sweep.parse_seeds("2") == [0, 1]
    assert sweep.parse_seeds([5, 7]) == [5, 7] and sweep.parse_seeds("4,1") == [4, 1]
    for bad, words in ((0, "must be >= 1"), ("x", "count N"), ([1, 1], "twice"), ([-1], "negative"), ([], "empty")):
        with pytest.raises(sweep.SweepError, match=words):
            sweep.parse_seeds(bad)
    assert sweep.parse_names(" a, b ,a,", "competitions") == ["a", "b"]
    with pytest.raises(sweep.SweepError, match="competitions is empty"):
        sweep.parse_names(" , ", "competitions")
    assert sweep.parse_policies(None) == ["two_phase"] and sweep.parse_policies("random,greedy") == ["random", "greedy"]
    with pytest.raises(sweep.SweepError, match="unknown policy 'aide'"):
        sweep.parse_policies("aide")
    with pytest.raises(sweep.SweepError, match="not supported"):
        sweep.parse_policies("greedy", supported=("two_phase",))
    assert sweep.plan(["a", "b"], ["p"], [0, 1]) == [("a", "p", 0), ("a", "p", 1), ("b", "p", 0), ("b", "p", 1)]
    assert sweep.run_name("/data/my-comp", "greedy", 3) == "my-comp-greedy-s3"


# ---------------------------------------------------------------------------------------------
# A real sweep


@pytest.fixture(scope="module")
def sweep_data(tmp_path_factory):
    from swarm_evo.competition import prepare_competition

    data = tmp_path_factory.mktemp("sweep-data")
    for competition_id in COMPETITIONS:
        prepare_competition(competition_id, None, data)
    return data


@pytest.fixture(scope="module")
def cli_sweep(prefect_server, sweep_data, tmp_path_factory):
    """`swarm-evo sweep` on 2 competitions x 2 policies x 2 seeds, 1 node per run, 2 runs at once."""
    from flows.benchmark_sweep import supported_policies

    if not set(POLICIES) <= set(supported_policies()):
        pytest.fail(f"two_phase_evo accepts only the policies {supported_policies()}: the sweep needs {POLICIES}")
    tmp = tmp_path_factory.mktemp("sweep")
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump({
        "search": {"steps_per_epoch": 1, "phase1_target_nodes": 1, "parallel_workers": 1},
        "model": {"fault_rate": 0.0},
        "sandbox": {"exec_timeout": 19},  # the offline model writes quick-tier programs for a 19 s limit
    }))
    out = tmp / "out"
    code = _sweep_main([
        "sweep", "--data-dir", str(sweep_data), "--competitions", ",".join(COMPETITIONS), "--seeds", str(SEEDS),
        "--policies", ",".join(POLICIES), "--max-steps", str(MAX_STEPS), "--model", "offline", "--out", str(out),
        "--config", str(config), "--parallel-runs", "2",
    ])
    return code, out


def test_sweep_writes_reports_and_a_summary_that_match_the_runs(cli_sweep):
    code, out = cli_sweep
    assert code == 0
    lines = [json.loads(line) for line in (out / sweep.REPORTS_FILE).read_text().splitlines()]
    expected_order = [(c, p, s) for c in COMPETITIONS for p in POLICIES for s in range(SEEDS)]
    assert [(r["competition_id"], r["policy"], r["seed"]) for r in lines] == expected_order

    by_group: dict[tuple[str, str], list[dict]] = {}
    for row in lines:
        run_dir = out / "runs" / f"{row['competition_id']}-{row['policy']}-s{row['seed']}"
        assert row["run_dir"] == str(run_dir)
        grade = json.loads((run_dir / "grade_report.json").read_text())  # the run's own grading
        assert {k: v for k, v in row.items() if k not in ("policy", "seed", "run_dir")} == grade
        journal = json.loads((run_dir / "journal.json").read_text())
        assert journal["info"]["policy"] == row["policy"] and len(journal["nodes"]) == MAX_STEPS
        assert journal["info"]["seed"] == row["seed"]
        by_group.setdefault((row["competition_id"], row["policy"]), []).append(grade)

    summary = json.loads((out / sweep.SUMMARY_FILE).read_text())
    assert sorted((c, p) for c in summary for p in summary[c]) == sorted(by_group)
    for (competition_id, policy), grades in by_group.items():
        stats_ = summary[competition_id][policy]
        scores = [g["score"] for g in grades if g["score"] is not None]
        assert stats_["runs"] == len(grades) == SEEDS
        assert stats_["valid_submissions"] == sum(g["valid_submission"] for g in grades)
        assert stats_["any_medal"] == sum(g["any_medal"] for g in grades)
        assert stats_["above_median"] == sum(g["above_median"] for g in grades)
        assert stats_["score_mean"] == pytest.approx(sum(scores) / len(scores))
        assert stats_["score_sem"] == pytest.approx(stats.sem(scores))
        assert stats_["failed_runs"] == 0
    # the offline model's programs run: every run submits a valid file
    assert all(g["valid_submission"] for grades in by_group.values() for g in grades)


def test_sweep_is_recorded_in_prefect(cli_sweep):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterKey,
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterName,
    )

    _, out = cli_sweep
    names = {f"{c}-{p}-s{s}" for c in COMPETITIONS for p in POLICIES for s in range(SEEDS)}

    async def read():  # (the session's server holds the other tests' runs too)
        async with get_client() as client:
            sweeps = await client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["benchmark-sweep"])))
            runs = await client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=sorted(names))))
            artifacts = await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["benchmark-sweep"])))
            return sweeps, runs, artifacts

    sweeps, runs, artifacts = asyncio.run(read())
    sweep_runs = [r for r in sweeps if r.parameters.get("out_dir") == str(out)]
    assert len(sweep_runs) == 1 and sweep_runs[0].state.is_completed()
    children = [r for r in runs if r.name in names and r.parameters.get("run_dir", "").startswith(str(out))]
    assert {r.name for r in children} == names
    assert all(r.state.is_completed() for r in children)

    async def parents():
        async with get_client() as client:
            return {(await client.read_task_run(r.parent_task_run_id)).flow_run_id for r in children}

    assert asyncio.run(parents()) == {sweep_runs[0].id}, "each run is a subflow of the sweep"
    table = next(a for a in artifacts if a.flow_run_id == sweep_runs[0].id)
    data = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert [(r["competition"], r["policy"]) for r in data] == [(c, p) for c in COMPETITIONS for p in POLICIES]
    summary = json.loads((out / sweep.SUMMARY_FILE).read_text())
    for row in data:
        group = summary[row["competition"]][row["policy"]]
        assert row["runs"] == group["runs"] and row["valid submissions"] == group["valid_submissions"]
        assert row["score (mean ± SEM)"] == sweep.format_score(group["score_mean"], group["score_sem"])


def test_a_failed_run_is_a_row_without_a_submission_and_exit_1(cli_sweep, sweep_data, tmp_path, capsys):
    """A run that fails (here: its run directory holds a journal of another policy, which
    two_phase_evo refuses to continue) is reported, not lost: a row with no submission and
    ``error: "run failed: ..."``, counted in the summary; the sweep itself completes."""
    import shutil

    _, first = cli_sweep
    out = tmp_path / "out"
    taken = out / "runs" / "sklearn-diabetes-two_phase-s0"
    taken.mkdir(parents=True)
    shutil.copy(first / "runs" / "sklearn-diabetes-random-s0" / "journal.json", taken / "journal.json")
    code = _sweep_main(["sweep", "--data-dir", str(sweep_data), "--competitions", "sklearn-diabetes", "--seeds", "1",
                        "--max-steps", "1", "--model", "offline", "--out", str(out)])
    assert code == 1
    err = capsys.readouterr().err
    assert f"run {taken}: run failed: flow run ended Failed" in err and "random" in err
    (row,) = [json.loads(line) for line in (out / sweep.REPORTS_FILE).read_text().splitlines()]
    assert row["competition_id"] == "sklearn-diabetes" and row["is_lower_better"] is True
    assert (row["submission_exists"], row["valid_submission"], row["score"]) == (False, False, None)
    assert row["error"].startswith("run failed: flow run ended Failed")
    stats_ = json.loads((out / sweep.SUMMARY_FILE).read_text())["sklearn-diabetes"]["two_phase"]
    assert (stats_["runs"], stats_["failed_runs"], stats_["valid_submissions"], stats_["score_mean"]) == (1, 1, 0, None)


# ---------------------------------------------------------------------------------------------
# The command line's bad input: exit 2, one line naming the field and the fix


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"--seeds": "0"}, ["--seeds must be >= 1"]),
        ({"--seeds": "two"}, ["--seeds must be a count"]),
        ({"--policies": "two_phase,aide"}, ["--policies", "unknown policy 'aide'", "two_phase, greedy, random"]),
        ({"--competitions": " , "}, ["--competitions is empty"]),
        ({"--competitions": "sklearn-wine"}, ["--competitions", "swarm-evo prepare sklearn-wine --data-dir"]),
        ({"--competitions": "spaceship-titanic"}, ["swarm-evo prepare spaceship-titanic --raw-dir RAW_DIR"]),
        ({"--max-steps": "0"}, ["--max-steps must be >= 1"]),
        ({"--parallel-runs": "0"}, ["--parallel-runs must be >= 1"]),
        ({"--data-dir": "/nonexistent/data"}, ["--data-dir /nonexistent/data is not a directory"]),
        ({"--model": "nosuchprovider/model-x"}, ["nosuchprovider/model-x"]),
    ],
)
def test_cli_bad_input_is_exit_2_with_one_line(prefect_server, sweep_data, tmp_path, capsys, change, words):
    options = {"--data-dir": str(sweep_data), "--competitions": ",".join(COMPETITIONS), "--seeds": "2",
               "--policies": "two_phase", "--max-steps": "2", "--model": "offline", "--out": str(tmp_path / "out")}
    options.update(change)
    argv = ["sweep", *[item for pair in options.items() for item in pair]]
    assert _sweep_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("swarm-evo: error: "), err
    for word in words:
        assert word in err, err
    assert not (tmp_path / "out").exists(), "bad input is reported before anything is written"


def test_cli_deployment_that_does_not_exist(prefect_server, sweep_data, tmp_path, capsys):
    argv = ["sweep", "--data-dir", str(sweep_data), "--competitions", COMPETITIONS[0], "--out", str(tmp_path / "o"),
            "--deployment", "nowhere"]
    assert _sweep_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "two-phase-evo/nowhere not found" in err and "prefect deploy -n nowhere" in err
    assert _sweep_main([*argv[:-1], "evaluate-program/default"]) == 2
    assert "give a deployment of two-phase-evo" in capsys.readouterr().err


def test_mlebench_files_hold_only_competitions_mlebench_knows(tmp_path):
    """Runs whose competition MLE-bench knows wrote RUN_DIR/mlebench_submission.jsonl: the sweep
    gathers those lines (``mlebench grade --submission``) and MLE-bench's run-group report; a
    competition MLE-bench does not know (sklearn-wine) stays out of both."""
    known, unknown = tmp_path / "spaceship-s0", tmp_path / "wine-s0"
    for run in (known, unknown):
        run.mkdir()
    (known / "mlebench_submission.jsonl").write_text(
        json.dumps({"competition_id": "spaceship-titanic", "submission_path": str(known / "s.csv")}) + "\n")
    rows = [
        sweep.report_row(CompetitionReport(competition_id="spaceship-titanic", score=0.8, valid_submission=True,
                                           submission_exists=True, is_lower_better=False, gold_medal=True,
                                           any_medal=True, submission_path=str(known / "s.csv")),
                         policy="two_phase", seed=0, run_dir=known),
        sweep.report_row(CompetitionReport(competition_id="sklearn-wine", score=0.1, valid_submission=True,
                                           submission_exists=True, is_lower_better=True,
                                           submission_path=str(unknown / "s.csv")),
                         policy="two_phase", seed=0, run_dir=unknown),
    ]
    sweep.write_outputs(rows, tmp_path / "out")
    lines = (tmp_path / "out" / sweep.MLEBENCH_SUBMISSIONS_FILE).read_text().splitlines()
    assert [json.loads(line)["competition_id"] for line in lines] == ["spaceship-titanic"]
    report = json.loads((tmp_path / "out" / sweep.MLEBENCH_REPORT_FILE).read_text())
    assert {k: v for k, v in report.items() if k != "competition_reports"} == {
        "total_runs": 1, "total_runs_with_submissions": 1, "total_valid_submissions": 1, "total_medals": 1,
        "total_gold_medals": 1, "total_silver_medals": 0, "total_bronze_medals": 0, "total_above_median": 0}
    assert [competition_report_from_dict(r)["competition_id"] for r in report["competition_reports"]] == [
        "spaceship-titanic"]
