"""The offline model's ``evolve_agent`` answer (SPEC §9): a ``submit_agent_texts`` tool call
through the real litellm path (and through ``swarm_evo.llm.review_completion.complete_review``)."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import copy  # noqa: E402
import json  # noqa: E402

import litellm  # noqa: E402
import pytest  # noqa: E402

from swarm_evo.config import ModelConfig  # noqa: E402
from swarm_evo.llm import offline  # noqa: E402
from swarm_evo.llm.endpoint import endpoint_for  # noqa: E402
from swarm_evo.llm.review_completion import complete_review  # noqa: E402
from swarm_evo.llm.offline.evolve_agent import (  # noqa: E402
    LESSONS_TITLE,
    SUMMARY_CHARS,
    trim_summary,
)

KEYS = ("role", "draft", "merge", "mutate", "rationale")
TEXT_KEYS = ("role", "draft", "merge", "mutate")
TOOL = {"type": "function", "function": {
    "name": "submit_agent_texts", "description": "Submit the rewritten agent texts.",
    "parameters": {"type": "object", "properties": {k: {"type": "string"} for k in KEYS},
                   "required": list(KEYS)}}}
CHOICE = {"type": "function", "function": {"name": "submit_agent_texts"}}

ELITE_TEXTS = {
    "role": "You are agent one, a meticulous Kaggle engineer who validates every assumption.",
    "draft": "Prefer gradient-boosted trees with 5-fold CV.\n\nEngineer group and ratio features "
             "from the identifiers before modelling.",
    "merge": "Take the DATA section from the parent with the richest features and the MODEL "
             "section from the best-scoring parent.",
    "mutate": "Tune one hyper-parameter at a time, moving it by a factor of two.",
}
OLD_TEXTS = {
    "role": "You are a generic data scientist.",
    "draft": "Write any model.",
    "merge": "Combine the parents.",
    "mutate": "Change something.",
}
LONG_BEST = ("HistGradientBoosting on deck/side split of Cabin, group size from PassengerId, "
             "log-spend features and 5-fold stratified CV with median/mode imputation and one-hot "
             "encoding of HomePlanet and Destination")


def _stats(steps, success, quality, per=None) -> dict:
    return {"steps": steps, "success_rate": success, "mean_quality": quality,
            "score": success * quality, "per_operation": per or {}}


def _ctx(**over) -> dict:
    ctx = {
        "purpose": "evolve_agent", "seed": 7, "call_key": "evolution1:agent-3",
        "competition": {"id": "spaceship-titanic", "grader": "accuracy", "is_lower_better": False,
                        "competition_type": "simple"},
        "generation": 1,
        "agent": {"id": "agent-3", "texts": dict(OLD_TEXTS), "stats": _stats(12, 0.35, 0.4, {
            "draft": {"steps": 6, "success_rate": 0.3, "mean_quality": 0.2},
            "merge": {"steps": 2, "success_rate": 1.0, "mean_quality": 0.2},
            "mutate": {"steps": 4, "success_rate": 0.75, "mean_quality": 0.8}})},
        "elite": {"id": "agent-1", "texts": dict(ELITE_TEXTS), "stats": _stats(15, 0.9, 0.7)},
        "best_plans": [
            {"operation": "draft", "quality": 0.82, "plan_summary": LONG_BEST, "node_id": "n4"},
            {"operation": "mutate", "quality": 0.7, "plan_summary": "Raised N_ESTIMATORS to 600",
             "node_id": "n9"}],
        "worst_plans": [
            {"operation": "draft", "quality": 0.0, "plan_summary": "Used the Cabn column for deck",
             "node_id": "n2", "exc_type": "KeyError"},
            {"operation": "merge", "quality": 0.05, "plan_summary": "Merged linear DATA with NB MODEL",
             "node_id": "n6", "exc_type": None}],
    }
    ctx.update(over)
    return ctx


@pytest.fixture(scope="module", autouse=True)
def _registered():
    offline.register()


def _call(ctx: dict):
    return litellm.completion(model="offline/test", messages=[{"role": "user", "content": "evolve"}],
                              metadata={"swarm_evo": ctx}, num_retries=0, tools=[TOOL], tool_choice=CHOICE)


def _args(ctx: dict) -> dict:
    resp = _call(ctx)
    calls = resp.choices[0].message.tool_calls
    assert calls and len(calls) == 1
    assert calls[0].function.name == "submit_agent_texts"
    return json.loads(calls[0].function.arguments)


def test_one_tool_call_with_all_keys():
    resp = _call(_ctx())
    assert resp.choices[0].finish_reason == "tool_calls"
    assert resp.usage.completion_tokens > 0
    args = _args(_ctx())
    assert set(args) == set(KEYS)
    for k in KEYS:
        assert isinstance(args[k], str) and args[k].strip()


def test_complete_review_with_offline_endpoint():
    endpoint = endpoint_for(ModelConfig(name="offline", num_retries=0))
    reply = complete_review(endpoint, "Rewrite agent-3.", TOOL, _ctx())
    args, usage, error = reply.arguments, reply.usage, reply.error
    assert error is None and reply.mode == "tool_call" and reply.source == "tool_call"
    assert set(args) == set(KEYS)
    assert usage.calls == 1 and usage.completion_tokens > 0
    assert args == _args(_ctx())


def test_texts_change_keep_elite_substance_and_carry_lessons():
    args = _args(_ctx())
    for k in TEXT_KEYS:
        assert args[k] != OLD_TEXTS[k]
        assert args[k].startswith(ELITE_TEXTS[k])  # the elite's text is kept whole
    assert args["role"].endswith("(strategy generation 1, evolved from agent-1)")
    for op in ("draft", "merge", "mutate"):
        assert args[op].count(LESSONS_TITLE) == 1
        assert "(generation 1)" in args[op]
    draft = args["draft"]
    trimmed = trim_summary(LONG_BEST)
    assert len(trimmed) <= SUMMARY_CHARS and trimmed.endswith("…")
    assert trimmed in draft and LONG_BEST not in draft
    assert "Used the Cabn column for deck (failed with KeyError)" in draft
    assert "Merged linear DATA with NB MODEL (quality 0.05)" in args["merge"]
    # the plans of the operation come first; other operations' plans are labelled
    assert "[draft] " + trimmed in args["mutate"]
    assert args["mutate"].index("Raised N_ESTIMATORS to 600") < args["mutate"].index("[draft] " + trimmed)
    assert "agent-1" in args["rationale"] and "agent-3" in args["rationale"]
    assert args["rationale"].count(". ") <= 2


def test_stats_set_the_emphasis():
    args = _args(_ctx())
    # draft: success 0.3 < 0.5 -> reliability; merge: success 1.0, quality 0.2 -> quality
    assert "0.30" in args["draft"] and "column" in args["draft"].lower()
    assert "0.20" in args["merge"] and "hyper-parameters" in args["merge"]
    assert "0.80" in args["mutate"]
    assert "reliability" in args["rationale"]
    good = _ctx(agent={"id": "agent-2", "texts": dict(OLD_TEXTS), "stats": _stats(20, 0.95, 0.3)})
    args = _args(good)
    for op in ("draft", "merge", "mutate"):
        assert "hyper-parameters" in args[op]
        assert f"your steps so far (none was a {op} step)" in args[op]
    assert "quality" in args["rationale"]


def test_deterministic_and_varied_wording():
    assert _args(_ctx()) == _args(copy.deepcopy(_ctx()))
    variants = {json.dumps(_args(_ctx(call_key=f"evolution1:agent-{i}"))) for i in range(8)}
    assert len(variants) > 1
    other = _args(_ctx(agent={"id": "agent-4", "texts": dict(OLD_TEXTS), "stats": _stats(12, 0.35, 0.4)},
                       call_key="evolution1:agent-4"))
    assert set(other) == set(KEYS) and "agent-4" in other["rationale"]


def test_lessons_are_replaced_not_stacked_across_generations():
    args = _args(_ctx())
    lengths = []
    for gen in range(2, 7):
        evolved = {k: args[k] for k in TEXT_KEYS}
        ctx = _ctx(generation=gen, call_key=f"evolution{gen}:agent-3",
                   agent={"id": "agent-3", "texts": evolved, "stats": _stats(12, 0.35, 0.4)},
                   elite={"id": "agent-3", "texts": evolved, "stats": _stats(12, 0.35, 0.4)})
        new = _args(ctx)
        for k in TEXT_KEYS:
            assert new[k] != evolved[k]
            assert new[k].startswith(ELITE_TEXTS[k])
        for op in ("draft", "merge", "mutate"):
            assert new[op].count(LESSONS_TITLE) == 1
            assert f"(generation {gen})" in new[op] and f"(generation {gen - 1})" not in new[op]
        assert new["role"].count("(strategy generation") == 1
        assert new["role"].count("Current focus:") == 1
        assert new["role"].endswith(f"(strategy generation {gen}, evolved from agent-3)")
        lengths.append(sum(len(new[k]) for k in TEXT_KEYS))
        args = new
    assert max(lengths) - min(lengths) < 600  # bounded, not growing per generation


def test_lessons_from_a_real_model_block_in_the_elite_are_replaced():
    elite = dict(ELITE_TEXTS)
    elite["draft"] += "\n\n## Lessons from your history\n\n- something agent-1 learned\n\n## Checklist\n\nPrint the metric."
    args = _args(_ctx(elite={"id": "agent-1", "texts": elite, "stats": _stats(15, 0.9, 0.7)}))
    assert "something agent-1 learned" not in args["draft"]
    assert "## Checklist\n\nPrint the metric." in args["draft"]
    assert args["draft"].count(LESSONS_TITLE) == 1


def test_length_bounds_with_huge_inputs():
    huge = {k: ("Paragraph about " + k + " strategy. " * 40 + "\n\n") * 30 for k in TEXT_KEYS}
    plans = [{"operation": op, "quality": 0.5, "plan_summary": "x " * 2000, "node_id": f"n{i}",
              "exc_type": "ValueError"} for i, op in enumerate(("draft", "merge", "mutate"))]
    args = _args(_ctx(elite={"id": "agent-1", "texts": huge, "stats": _stats(15, 0.9, 0.7)},
                      best_plans=plans, worst_plans=plans))
    for k in TEXT_KEYS:
        assert 0 < len(args[k]) < 4000
        assert args[k].startswith("Paragraph about " + k)
    for op in ("draft", "merge", "mutate"):
        assert LESSONS_TITLE in args[op] and "(failed with ValueError)" in args[op]
        assert all(len(line) < SUMMARY_CHARS + 40 for line in args[op].splitlines() if line.startswith("- "))
    assert args["role"].endswith("(strategy generation 1, evolved from agent-1)")
    assert len(args["rationale"]) < 400


@pytest.mark.parametrize("over", [
    {"best_plans": [], "worst_plans": []},
    {"best_plans": None, "worst_plans": None},
    {"worst_plans": []},
    {"elite": None},
    {"elite": {"id": "agent-1", "texts": {}, "stats": {}}},
    {"agent": {"id": "agent-3", "texts": {}, "stats": {}}, "elite": None, "best_plans": None},
])
def test_missing_inputs_are_handled(over):
    args = _args(_ctx(**over))
    assert set(args) == set(KEYS)
    for k in KEYS:
        assert isinstance(args[k], str) and args[k].strip()
    for op in ("draft", "merge", "mutate"):
        assert args[op].count(LESSONS_TITLE) == 1
    assert "(strategy generation 1, evolved from " in args["role"]
    ctx = _ctx(**over)
    if not ctx["best_plans"] and not ctx["worst_plans"]:
        assert "No plan summaries were recorded yet" in args["draft"]
    else:
        assert "No plan summaries were recorded yet" not in args["draft"]
    if over.get("elite") is None and "elite" in over:
        assert args["role"].endswith("evolved from agent-3)")
