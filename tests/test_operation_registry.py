"""One home for the list of operations (issue 43, item 1): swarm_evo/operators/.

A throw-away operation added through the registry alone — no other module changed — is
dispatched (an agent chosen and scored, agent texts written and evolved), prompted (its template
rendered with its agent's text by the step that prepares operations, and measured by the
prompt-window check), answered by the offline model (its own handler), reported (run report,
improvement numbers) and charted (best-fitness chart, evolution tree).
"""

from __future__ import annotations

import random
import shutil
import sys
import xml.etree.ElementTree as ET

import pytest
from factories import make_node

from swarm_evo.learning.agent_evolution import agent_texts_tool
from swarm_evo.learning.agents import AgentPool, initial_texts, text_kinds
from swarm_evo.learning.dispatcher import Dispatcher
from swarm_evo.operators import registry
from swarm_evo.operators.operator import AgentText, OfflineHandlers, Operator, ReportStyle
from swarm_evo.population.journal import Journal
from swarm_evo.population.node import Node
from swarm_evo.prompting.prompts import templates_dir
from swarm_evo.reporting import charts, evolution_tree
from swarm_evo.reporting.operation_stats import operations_of, reference_parent
from swarm_evo.reporting.run_report import build_run_report, run_report_rows

TWEAK_TEXT = "Nudge exactly one numeric constant of the parent by a small, explainable step."


def tweak_reply(ctx: dict, info, rng: random.Random, work) -> str:
    """The throw-away operation's offline answer: the parent's program, one comment added."""
    return f"Tweak of the parent ({ctx['target_locus']}).\n\n```python\n# tweaked\n{ctx['parent_code']}```\n"


def tweak_program(ctx: dict, rng: random.Random) -> tuple[str, str]:
    return "Tweak of the parent.", ctx["parent_code"]


TWEAK = Operator(
    name="tweak",
    phase=2,
    template="mutate.j2",
    summary="one constant of a parent nudged (a test's operation)",
    agent=AgentText(summary="Strategy for nudging one constant of a solution.", fallback=TWEAK_TEXT,
                    reliability="Nudge one constant at a time.", quality="Nudge the constant that matters most."),
    offline=OfflineHandlers(competition=tweak_reply, problem=tweak_program),
    report=ReportStyle(colour="#ff00aa", marker="P", shape="square", symbol="✚", always_listed=False,
                       reference="parent"),
)


@pytest.fixture
def tweak():
    with registry.registered(TWEAK) as op:
        yield op
    assert "tweak" not in registry.names()


def _texts_dir(tmp_path):
    """prompt_templates/agents/ plus a starting text for the tweak operation."""
    folder = tmp_path / "agents"
    shutil.copytree(templates_dir() / "agents", folder, ignore=shutil.ignore_patterns("program"))
    (folder / "tweak.md").write_text(TWEAK_TEXT + "\n")
    return folder


# ---------------------------------------------------------------------------- the registry itself
def test_the_builtin_operations_and_their_order():
    assert registry.names() == ("draft", "merge", "mutate", "debug")
    assert registry.agent_operations() == ("draft", "merge", "mutate"), "no agent writes greedy's debug"
    assert registry.listed_operations() == ("draft", "merge", "mutate")
    assert registry.templates() == ("draft.j2", "merge.j2", "mutate.j2", "debug.j2")
    assert [registry.get(n).phase for n in registry.names()] == [1, 2, 2, 2]
    with pytest.raises(KeyError, match="unknown operation 'tweak'; known operations: draft, merge, mutate, debug"):
        registry.get("tweak")


def test_an_unregistered_operation_is_refused_everywhere():
    with pytest.raises(ValueError, match="unknown operation 'tweak'"):
        Node(operation="tweak", phase=2)
    with pytest.raises(ValueError, match="unknown operation 'tweak'"):
        Dispatcher(["agent-1"], 0.0, 0.3).choose("tweak", random.Random(0))
    assert "tweak" not in agent_texts_tool()["function"]["parameters"]["required"]


def test_registering_twice_or_removing_a_builtin_is_an_error(tweak):
    with pytest.raises(ValueError, match="registered already"):
        registry.register(TWEAK)
    with pytest.raises(ValueError, match="built in"):
        registry.unregister("merge")
    with pytest.raises(ValueError, match="lowercase identifier"):
        Operator(name="Cross Over", phase=2, template="mutate.j2", agent=None, offline=TWEAK.offline,
                 report=TWEAK.report)


# ---------------------------------------------------------------------------- dispatched
def test_a_new_operation_is_dispatched_and_its_agent_texts_evolve(tweak, tmp_path):
    from swarm_evo.llm.offline.evolve_agent import evolve_agent

    dispatcher = Dispatcher(["agent-1", "agent-2"], epsilon=0.0, alpha=0.5, path=tmp_path / "dispatcher.json")
    first = dispatcher.choose("tweak", random.Random(0))
    assert dispatcher.update(first, "tweak", 0.8, "node-1") == 0.8
    assert dispatcher.choose("tweak", random.Random(1)) != first, "the untried agent counts as best"
    assert dispatcher.state()["scores"][first]["tweak"] == 0.8

    assert text_kinds() == ("role", "draft", "merge", "mutate", "tweak")
    with pytest.raises(FileNotFoundError, match="tweak.md not found"):
        initial_texts(templates_dir() / "agents")
    pool = AgentPool.open(tmp_path / "run", 2, texts_dir=_texts_dir(tmp_path))
    assert pool.get("agent-1").strategy("tweak") == TWEAK_TEXT
    assert (tmp_path / "run" / "agents" / "agent-2" / "tweak.md").read_text().strip() == TWEAK_TEXT

    tool = agent_texts_tool()["function"]["parameters"]
    assert tool["required"] == ["role", "draft", "merge", "mutate", "tweak", "rationale"]
    assert tool["properties"]["tweak"]["description"] == TWEAK.agent.summary
    stats = {"steps": 4, "success_rate": 0.25, "mean_quality": 0.1, "score": 0.025,
             "per_operation": {"tweak": {"steps": 4, "success_rate": 0.25, "mean_quality": 0.1}}}
    texts = pool.get("agent-1").texts
    args = evolve_agent({"purpose": "evolve_agent", "generation": 1, "competition": {"grader": "accuracy"},
                         "agent": {"id": "agent-1", "texts": texts, "stats": stats},
                         "elite": {"id": "agent-2", "texts": texts, "stats": stats}}, random.Random(0))
    assert list(args) == ["role", "draft", "merge", "mutate", "tweak", "rationale"]
    assert args["tweak"].startswith(TWEAK_TEXT) and TWEAK.agent.reliability in args["tweak"]


# ---------------------------------------------------------------------------- prompted and answered
def test_a_new_operation_is_prompted_answered_and_learned_from(tweak, tmp_path, monkeypatch):
    """The step's own path (step/operations.py::agent_request, step/persistence.py::append_node)
    on a real run session: the tweak's agent, template and agent text, the offline model's
    answer through litellm, and the node's quality folded into the dispatcher and experience."""
    import litellm

    from swarm_evo.competition import prepare_competition
    from swarm_evo.config import RunConfig
    from swarm_evo.llm import offline
    from swarm_evo.llm.endpoint import endpoint_for
    from swarm_evo.run.prompt_budget import check_prompt_window, role_templates
    from swarm_evo.run.session import close_session, open_session
    from swarm_evo.step.operations import agent_request
    from swarm_evo.step.persistence import append_node

    from swarm_evo.objective import competition as competition_objective

    monkeypatch.setattr(competition_objective, "templates_dir", lambda: tmp_path)  # agents/ with tweak.md
    _texts_dir(tmp_path)
    prepare_competition("sklearn-breast-cancer", None, tmp_path / "data")
    config = RunConfig.model_validate({"sandbox": {"python": sys.executable}, "search": {"max_steps": 5}})
    session = open_session(competition_id="sklearn-breast-cancer", data_dir=tmp_path / "data",
                           run_dir=tmp_path / "run", config=config, endpoint=endpoint_for(config.model))
    try:
        assert "tweak" in session.dispatcher.operations
        assert TWEAK.template in role_templates()["name"]
        check_prompt_window(config, session.objective)
        parent = session.journal.append(make_node(metric=0.9))
        slot = session.budget.reserve()
        request = agent_request(session, slot, "tweak", prompt_vars={"parent": parent, "target_locus": "MODEL"},
                                ctx_vars={"parent_code": parent.code, "target_locus": "MODEL"}, parent_id=parent.id)
        assert (request.operation, request.phase, request.template) == ("tweak", 2, "mutate.j2")
        assert request.agent_id in session.agents.ids and TWEAK_TEXT in request.prompt
        assert request.ctx["purpose"] == "tweak" and request.ctx["call_key"] == f"slot{slot}:tweak"

        offline.register()
        reply = litellm.completion(model="offline/default", messages=[{"role": "user", "content": request.prompt}],
                                   metadata={"swarm_evo": request.ctx}, num_retries=0)
        text = reply.choices[0].message.content
        assert text.startswith("Tweak of the parent (MODEL).") and "# tweaked" in text

        child = make_node(metric=0.95, operation="tweak", phase=2, parent_id=parent.id, agent_id=request.agent_id)
        append_node(session, child, request)
        assert session.dispatcher.state()["updates"][request.agent_id]["tweak"] == 1
        assert [r.operation for r in session.experience.records()] == ["tweak"]
    finally:
        close_session(session.run_dir)


# ---------------------------------------------------------------------------- reported and charted
def _tweaked_journal() -> Journal:
    j = Journal(info={"competition_id": "toy"})
    d1 = j.append(make_node(metric=0.70))
    j.append(make_node(metric=0.80, operation="tweak", phase=2, parent_id=d1.id))
    j.append(make_node(metric=None, is_buggy=True, operation="tweak", phase=2, parent_id=d1.id))
    return j


def test_a_new_operation_is_reported(tweak):
    j = _tweaked_journal()
    assert operations_of(j) == ("draft", "merge", "mutate", "tweak")
    assert reference_parent(j, j.nodes[1]) is j.nodes[0]
    report = build_run_report(j, [])
    stats = report["operations"]["tweak"]
    assert (stats["count"], stats["buggy_rate"], stats["compared"], stats["improved"], stats["new_best"]) == (
        2, 0.5, 1, 1, 1)
    assert stats["mean_gain"] == pytest.approx(0.10)
    assert report["best_lineage"]["operations"] == ["draft", "tweak"]
    assert [r["operation"] for r in run_report_rows(report)] == ["draft", "merge", "mutate", "tweak"]
    assert "tweak" not in build_run_report(Journal(), [])["operations"], "listed only when used"


def test_a_new_operation_is_charted(tweak, tmp_path, monkeypatch):
    from matplotlib.axes import Axes

    drawn: dict[str, dict] = {}
    scatter = Axes.scatter

    def record(self, x, y, *args, **kw):
        drawn[str(kw.get("label"))] = kw
        return scatter(self, x, y, *args, **kw)

    monkeypatch.setattr(Axes, "scatter", record)
    charts.best_fitness_chart(_tweaked_journal(), tmp_path / "chart.png")
    assert drawn["valid tweak"]["marker"] == "P" and drawn["valid tweak"]["color"] == "#ff00aa"
    assert drawn["new best by tweak"]["edgecolors"] == "#ff00aa"

    svg = evolution_tree.evolution_tree_svg(_tweaked_journal())
    shapes = [el for el in ET.fromstring(svg).iter() if el.tag.endswith("rect") and el.get("rx") == "4"]
    assert len(shapes) == 2, "the tweak's square shape, one per tweak node"
    html = evolution_tree.evolution_tree_html(_tweaked_journal(), tmp_path / "tree.html").read_text(encoding="utf-8")
    assert "● draft ◆ merge ■ mutate ▲ debug ✚ tweak" in html


def test_agent_evolution_names_the_registrys_operations(tweak):
    """evolve_agent.j2 names no operation itself (issue 55, item 4): a new one is described and
    asked for from its registry record."""
    from types import SimpleNamespace

    from swarm_evo.config import ModelConfig
    from swarm_evo.prompting.prompts import render
    from swarm_evo.prompting.text_bounds import prompt_limits
    from swarm_evo.run.prompt_budget import skeleton_contexts

    objective = SimpleNamespace(loci=["model"], prompt_view=lambda: {
        "kind": "competition", "name": "Toy", "id": "toy", "metric": "accuracy", "is_lower_better": False})
    context = skeleton_contexts(objective, prompt_limits(ModelConfig()))["evolve_agent.j2"]
    prompt = render("evolve_agent.j2", **context)
    assert f"tweak: {TWEAK.summary}" in prompt and "`mutate`, `tweak` texts" in prompt
    assert (templates_dir() / "evolve_agent.j2").read_text().count("merge") == 0


def test_a_journal_with_an_operation_this_process_has_not_registered_is_read_and_reported(tmp_path):
    """Issue 53, item 9: a journal written by a process that had registered a plug-in operation
    loads, and the run report, the chart's colours and the tree draw its nodes (grey, '?')."""
    import json

    from factories import make_node
    from swarm_evo.operators import registry
    from swarm_evo.population.journal import Journal
    from swarm_evo.reporting.evolution_tree import evolution_tree_svg
    from swarm_evo.reporting.run_report import build_run_report

    journal = Journal(tmp_path / "journal.json")
    draft = journal.append(make_node(metric=0.7))
    journal.append(make_node(metric=0.8, parent_id=draft.id, operation="mutate", phase=2))
    data = json.loads((tmp_path / "journal.json").read_text())
    data["nodes"][1]["operation"] = "crossover-plugin"  # registered by the process that wrote it
    (tmp_path / "journal.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="unknown operation 'crossover-plugin'"):
        make_node(operation="crossover-plugin")  # a new node of it is still refused here
    loaded = Journal.load(tmp_path / "journal.json")
    assert [n.operation for n in loaded.nodes] == ["draft", "crossover-plugin"]
    report = build_run_report(loaded, [])
    assert report["operations"]["crossover-plugin"]["count"] == 1
    assert registry.report_style("crossover-plugin") is registry.UNREGISTERED_STYLE
    tree = evolution_tree_svg(loaded)
    assert ">0.8</text>" in tree and ">0.7</text>" in tree, "both nodes drawn"
