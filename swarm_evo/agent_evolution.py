"""Agent evolution: rewrite the weakest agents' texts from the run's experience (SPEC §9).

Every ``agents.evolution_interval`` *global* epochs (the epoch counter runs on from Phase 1
into Phase 2), once the experience pool holds at least ``agents.evolution_min_records``
records, the agents are ranked by

    score = success_rate × mean_quality

(success_rate: share of the agent's steps that gave a valid node; mean_quality: mean quality
of those valid nodes; both from the experience pool). The weakest half (``num_agents // 2``)
get new texts from the model through ``evolve_agent.j2``: their own texts, the elite's (the
top-ranked agent's) texts, both agents' statistics, and up to 3 best and 3 worst plan
summaries of the weak agent. The reply is a forced ``submit_agent_texts`` tool call.

A rewritten agent's dispatcher scores are reset, so the greedy choice tries its new texts.
Each evolution is recorded in ``RUN_DIR/agent_evolutions/evolution-<k>.json`` (which agents,
old and new texts, the statistics, the rationale) with its rendered prompts beside it; the
Prefect layer also publishes it as an artifact.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from swarm_evo.agents import TEXT_KINDS, Agent
from swarm_evo.dispatcher import OPERATIONS
from swarm_evo.experience import ExperiencePool, ExperienceRecord
from swarm_evo.journal import atomic_write_text
from swarm_evo.llm.review_completion import ReviewReply, complete_review
from swarm_evo.model_context import offline_context
from swarm_evo.node import LLMUsage, utc_now
from swarm_evo.prompts import render
from swarm_evo.session import RunSession
from swarm_evo.text_bounds import prompt_limits

EVOLUTIONS_DIR = "agent_evolutions"

log = logging.getLogger(__name__)

AskFn = Callable[[str, dict], ReviewReply]
"""``ask(prompt, ctx) -> ReviewReply``: the forced ``submit_agent_texts`` call
(:func:`swarm_evo.llm.review_completion.complete_review` with :data:`AGENT_TEXTS_TOOL`); the Prefect
layer passes one that retries transient errors (tasks/agents.py)."""

AGENT_TEXTS_TOOL: dict = {
    "type": "function",
    "function": {
        "name": "submit_agent_texts",
        "description": "Submit the rewritten role and strategy texts of the agent.",
        "parameters": {
            "type": "object",
            "properties": {
                "role": {"type": "string", "description": "Who the agent is (opening of its prompts)."},
                "draft": {"type": "string", "description": "Strategy for drafting a new solution."},
                "merge": {"type": "string", "description": "Strategy for merging sections of good solutions."},
                "mutate": {"type": "string", "description": "Strategy for changing one section of a solution."},
                "rationale": {"type": "string", "description": "One sentence: why these changes."},
            },
            "required": ["role", "draft", "merge", "mutate", "rationale"],
        },
    },
}
"""Forced tool of the agent-evolution call (OpenAI tool schema)."""


class OperationStats(BaseModel):
    """An agent's record for one operation: steps, success rate, mean quality of valid nodes."""

    steps: int = 0
    success_rate: float = 0.0
    mean_quality: float = 0.0


class AgentStats(OperationStats):
    """An agent's record over all operations, its score and the per-operation breakdown."""

    score: float = 0.0
    per_operation: dict[str, OperationStats] = Field(default_factory=dict)


def _operation_stats(records: list[ExperienceRecord]) -> OperationStats:
    valid = [r.quality for r in records if r.succeeded]
    return OperationStats(
        steps=len(records),
        success_rate=len(valid) / len(records) if records else 0.0,
        mean_quality=sum(valid) / len(valid) if valid else 0.0,
    )


def agent_stats(experience: ExperiencePool, agent_id: str) -> AgentStats:
    """The agent's statistics from its experience records; score = success_rate × mean_quality."""
    records = experience.records(agent_id=agent_id)
    overall = _operation_stats(records)
    return AgentStats(
        **overall.model_dump(),
        score=overall.success_rate * overall.mean_quality,
        per_operation={op: _operation_stats([r for r in records if r.operation == op]) for op in OPERATIONS},
    )


def evolution_due(epoch: int, interval: int, records: int, min_records: int) -> bool:
    """True after global epoch ``epoch`` when ``epoch`` is a positive multiple of ``interval``
    and the experience pool holds at least ``min_records`` records (SPEC §9)."""
    return epoch > 0 and epoch % interval == 0 and records >= min_records


def rank_agents(agent_ids: list[str], experience: ExperiencePool) -> list[tuple[str, AgentStats]]:
    """Agents by score, best first; ties keep the agents' order (stable sort)."""
    stats = [(agent_id, agent_stats(experience, agent_id)) for agent_id in agent_ids]
    return sorted(stats, key=lambda item: -item[1].score)


def split_elite_and_weak(ranking: list[tuple[str, AgentStats]]) -> tuple[str | None, list[str]]:
    """``(elite_id, weak_ids)``: the top agent and the bottom ``len // 2`` (none with one agent)."""
    if len(ranking) < 2:
        return None, []
    n_weak = len(ranking) // 2
    return ranking[0][0], [agent_id for agent_id, _ in ranking[-n_weak:]]


def best_and_worst_plans(experience: ExperiencePool, agent_id: str, n: int = 3) -> tuple[list[dict], list[dict]]:
    """Up to ``n`` best (valid, highest quality) and ``n`` worst (lowest quality) plan summaries."""
    records = experience.records(agent_id=agent_id)

    def view(r: ExperienceRecord) -> dict:
        return {"operation": r.operation, "quality": r.quality, "plan_summary": r.plan_summary,
                "node_id": r.node_id, "exc_type": r.exc_type}

    best = sorted((r for r in records if r.succeeded), key=lambda r: -r.quality)[:n]
    best_ids = {r.node_id for r in best}
    worst = sorted((r for r in records if r.node_id not in best_ids), key=lambda r: r.quality)[:n]
    return [view(r) for r in best], [view(r) for r in worst]


class Rewrite(BaseModel):
    """One agent's rewrite inside an evolution; ``error`` set (texts kept) when the reply was unusable."""

    agent_id: str
    elite_id: str
    stats: AgentStats
    old_texts: dict[str, str]
    new_texts: dict[str, str] | None = None
    rationale: str | None = None
    error: str | None = None
    generation: int

    @property
    def changed(self) -> bool:
        """The agent got new texts that differ from the old ones."""
        return self.new_texts is not None and self.new_texts != self.old_texts


class EvolutionRecord(BaseModel):
    """One agent evolution: when, the ranking, and each rewrite."""

    index: int
    epoch: int
    at_step: int
    records: int
    created_at: str = Field(default_factory=utc_now)
    elite_id: str
    ranking: list[dict]
    rewrites: list[Rewrite]
    usage: LLMUsage = Field(default_factory=LLMUsage)

    def markdown(self) -> str:
        """The record as a markdown document (the Prefect artifact): ranking, then each rewrite
        with its old and new texts."""
        lines = [
            f"# Agent evolution {self.index} (after epoch {self.epoch}, step {self.at_step})",
            "",
            f"{self.records} experience records; elite **{self.elite_id}**. "
            "Score = success rate × mean quality of valid nodes.",
            "",
            "| agent | steps | success rate | mean quality | score |",
            "|---|---|---|---|---|",
        ]
        for item in self.ranking:
            lines.append(
                f"| {item['agent_id']} | {item['steps']} | {item['success_rate']:.2f} | "
                f"{item['mean_quality']:.2f} | {item['score']:.3f} |"
            )
        for rw in self.rewrites:
            lines += ["", f"## {rw.agent_id} (generation {rw.generation}, from {rw.elite_id})", ""]
            if rw.error:
                lines.append(f"Not rewritten: {rw.error}")
                continue
            lines.append(f"Rationale: {rw.rationale or '-'}")
            for kind in TEXT_KINDS:
                old, new = rw.old_texts.get(kind, ""), (rw.new_texts or {}).get(kind, "")
                status = "changed" if old != new else "unchanged"
                lines += ["", f"### {kind} ({status})", "", "Old:", "", _quote(old), "", "New:", "", _quote(new)]
        return "\n".join(lines) + "\n"

    def summary(self) -> dict:
        """The short form kept in the run report: who was rewritten from whom, and the scores."""
        return {
            "index": self.index,
            "epoch": self.epoch,
            "at_step": self.at_step,
            "records": self.records,
            "elite": self.elite_id,
            "rewritten": [r.agent_id for r in self.rewrites if r.changed],
            "failed": {r.agent_id: r.error for r in self.rewrites if r.error},
            "scores": {item["agent_id"]: round(item["score"], 4) for item in self.ranking},
        }


def _quote(text: str) -> str:
    return "\n".join("> " + line for line in (text or "").splitlines()) or "> (empty)"


def _agent_view(agent: Agent, stats: AgentStats) -> dict:
    return {"id": agent.id, "texts": {k: agent.texts[k] for k in TEXT_KINDS}, "stats": stats.model_dump()}


def _valid_texts(args: dict | None) -> tuple[dict[str, str] | None, str | None]:
    if args is None:
        return None, "no tool call"
    bad = [k for k in TEXT_KINDS if not isinstance(args.get(k), str) or not args[k].strip()]
    if bad:
        return None, f"the reply lacks non-empty texts for {', '.join(bad)}"
    return {k: args[k].strip() for k in TEXT_KINDS}, None


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
        prompt = render("evolve_agent.j2", objective=session.objective.prompt_view(), limits=limits, **view)
        atomic_write_text(folder / f"evolution-{index}" / f"prompt-{agent_id}.md", prompt)
        ctx = offline_context(session, "evolve_agent", f"evolution{index}:{agent_id}")
        ctx.update(view, generation=agent.generation + 1)
        model_failed = False
        try:
            if ask is None:
                reply = complete_review(session.evolution_endpoint, prompt, AGENT_TEXTS_TOOL, ctx)
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


def load_evolutions(run_dir: Path) -> list[EvolutionRecord]:
    """The run's evolution records, in order."""
    folder = Path(run_dir) / EVOLUTIONS_DIR
    files = sorted(folder.glob("evolution-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    return [EvolutionRecord.model_validate(json.loads(p.read_text(encoding="utf-8"))) for p in files]
