"""The agent-evolution job (SPEC §9): after a global epoch, rewrite the weakest agents' texts
from the run's experience through one forced ``submit_agent_texts`` call per weak agent.

The rules (when it is due, ranking, elite and weak, best and worst plans, the record) are
:mod:`swarm_evo.learning.agent_evolution`; this module runs them on a session: it renders
``evolve_agent.j2``, calls the model, rewrites the agents and writes the record. The Prefect
task ``evolve-agents`` (tasks/agents.py) calls :func:`evolve_agents`.
"""

from __future__ import annotations

import logging
from typing import Callable

from swarm_evo.learning.agent_evolution import (
    EVOLUTIONS_DIR,
    AgentStats,
    EvolutionRecord,
    Rewrite,
    agent_operations_view,
    agent_texts_tool,
    best_and_worst_plans,
    evolution_due,
    rank_agents,
    split_elite_and_weak,
)
from swarm_evo.learning.agents import Agent, text_kinds
from swarm_evo.llm.review_completion import ReviewReply, complete_review
from swarm_evo.population.journal import atomic_write_text
from swarm_evo.population.node import LLMUsage
from swarm_evo.prompting.prompts import render
from swarm_evo.prompting.text_bounds import prompt_limits
from swarm_evo.run.model_context import offline_context
from swarm_evo.run.session import RunSession

log = logging.getLogger(__name__)

AskFn = Callable[[str, dict], ReviewReply]
"""``ask(prompt, ctx) -> ReviewReply``: the forced ``submit_agent_texts`` call
(:func:`swarm_evo.llm.review_completion.complete_review` with :func:`~swarm_evo.learning.agent_evolution.agent_texts_tool`); the Prefect
layer passes one that retries transient errors (tasks/agents.py)."""


def _agent_view(agent: Agent, stats: AgentStats) -> dict:
    return {"id": agent.id, "texts": {k: agent.texts[k] for k in text_kinds()}, "stats": stats.model_dump()}


def _valid_texts(args: dict | None) -> tuple[dict[str, str] | None, str | None]:
    if args is None:
        return None, "no tool call"
    kinds = text_kinds()
    bad = [k for k in kinds if not isinstance(args.get(k), str) or not args[k].strip()]
    if bad:
        return None, f"the reply lacks non-empty texts for {', '.join(bad)}"
    return {k: args[k].strip() for k in kinds}, None


def evolve_agents(session: RunSession, epoch: int, ask: AskFn | None = None) -> EvolutionRecord | None:
    """Run an agent evolution after global epoch ``epoch`` if it is due; return its record.

    Writes ``RUN_DIR/agent_evolutions/evolution-<k>.json`` and the rendered prompts
    ``evolution-<k>/prompt-<agent>.md``; rewrites the weak agents' texts in the run directory.
    A weak agent whose reply is unusable keeps its texts (the record says why), and so does
    one whose call raised (a failing model, issue 7: ``error`` = ``"the model failed:
    <class>: <text>"``, logged as a warning): a failing model never fails the evolution.
    ``ask`` (see :data:`AskFn`) defaults to one direct :func:`complete_review` call.
    """
    cfg = session.config.agents
    experience = session.experience
    if not evolution_due(epoch, cfg.evolution_interval, len(experience), cfg.evolution_min_records):
        return None
    ranking = rank_agents(session.agents.ids, experience)
    elite_id, weak_ids = split_elite_and_weak(ranking)
    if elite_id is None:
        return None
    stats = dict(ranking)
    folder = session.run_dir / EVOLUTIONS_DIR
    index = len(list(folder.glob("evolution-*.json"))) + 1
    elite = session.agents.get(elite_id)
    limits = prompt_limits(session.config.model, session.evolution_endpoint.name)  # the prompt fits its window
    usage = LLMUsage()
    rewrites: list[Rewrite] = []
    for agent_id in weak_ids:
        agent = session.agents.get(agent_id)
        best, worst = best_and_worst_plans(experience, agent_id)
        view = dict(agent=_agent_view(agent, stats[agent_id]), elite=_agent_view(elite, stats[elite_id]),
                    best_plans=best, worst_plans=worst)
        prompt = render("evolve_agent.j2", objective=session.objective.prompt_view(), limits=limits,
                        operations=agent_operations_view(), **view)
        atomic_write_text(folder / f"evolution-{index}" / f"prompt-{agent_id}.md", prompt)
        ctx = offline_context(session, "evolve_agent", f"evolution{index}:{agent_id}")
        ctx.update(view, generation=agent.generation + 1)
        model_failed = False
        try:
            if ask is None:
                reply = complete_review(session.evolution_endpoint, prompt, agent_texts_tool(), ctx)
            else:
                reply = ask(prompt, ctx)
            args, call_usage, error = reply.arguments, reply.usage, reply.error
        except Exception as exc:  # a model error after its retries: this agent keeps its texts
            log.warning("agent evolution %s: the model failed for %s (%s: %s); its texts stay",
                        index, agent_id, type(exc).__name__, exc)
            args, call_usage, model_failed = None, getattr(exc, "usage", None) or LLMUsage(), True
            error = f"the model failed: {type(exc).__name__}: {exc}"[:2000]
        usage = usage.add(call_usage)
        texts, problem = _valid_texts(args) if error is None else (None, error)
        if texts is None and not model_failed:  # a model failure was logged above
            log.warning("agent evolution %s: no usable texts for %s (%s); its texts stay",
                        index, agent_id, (problem or "")[:300])
        rewrite = Rewrite(agent_id=agent_id, elite_id=elite_id, stats=stats[agent_id], old_texts=agent.texts,
                          generation=agent.generation, error=problem,
                          rationale=(args or {}).get("rationale") if texts else None)
        if texts is not None:
            updated = session.agents.rewrite(agent_id, texts, evolved_from=elite_id, evolution=index)
            session.dispatcher.reset(agent_id)  # the new texts get tried, not judged by the old ones
            rewrite.new_texts = updated.texts
            rewrite.generation = updated.generation
        rewrites.append(rewrite)
    record = EvolutionRecord(
        index=index,
        epoch=epoch,
        at_step=len(session.journal),
        records=len(experience),
        elite_id=elite_id,
        ranking=[{"agent_id": a, **s.model_dump(exclude={"per_operation"})} for a, s in ranking],
        rewrites=rewrites,
        usage=usage,
    )
    atomic_write_text(folder / f"evolution-{index}.json", record.model_dump_json(indent=2))
    return record
