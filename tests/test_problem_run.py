"""The two-phase search on optimisation problems (SPEC §11): the same flow, the problem's own
loci, every node evaluated through the Eval Service core, offline model, no network."""

from __future__ import annotations

import json

import pytest
import yaml

from swarm_evo.cli.commands import main as cli
from swarm_evo.population.genes import parse_genes

STEPS = 6
"""Budget of the circle-packing search: one Phase 1 epoch of 3 drafts (K = 3), one Phase 2 epoch
of 3; each program runs SLSQP for seconds (issue 16: was 8 steps in epochs of 4)."""

@pytest.fixture(scope="module")
def packing_run(prefect_server, tmp_path_factory):
    from flows.two_phase_evo import two_phase_evo

    root = tmp_path_factory.mktemp("packing")
    config = root / "config.yaml"
    # one step per slot (proposal_backlog 0): Phase 1 stops at K with at most one more draft running,
    # so 6 steps reach Phase 2 whatever the order programs finish in
    config.write_text(yaml.safe_dump({"search": {"steps_per_epoch": 3, "phase1_target_nodes": 3,
                                                 "proposal_backlog": 0}}))
    run_dir = root / "run"
    summary = two_phase_evo(problem="circle-packing", run_dir=str(run_dir), model="offline", max_steps=STEPS,
                            seed=0, config_path=str(config))
    return run_dir, summary


def test_problem_run_writes_the_contract_files(packing_run):
    run_dir, summary = packing_run
    journal = json.loads((run_dir / "journal.json").read_text())
    assert journal["info"]["problem"] == "circle-packing" and "competition_id" not in journal["info"]
    nodes = journal["nodes"]
    assert len(nodes) == STEPS and {n["phase"] for n in nodes} == {1, 2}
    from swarm_evo.evaluation import load_problem

    problem = load_problem("circle-packing")
    for node in nodes:
        assert set(parse_genes(node["code"])) >= set(problem.loci), "programs carry the problem's loci"
        assert (run_dir / "nodes" / node["id"] / "results" / "metrics.json").is_file()
    initial = json.loads((run_dir / "initial_metrics.json").read_text())
    best = json.loads((run_dir / "best_metrics.json").read_text())
    for metrics in (initial, best):
        assert {"combined_score", "public", "private"} <= set(metrics)
    assert best["correct"] is True
    assert (run_dir / "best_solution.py").read_text() == max(
        (n for n in nodes if not n["is_buggy"]), key=lambda n: n["metric_value"])["code"]
    report = json.loads((run_dir / "problem_report.json").read_text())
    assert report == summary["problem_report"] and summary["grade_report"] is None
    assert report["score"] == pytest.approx(best["combined_score"])
    assert report["raw_score"] == pytest.approx(best["public"]["sum_of_radii"])
    assert report["initial_score"] == pytest.approx(initial["combined_score"])
    assert report["score"] >= report["initial_score"], f"{STEPS} offline steps already beat the initial packing"


def test_node_metric_is_the_evaluators_combined_score(packing_run):
    run_dir, _ = packing_run
    for node in json.loads((run_dir / "journal.json").read_text())["nodes"]:
        metrics = json.loads((run_dir / "nodes" / node["id"] / "results" / "metrics.json").read_text())
        if not node["is_buggy"]:
            assert metrics["correct"] is True
            assert node["metric_value"] == pytest.approx(metrics["combined_score"])
            assert node["metadata"]["evaluation"]["combined_score"] == pytest.approx(metrics["combined_score"])


def test_evaluation_agent_wrote_dynamic_auxiliary_metrics(packing_run):
    run_dir, _ = packing_run
    record = json.loads((run_dir / "auxiliary_metrics.json").read_text())
    assert record["written"] is True and record["trial"]["error"] is None, record
    assert record["trial"]["metrics"], "the offline evaluation agent's metrics ran on the initial output"
    assert "def evaluate_auxiliary_metrics" in (run_dir / "auxiliary_metrics.py").read_text()
    best = json.loads((run_dir / "best_metrics.json").read_text())
    assert "auxiliary_dynamic" in {d["source"] for d in best["auxiliary_definitions"].values()}
    assert "auxiliary_static" in {d["source"] for d in best["auxiliary_definitions"].values()}
    assert any(key.startswith("aux_") for key in best["public"])


def test_prompts_describe_the_problem_not_a_competition(packing_run):
    run_dir, _ = packing_run
    node = json.loads((run_dir / "journal.json").read_text())["nodes"][0]
    prompt = (run_dir / "nodes" / node["id"] / "prompt-draft.md").read_text()
    assert "run_packing" in prompt and "submission.csv" not in prompt and "Kaggle" not in prompt
    assert "# [SECTION: LAYOUT]" in prompt or "LAYOUT" in prompt


def test_run_directory_of_a_problem_refuses_a_competition(packing_run, data_dir):
    run_dir, _ = packing_run
    code = cli(["run", "--competition-id", "spaceship-titanic", "--data-dir", str(data_dir),
                "--run-dir", str(run_dir), "--max-steps", "1"])
    assert code == 2


def test_unknown_problem_is_bad_input(capsys):
    assert cli(["run", "--problem", "no-such-problem", "--max-steps", "1"]) == 2
    assert "no-such-problem" in capsys.readouterr().err
