"""Run report (swarm_evo.reporting.run_report): operation rates, agents, Phase 2 start, JSON file, rows."""

from __future__ import annotations

import json

import factories
import pytest

from swarm_evo.operators import registry
from swarm_evo.population import genes as G
from swarm_evo.population.journal import Journal
from swarm_evo.population.node import Node
from swarm_evo.reporting.run_report import (
    STAT_KEYS,
    agent_rows,
    attempt_succeeded,
    build_run_report,
    operation_stats,
    run_report_rows,
    write_run_report,
)
from swarm_evo.sandbox import ExecutionResult
from swarm_evo.search.debug_chain import Attempt, run_debug_chain


def program() -> str:
    body = {l: f"value_{l.lower()} = compute_{l.lower()}(alpha=1)\n" for l in G.LOCI}
    return "import numpy as np\n" + "".join(f"# [SECTION: {l}]\n{body[l]}" for l in G.LOCI)


def _attempt(n: int, ok: bool) -> Attempt:
    error = None if ok else f"KeyError in v{n}"
    result = ExecutionResult(
        term_out=error or "Validation metric: 0.5", exit_code=0 if ok else 1,
        exc_type=None if ok else "KeyError", exc_info=error, exec_time=0.1,
    )
    return Attempt(attempt=n, code=f"v{n}", result=result, problems=[] if ok else [error])


def chained(outcomes: list[bool], max_attempts: int = 2) -> dict:
    """Run the real debug chain: ``outcomes[k]`` is whether execution k succeeds."""
    outcome = run_debug_chain(_attempt(0, outcomes[0]), max_attempts, lambda n, prev: _attempt(n, outcomes[n]))
    return {
        "dead": outcome.dead,
        "debug_attempts": outcome.attempts,
        "metadata": {"debug_history": outcome.history},
    }


def make_node(metric=0.5, *, buggy=False, chain=None, lower_is_better=False, **kw) -> Node:
    chain = chain or {}
    dead = chain.get("dead", kw.pop("dead", False))
    return factories.make_node(
        metric, lower_is_better, is_buggy=buggy or dead, dead=dead, code=program(),
        debug_attempts=chain.get("debug_attempts", 0),
        metadata={**chain.get("metadata", {}), **kw.pop("metadata", {})},
        **kw,
    )


def five_drafts() -> Journal:
    """5 drafts: first-try success, fixed at attempt 1, fixed at attempt 2, dead after 2,
    buggy by review without a failed execution."""
    j = Journal()
    j.append(make_node(0.8))
    j.append(make_node(0.6, chain=chained([False, True])))
    j.append(make_node(0.7, chain=chained([False, False, True])))
    j.append(make_node(None, chain=chained([False, False, False])))
    j.append(make_node(None, buggy=True))
    return j


def test_operation_rates_hand_computed():
    j = five_drafts()
    # the real chain's histories: attempts 0..debug_attempts, success = empty problems
    hist = [n.metadata.get("debug_history") for n in j.nodes]
    assert hist[0] is None or hist[0] == []
    assert [h["attempt"] for h in hist[2]] == [0, 1, 2]
    assert [bool(h["problems"]) for h in hist[3]] == [True, True, True]
    assert j.nodes[3].dead and j.nodes[3].debug_attempts == 2

    s = operation_stats(j, "draft")
    assert s["count"] == 5
    assert s["buggy_rate"] == pytest.approx(2 / 5)
    assert s["dead_rate"] == pytest.approx(1 / 5)
    # debugged: nodes 2, 3, 4 -> only node 2 fixed at attempt 1
    assert s["debug_fix_rate_1"] == pytest.approx(1 / 3)
    # reached attempt 2: nodes 3, 4 -> node 3 fixed
    assert s["debug_fix_rate_2"] == pytest.approx(1 / 2)
    assert s["scored"] == 3
    assert s["mean_fitness"] == pytest.approx((0.8 + 0.6 + 0.7) / 3)
    assert s["mean_metric"] == pytest.approx((0.8 + 0.6 + 0.7) / 3)
    assert set(s) == set(STAT_KEYS)


def test_unused_operation_has_count_zero_and_none_rates():
    s = operation_stats(five_drafts(), "merge")
    assert s["count"] == 0 and s["scored"] == 0
    assert all(s[k] is None for k in STAT_KEYS if k not in ("count", "scored"))


def test_failures_without_debug_are_in_no_debug_denominator():
    j = Journal()
    # debug_max_attempts 0: failed, dead, no attempts, no history
    j.append(make_node(None, chain=chained([False], max_attempts=0), operation="mutate", phase=2))
    j.append(make_node(0.4, operation="mutate", phase=2))
    s = operation_stats(j, "mutate")
    assert s["dead_rate"] == 0.5 and s["buggy_rate"] == 0.5
    assert s["debug_fix_rate_1"] is None and s["debug_fix_rate_2"] is None


def test_attempt_outcome_falls_back_to_chain_rules_without_problems():
    # older history entries ({code, exc_type, term_out}) carry no ``problems``
    old = make_node(0.5, chain={"dead": False, "debug_attempts": 2,
                                "metadata": {"debug_history": [{"attempt": k, "code": "x"} for k in range(3)]}})
    assert [attempt_succeeded(old, k) for k in range(4)] == [False, False, True, None]
    dead = make_node(None, dead=True, chain={"dead": True, "debug_attempts": 1})
    assert [attempt_succeeded(dead, k) for k in range(3)] == [False, False, None]
    # a fixed execution later judged buggy by the review still counts as a fix
    j = Journal()
    j.append(make_node(None, buggy=True, chain=chained([False, True])))
    assert operation_stats(j, "draft")["debug_fix_rate_1"] == 1.0


def test_mean_fitness_is_direction_aware():
    j = Journal()
    j.append(make_node(0.2, lower_is_better=True, operation="mutate", phase=2))
    j.append(make_node(0.4, lower_is_better=True, operation="mutate", phase=2))
    j.append(make_node(9.9, lower_is_better=True, buggy=True, operation="mutate", phase=2))  # not scored
    s = operation_stats(j, "mutate")
    assert s["mean_fitness"] == pytest.approx(-0.3)
    assert s["mean_metric"] == pytest.approx(0.3)
    assert s["scored"] == 2


def test_phase2_start_none_then_set():
    j = five_drafts()
    report = build_run_report(j, [])
    assert report["phase2_started_at_step"] is None
    assert set(report["operations"]) == set(registry.listed_operations())
    assert report["operations"]["merge"]["count"] == 0
    j.append(make_node(0.9, operation="merge", phase=2))
    j.append(make_node(0.3, operation="mutate", phase=2))
    report = build_run_report(j, [])
    assert report["phase2_started_at_step"] == 6
    assert report["operations"]["merge"]["count"] == 1


def test_report_totals_and_best():
    j = five_drafts()
    for n, agent in zip(j.nodes, ["a0", "a0", "a1", None, "a9"]):
        n.agent_id = agent
    j.nodes[0].metadata["quality"] = 1.0
    j.nodes[1].metadata["quality"] = 0.5
    evolutions = [{"epoch": 3, "replaced": ["a1"], "elite": "a0"}]
    report = build_run_report(j, evolutions, agent_ids=["a0", "a1", "a2"])
    assert (report["nodes"], report["valid"], report["dead"], report["buggy"]) == (5, 3, 1, 2)
    best = j.nodes[0]
    assert report["best"] == {"node_id": best.id, "step": 1, "operation": "draft", "agent_id": "a0", "score": 0.8,
                              "metric": 0.8}
    assert report["score_name"] == "validation metric"
    assert report["agent_evolutions"] is evolutions
    # idle agent a2 appears with 0; unknown a9 after the listed ones; None under "none" last
    assert report["steps_per_agent"] == {"a0": 2, "a1": 1, "a2": 0, "a9": 1, "none": 1}
    assert list(report["steps_per_agent"]) == ["a0", "a1", "a2", "a9", "none"]
    assert report["max_agent_share"] == pytest.approx(2 / 5)
    assert report["agents"]["a0"] == {"steps": 2, "share": 0.4, "valid": 2, "mean_quality": 0.75}
    assert report["agents"]["a2"] == {"steps": 0, "share": 0.0, "valid": 0, "mean_quality": None}

    rows = agent_rows(report)
    assert [r["agent_id"] for r in rows] == ["a0", "a1", "a2", "a9", "none"]
    assert rows[0] == {"agent_id": "a0", "steps": 2, "share": 0.4, "valid": 2, "mean_quality": 0.75}
    assert rows[2]["steps"] == 0 and rows[2]["mean_quality"] is None


def test_no_agents_and_empty_journal():
    empty = build_run_report(Journal(), [], agent_ids=["a0"])
    assert empty["nodes"] == 0 and empty["best"] is None
    assert empty["steps_per_agent"] == {"a0": 0}
    assert empty["agents"]["a0"]["share"] is None
    assert empty["max_agent_share"] is None
    assert empty["phase2_started_at_step"] is None
    # nodes without agents: only the "none" bucket, which is not an agent
    report = build_run_report(five_drafts(), [])
    assert report["steps_per_agent"] == {"none": 5}
    assert report["max_agent_share"] is None


def test_operation_rows_are_rounded():
    report = build_run_report(five_drafts(), [])
    rows = run_report_rows(report)
    assert [r["operation"] for r in rows] == list(registry.listed_operations())
    draft = rows[0]
    assert list(draft) == ["operation", *STAT_KEYS]
    assert draft["count"] == 5
    assert draft["debug_fix_rate_1"] == 0.3333
    assert draft["debug_fix_rate_2"] == 0.5
    assert draft["mean_fitness"] == 0.7
    assert rows[1] == {"operation": "merge", "count": 0, "scored": 0,
                       **{k: None for k in STAT_KEYS if k not in ("count", "scored")}}


def test_json_written_atomically_and_reread(tmp_path):
    j = five_drafts()
    j.append(make_node(0.9, operation="merge", phase=2, agent_id="a1"))
    report = build_run_report(j, [{"epoch": 3, "replaced": ["a0"]}], agent_ids=["a0", "a1"])
    path = tmp_path / "run" / "run_report.json"
    write_run_report(path, report)
    assert [p.name for p in path.parent.iterdir()] == ["run_report.json"]  # no temp file left
    text = path.read_text()
    again = json.loads(text)
    assert again == report
    assert again["phase2_started_at_step"] == 6
    assert again["operations"]["mutate"]["buggy_rate"] is None
    assert '"buggy_rate": null' in text and text.startswith('{\n  "nodes"')


def test_prices_for_the_offline_model_are_called_out():
    """Prices configured while every model of the run is the free offline model apply to no
    call: the final report says so (issue 54, item 7); a priced real model gets no note."""
    from swarm_evo.config import RunConfig
    from swarm_evo.reporting.report import final_report_markdown, offline_price_note, run_summary

    prices = {"model.input_cost_per_token": 1e-6, "model.output_cost_per_token": 2e-6}
    offline = RunConfig().with_overrides(prices).model
    note = offline_price_note(offline)
    assert note and "offline model, which is free" in note and "cost stays $0" in note
    assert offline_price_note(RunConfig().model) is None, "no prices, nothing to say"
    real_review = RunConfig().with_overrides({**prices, "model.review_name": "openai/local-reviewer"}).model
    assert offline_price_note(real_review) is None, "the prices can apply to the review model"
    summary = {**run_summary(five_drafts()), "price_note": note}
    assert f"**Note:** {note}." in final_report_markdown(summary)
