"""Run integrity on a real model's bad day (issue 31, items 1 and 2), through real
``swarm-evo`` processes driving the stand-in model server over HTTP (``tests/llm_server``).

1. A reviewer that flags every program and fixes that crash at import time: the flagged nodes
   keep their own programs and files, the run ends by itself with exactly ``max_steps`` nodes,
   and the handed-in submission is an original program's, graded valid.
2. A model that went away stops the run after ``max_consecutive_failures`` failures (exit 1);
   once it is back, ``swarm-evo resume`` finishes the budget instead of stopping again at once.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from llm_server import SCENARIOS, run_swarm
from llm_server.brain import MISSPELT_IMPORTS
from llm_server.runner import run_env

MODEL = "openai/stand-in"


def _run(server, tmp_path: Path, data_dir: Path, prefect_api_url: str, **kwargs):
    return run_swarm(tmp_path / "work", data_dir, model=MODEL, api_base=server.api_base_for(MODEL),
                     prefect_api_url=prefect_api_url, **kwargs)


def test_flagged_nodes_whose_fixes_crash_keep_their_own_files_and_the_run_ends(stand_in, data_dir, tmp_path,
                                                                                prefect_api_url):
    """Before the fix (issue 31): the fix ran over the flagged node's files, the node kept its
    original code but its directory held the crashed fix without a submission, every append
    raised FileNotFoundError in the hand-in, and the run never ended (32 draft subflows and 129
    model calls in 3.5 minutes for ``--max-steps 6``, ``journal.json`` with 0 nodes)."""
    stand_in.use("broken_fixes")
    max_steps = 4
    result = _run(stand_in, tmp_path, data_dir, prefect_api_url, max_steps=max_steps, timeout=420)
    assert result.returncode == 0, result.describe()
    nodes = result.nodes
    assert len(nodes) == max_steps, result.describe()

    fixes = [r for r in stand_in.log if r.purpose == "debug"]
    assert fixes, "the flagged nodes went through the debug chain"
    flagged = [n for n in nodes if (n.get("metadata") or {}).get("facts_passed")]
    assert flagged, "some node passed every deterministic check (and was flagged by the reviewer)"
    for node in flagged:
        node_dir = result.run_dir / "nodes" / node["id"]
        assert not any(name in node["code"] for name in MISSPELT_IMPORTS), "the node keeps its original program"
        assert (node_dir / "solution.py").read_text() == node["code"], "the node directory holds the recorded program"
        assert (node_dir / "submission" / "submission.csv").is_file(), node_dir
        history = node["metadata"]["debug_history"]
        assert len(history) == 3 and all(h["exc_type"] for h in history[1:]), "both fixes crashed"
        kept_aside = sorted((result.run_dir / "attempts" / node["id"]).iterdir())
        assert [p.name for p in kept_aside] == ["2"], "the last crashed fix is kept aside for inspection"
        assert any(name in (kept_aside[0] / "solution.py").read_text() for name in MISSPELT_IMPORTS)

    hand_in = (result.run_report or {}).get("hand_in") or {}
    chosen = next(n for n in nodes if n["id"] == hand_in.get("node_id"))
    assert chosen in flagged, hand_in
    submission = result.run_dir / "submission" / "submission.csv"
    # the chosen original program's submission, or (a run on a hidden split, issue 41) that same
    # program's final fit on all training rows
    refit = (hand_in.get("final_fit") or {}).get("status") == "refit"
    source = result.run_dir / "final_fit" if refit else result.run_dir / "nodes" / chosen["id"]
    assert hand_in["final_fit"] is None or hand_in["final_fit"]["node_id"] == chosen["id"]
    assert submission.read_bytes() == (source / "submission" / "submission.csv").read_bytes()
    assert (result.run_dir / "best_solution.py").read_text() == chosen["code"]
    assert (result.grade_report or {}).get("valid_submission") is True, result.describe()


def test_resume_after_the_model_failed_again_and_again_finishes_the_budget(stand_in, data_dir, tmp_path,
                                                                           prefect_api_url):
    """Before the fix (issue 31): the resumed run read the last N journal nodes, still the old
    failures, and stopped again before its first step (exit 1, the journal unchanged)."""
    stand_in.use(SCENARIOS["tidy"].with_(model_gone_from_request=1))  # the probe answers, then 404s
    max_steps = 5
    first = _run(stand_in, tmp_path, data_dir, prefect_api_url, max_steps=max_steps, parallel_workers=1,
                 model_config={"max_consecutive_failures": 2})
    assert first.returncode == 1, first.describe()
    assert "failed 2 times in a row" in first.stderr and "swarm-evo resume" in first.stderr, first.describe()
    assert [n["exc_type"] for n in first.nodes] == ["GenerationError"] * 2

    stand_in.use("tidy")  # the model is back
    cmd = [sys.executable, "-m", "swarm_evo.cli", "resume", str(first.run_dir), "--max-consecutive-failures", "3"]
    env = run_env(tmp_path / "work", model=MODEL, api_base=stand_in.api_base_for(MODEL),
                  prefect_api_url=prefect_api_url)
    resumed = subprocess.run(cmd, env=env, cwd=tmp_path / "work", capture_output=True, text=True, timeout=420)
    assert resumed.returncode == 0, f"exit {resumed.returncode}\n{resumed.stdout[-3000:]}\n{resumed.stderr[-3000:]}"
    nodes = first.nodes  # the journal, read again
    assert len(nodes) == max_steps
    assert [n["exc_type"] == "GenerationError" for n in nodes[:2]] == [True, True]
    assert any(not n["is_buggy"] and not n["dead"] for n in nodes[2:]), "the resumed steps made valid nodes"
    assert first.journal["info"]["config"]["model"]["max_consecutive_failures"] == 3
