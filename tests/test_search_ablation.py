"""benchmarks/search_ablation.py (issue 17 item 3): the per-task analysis of a sweep summary on
fixed numbers (a clear win, a clear loss, an overlap; both score directions), its markdown and
JSON, and the script end to end through ``swarm-evo sweep`` on a tiny budget."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ablation():
    spec = importlib.util.spec_from_file_location("search_ablation", ROOT / "benchmarks" / "search_ablation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stats(scores, lower, name):
    present = [s for s in scores if s is not None]
    from swarm_evo.sweeps.sweep_stats import mean_and_sem

    mean, sem = mean_and_sem(present)
    return {"kind": "problem", "runs": len(scores), "scores": scores, "score_mean": mean, "score_sem": sem,
            "is_lower_better": lower, "score_name": name, "known_best": None}


SUMMARY = {
    # lower is better: two_phase's tours are clearly shorter than greedy's, overlap random's
    "tsp:kroA100": {
        "two_phase": _stats([21300.0, 21350.0, 21320.0], True, "tour_length"),
        "greedy": _stats([22400.0, 22500.0, 22450.0], True, "tour_length"),
        "random": _stats([21100.0, 21600.0, 21280.0], True, "tour_length"),
    },
    # higher is better: two_phase clearly loses to greedy; random has a single scored run
    "circle-packing": {
        "two_phase": _stats([2.60, 2.61, 2.605], False, "sum_of_radii"),
        "greedy": _stats([2.63, 2.631, 2.629], False, "sum_of_radii"),
        "random": _stats([None, 2.5, None], False, "sum_of_radii"),
    },
}
META = {"command": "swarm-evo sweep --problems tsp:kroA100,circle-packing ...", "wall_seconds": 90.0, "runs": 18,
        "max_steps": 30, "seeds": 3, "model": "offline", "cores": 2, "load_before": "1.00 1.00 1.00"}


def test_analysis_is_direction_aware_with_verdicts(ablation):
    tasks = {t["task"]: t for t in ablation.analyse(SUMMARY)}
    tsp = {e["policy"]: e for e in tasks["tsp:kroA100"]["policies"]}
    assert tsp["two_phase"]["comparison"] is None and tasks["tsp:kroA100"]["lower_is_better"] is True
    win = tsp["greedy"]["comparison"]
    assert win["advantage"] == pytest.approx(22450 - 21323.3333, abs=1e-3) and 0 < win["low"] <= win["high"]
    assert win["verdict"] == "better" and win["text"] == "two_phase better than greedy at this budget"
    overlap = tsp["random"]["comparison"]
    assert overlap["low"] < 0 < overlap["high"]
    assert overlap["text"] == "no difference between two_phase and random at this budget"
    packing = {e["policy"]: e for e in tasks["circle-packing"]["policies"]}
    loss = packing["greedy"]["comparison"]
    assert loss["advantage"] == pytest.approx(2.605 - 2.63) and loss["high"] < 0
    assert loss["text"] == "two_phase worse than greedy at this budget"
    few = packing["random"]["comparison"]
    assert few["verdict"] == "too few runs" and packing["random"]["scored_runs"] == 1


def test_markdown_and_json_files(ablation, tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps(SUMMARY))
    assert ablation.report(tmp_path, META) == 0
    text = (tmp_path / ablation.MARKDOWN_FILE).read_text()
    assert text.startswith(f"Command: `{META['command']}`") and "Wall time: 1.5 min (18 runs, 30 steps each" in text
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| task | score | policy | runs (scored) | mean ± SEM | two_phase better by | 95 % CI")
    assert len(table) == 1 + 6
    assert "| tsp:kroA100 | tour_length (lower is better) | greedy | 3 (3) |" in text
    assert "- circle-packing: two_phase worse than greedy at this budget" in text
    data = json.loads((tmp_path / ablation.JSON_FILE).read_text())
    assert data["command"] == META["command"] and data["reference"] == "two_phase"
    assert [t["task"] for t in data["tasks"]] == ["tsp:kroA100", "circle-packing"]


@pytest.mark.slow
def test_the_script_end_to_end_through_swarm_evo_sweep(ablation, tmp_path, capsys, monkeypatch, prefect_api_url):
    """2 seeds × (two_phase, random) × 3 steps on circle-packing through a real `swarm-evo sweep`
    subprocess (on the session API, which it inherits): the table and files describe the runs the
    sweep made."""
    monkeypatch.setenv("PREFECT_API_URL", prefect_api_url)
    out = tmp_path / "out"
    code = ablation.main(["--problems", "circle-packing", "--seeds", "2", "--max-steps", "3",
                          "--policies", "two_phase,random", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed + (out / "sweep.log").read_text()[-3000:]
    assert "$ swarm-evo sweep --problems circle-packing" in printed and "total wall time" in printed
    assert "circle-packing: " in printed and " at this budget" in printed
    rows = [json.loads(line) for line in (out / "problem_reports.jsonl").read_text().splitlines()]
    assert sorted((r["policy"], r["seed"]) for r in rows) == [("random", 0), ("random", 1),
                                                              ("two_phase", 0), ("two_phase", 1)]
    data = json.loads((out / ablation.JSON_FILE).read_text())
    (task,) = data["tasks"]
    by_policy = {e["policy"]: e for e in task["policies"]}
    for policy in ("two_phase", "random"):
        assert by_policy[policy]["scores"] == [r["score"] for r in sorted(rows, key=lambda r: r["seed"])
                                               if r["policy"] == policy and r["score"] is not None]
    assert data["max_steps"] == 3 and data["wall_seconds"] > 0 and data["exit_code"] == 0
    assert by_policy["random"]["comparison"]["verdict"] in ("better", "worse", "no difference")
    assert (out / ablation.MARKDOWN_FILE).read_text().count("| circle-packing |") == 2
