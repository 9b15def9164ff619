"""Agent evolution's rules: rewrite the weakest agents' texts from the run's experience (SPEC §9).

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
Prefect layer also publishes it as an artifact. This module holds the rules and the record;
the job that runs them on a session is :func:`swarm_evo.step.evolve_agents.evolve_agents`.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from swarm_evo.learning.agents import ROLE, text_kinds
from swarm_evo.learning.experience import ExperiencePool, ExperienceRecord
from swarm_evo.operators import registry
from swarm_evo.population.node import LLMUsage, utc_now

EVOLUTIONS_DIR = "agent_evolutions"

def agent_texts_tool() -> dict:
    """The forced tool of the agent-evolution call (OpenAI tool schema): ``role``, a strategy per
    operation agents write (the registry's ``AgentText.summary`` describes it) and ``rationale``,
    all required strings."""
    properties = {ROLE: {"type": "string", "description": "Who the agent is (opening of its prompts)."}}
    for op in registry.operators():
        if op.agent is not None:
            properties[op.name] = {"type": "string", "description": op.agent.summary}
    properties["rationale"] = {"type": "string", "description": "One sentence: why these changes."}
    return {
        "type": "function",
        "function": {
            "name": "submit_agent_texts",
            "description": "Submit the rewritten role and strategy texts of the agent.",
            "parameters": {"type": "object", "properties": properties, "required": list(properties)},
        },
    }


def agent_operations_view() -> list[dict[str, str]]:
    """The operations agents write a strategy for, as ``evolve_agent.j2`` names them: ``name`` and
    ``summary`` (the registry's ``Operator.summary``), in the registry's order (issue 55, item 4:
    the template names no operation itself)."""
    return [{"name": op.name, "summary": op.summary} for op in registry.operators() if op.agent is not None]


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
        per_operation={op: _operation_stats([r for r in records if r.operation == op]) for op in registry.agent_operations()},
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
            for kind in text_kinds():
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


def load_evolutions(run_dir: Path) -> list[EvolutionRecord]:
    """The run's evolution records, in order."""
    folder = Path(run_dir) / EVOLUTIONS_DIR
    files = sorted(folder.glob("evolution-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    return [EvolutionRecord.model_validate(json.loads(p.read_text(encoding="utf-8"))) for p in files]
