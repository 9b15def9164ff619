"""Agents, the dispatcher, node quality and the experience pool (SPEC §9)."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from factories import make_node

from swarm_evo.learning.agents import AgentPool, initial_texts, text_kinds
from swarm_evo.learning.dispatcher import Dispatcher
from swarm_evo.learning.experience import (
    ExperiencePool,
    ExperienceRecord,
    plan_summary,
    record_for,
)
from swarm_evo.learning.quality import node_quality
from swarm_evo.population.journal import Journal


# ------------------------------------------------------------------ agents
def test_agents_start_identical_from_the_templates_and_live_in_the_run_dir(tmp_path):
    pool = AgentPool.open(tmp_path, 4)
    assert pool.ids == ["agent-1", "agent-2", "agent-3", "agent-4"]
    start = initial_texts()
    assert set(start) == set(text_kinds()) and all(start.values())
    assert all(a.texts == start and a.generation == 0 for a in pool.all())
    for agent_id in pool.ids:
        for kind in text_kinds():
            assert (tmp_path / "agents" / agent_id / f"{kind}.md").read_text().strip() == start[kind]


def test_rewrite_persists_and_reopens(tmp_path):
    pool = AgentPool.open(tmp_path, 2)
    new = {kind: f"new {kind} text" for kind in text_kinds()}
    agent = pool.rewrite("agent-2", new, evolved_from="agent-1", evolution=1)
    assert agent.generation == 1 and agent.evolved_from == "agent-1" and agent.history == [1]
    again = AgentPool.open(tmp_path, 2)
    assert again.get("agent-2").texts == new and again.get("agent-2").generation == 1
    assert again.get("agent-1").texts == initial_texts()
    with pytest.raises(ValueError, match="lack merge"):
        pool.rewrite("agent-1", {**new, "merge": "  "}, evolved_from="agent-2", evolution=2)
    with pytest.raises(ValueError, match="num_agents is 3"):
        AgentPool.open(tmp_path, 3)



def test_a_resumed_run_gets_the_starting_text_of_an_operation_added_since(tmp_path, monkeypatch, caplog):
    """A run began before an operation existed: its agents have no ``<operation>.md``. Reopening
    fills that text from the starting texts (saved, logged) and keeps the evolved ones (issue 55)."""
    import shutil

    from swarm_evo.learning import agents as agents_module
    from swarm_evo.prompting.prompts import templates_dir

    run = tmp_path / "run"
    pool = AgentPool.open(run, 2)
    evolved = {kind: f"evolved {kind}" for kind in text_kinds()}
    pool.rewrite("agent-2", evolved, evolved_from="agent-1", evolution=1)
    starting = tmp_path / "texts"
    shutil.copytree(templates_dir() / "agents", starting)
    (starting / "crossover.md").write_text("Cross two parents.\n")
    kinds = text_kinds()
    monkeypatch.setattr(agents_module, "text_kinds", lambda: (*kinds, "crossover"))
    with caplog.at_level("INFO", logger="swarm_evo.learning.agents"):
        again = AgentPool.open(run, 2, texts_dir=starting)
    assert again.get("agent-2").texts == {**evolved, "crossover": "Cross two parents."}
    assert again.get("agent-1").strategy("crossover") == "Cross two parents."
    assert (run / "agents" / "agent-1" / "crossover.md").read_text().strip() == "Cross two parents."
    assert "agent-1/crossover.md, agent-2/crossover.md filled from the starting texts" in caplog.text


# ------------------------------------------------------------------ dispatcher
def test_dispatcher_update_is_an_ema_per_agent_and_operation(tmp_path):
    d = Dispatcher(["a", "b"], epsilon=0.3, alpha=0.25, path=tmp_path / "d.json")
    assert d.update("a", "draft", 0.8) == pytest.approx(0.8)  # first update takes the quality
    assert d.update("a", "draft", 0.0) == pytest.approx(0.75 * 0.8)
    assert d.update("a", "draft", 1.0) == pytest.approx(0.75 * 0.6 + 0.25)
    assert d.scores["a"]["merge"] is None and d.scores["b"]["draft"] is None
    assert d.updates["a"]["draft"] == 3
    saved = json.loads((tmp_path / "d.json").read_text())
    assert saved["scores"]["a"]["draft"] == pytest.approx(0.7)
    reopened = Dispatcher.open(["a", "b"], 0.3, 0.25, tmp_path / "d.json")
    assert reopened.scores == d.scores and reopened.updates == d.updates
    with pytest.raises(ValueError):
        d.update("a", "draft", 1.5)
    with pytest.raises(ValueError):
        d.update("a", "debug", 0.5)


def test_greedy_choice_follows_the_updates():
    d = Dispatcher(["a", "b", "c"], epsilon=0.0, alpha=0.5)
    rng = random.Random(0)
    # untried agents come first: three choices cover all three
    first = set()
    for _ in range(3):
        agent = d.choose("mutate", rng)
        first.add(agent)
        d.update(agent, "mutate", {"a": 0.2, "b": 0.9, "c": 0.5}[agent])
    assert first == {"a", "b", "c"}
    assert {d.choose("mutate", rng) for _ in range(20)} == {"b"}
    # b fails twice: its EMA drops below c's and the argmax moves
    d.update("b", "mutate", 0.0)
    d.update("b", "mutate", 0.0)
    assert d.choose("mutate", rng) == "c"
    # scores are per operation: draft has no updates, so every agent is still untried there
    assert Counter(d.choose("draft", random.Random(i)) for i in range(60)).keys() == {"a", "b", "c"}


def test_reset_makes_a_rewritten_agent_untried_again():
    d = Dispatcher(["a", "b"], epsilon=0.0, alpha=0.5)
    d.update("a", "draft", 0.9)
    d.update("b", "draft", 0.1)
    assert d.choose("draft", random.Random(1)) == "a"
    d.reset("b")
    assert d.scores["b"] == {"draft": None, "merge": None, "mutate": None} and d.updates["b"]["draft"] == 1
    assert d.choose("draft", random.Random(1)) == "b"


def test_epsilon_explores_at_the_configured_rate():
    d = Dispatcher(["a", "b", "c", "d"], epsilon=0.4, alpha=0.3)
    for agent, q in zip("abcd", (1.0, 0.1, 0.1, 0.1)):
        d.update(agent, "merge", q)
    rng = random.Random(7)
    counts = Counter(d.choose("merge", rng) for _ in range(4000))
    # greedy picks a (0.6) + exploration spreads 0.4 evenly (0.1 each)
    assert counts["a"] / 4000 == pytest.approx(0.7, abs=0.03)
    assert all(counts[x] / 4000 == pytest.approx(0.1, abs=0.02) for x in "bcd")
    assert d.chosen["a"] == counts["a"]


# ------------------------------------------------------------------ quality
def test_quality_is_the_percentile_rank_among_valid_nodes():
    j = Journal()
    for metric in (0.5, 0.7, 0.6):
        j.append(make_node(metric=metric))
    best = make_node(metric=0.9)
    assert node_quality(j, best) == 1.0
    assert node_quality(j, make_node(metric=0.55)) == pytest.approx(2 / 4)
    assert node_quality(j, make_node(metric=0.1)) == pytest.approx(1 / 4)
    assert node_quality(j, make_node(metric=0.9, is_buggy=True)) == 0.0
    assert node_quality(j, make_node(metric=None)) == 0.0
    # lower is better: the smallest error is the best
    low = Journal()
    for metric in (3.0, 2.0):
        low.append(make_node(metric=metric, lower_is_better=True))
    assert node_quality(low, make_node(metric=1.0, lower_is_better=True)) == 1.0
    # a node already in the journal is not counted twice
    assert node_quality(j, j.nodes[1]) == 1.0


# ------------------------------------------------------------------ experience
def _record(op: str, quality: float, agent: str = "agent-1", node: str = "n") -> ExperienceRecord:
    return ExperienceRecord(agent_id=agent, operation=op, quality=quality, plan_summary=f"{op} {quality}", node_id=node)


def test_each_operation_queries_its_own_records(tmp_path):
    pool = ExperiencePool(tmp_path / "experience.jsonl")
    for i, (op, q) in enumerate([("draft", 0.5), ("merge", 0.9), ("mutate", 0.2), ("draft", 0.8),
                                 ("mutate", 0.0), ("merge", 0.4), ("draft", 0.0), ("draft", 0.8)]):
        pool.add(_record(op, q, node=f"n{i}"))
    assert [r.node_id for r in pool.top_k("draft", 5)] == ["n7", "n3", "n0"]  # ties: newer first; failures out
    assert [r.node_id for r in pool.top_k("merge", 5)] == ["n1", "n5"]
    assert [r.node_id for r in pool.top_k("mutate", 5)] == ["n2"]
    assert [r.node_id for r in pool.top_k("draft", 1)] == ["n7"]
    assert pool.top_k("draft", 0) == []
    reopened = ExperiencePool(tmp_path / "experience.jsonl")
    assert len(reopened) == 8 and reopened.records() == pool.records()
    assert [r.node_id for r in reopened.records(agent_id="agent-1", operation="mutate")] == ["n2", "n4"]


def test_examples_rank_by_the_quality_of_now(tmp_path):
    """Issue 13: the quality stored at append time goes stale (the first valid node scored 1.00
    forever); with the journal, examples rank and show each node's current percentile rank."""
    j = Journal()
    pool = ExperiencePool(tmp_path / "experience.jsonl")
    for i, metric in enumerate((0.6, 0.9, 0.7)):
        n = make_node(metric=metric, agent_id="agent-1", plan=f"plan {i}.")
        q = node_quality(j, n)
        j.append(n)
        pool.add(record_for(n, q))
    assert [r.quality for r in pool.records()] == [1.0, 1.0, pytest.approx(2 / 3)]  # frozen
    now = pool.examples("draft", 5, journal=j)
    assert [e["metric"] for e in now] == [0.9, 0.7, 0.6]
    assert [e["quality"] for e in now] == [1.0, pytest.approx(2 / 3), pytest.approx(1 / 3)]
    # a record whose node is not in the journal keeps its stored quality
    pool.add(_record("draft", 0.5, node="elsewhere"))
    assert [e["node_id"] for e in pool.examples("draft", 5, journal=j)][-2:] == ["elsewhere", j.nodes[0].id]


def test_record_for_a_node_summarises_its_plan():
    node = make_node(metric=0.8, approach_tag="HistGradientBoosting + target encoding",
                     plan="Use a gradient-boosted model on engineered features. Then tune it.", agent_id="agent-2")
    node.step = 5
    record = record_for(node, 0.75)
    assert record.agent_id == "agent-2" and record.step == 5 and record.metric == 0.8
    assert record.plan_summary == "HistGradientBoosting + target encoding — Use a gradient-boosted model on engineered features"
    assert len(plan_summary(make_node(plan="x" * 1000))) <= 240
    tagged = make_node(approach_tag="KNeighbors + raw columns", plan="Mutation of one gene; the approach is KNeighbors + raw columns. More.")
    assert plan_summary(tagged) == "Mutation of one gene; the approach is KNeighbors + raw columns"
    with pytest.raises(ValueError):
        record_for(make_node(), 0.5)
