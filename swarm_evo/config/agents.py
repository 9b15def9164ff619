"""``agents``: agents, dispatcher, experience pool and agent evolution (SPEC §9)."""

from __future__ import annotations

from pydantic import Field

from swarm_evo.config.base import Section


class AgentsConfig(Section):
    """Agents, dispatcher, experience pool and agent evolution (SPEC §9; seed 000 K)."""

    num_agents: int = Field(4, ge=1, description="Agents with their own role and strategy texts.")
    epsilon: float = Field(0.3, ge=0, le=1, description="Dispatcher: chance of a random agent (ε-greedy).")
    ema_alpha: float = Field(0.3, gt=0, le=1, description="Dispatcher: weight of the newest quality in the EMA.")
    evolution_interval: int = Field(3, ge=1, description="Evolve agents every N global epochs (both phases).")
    evolution_min_records: int = Field(20, ge=0, description="Experience records needed before evolving agents.")
    experience_top_k: int = Field(5, ge=0, description="Examples of the same operation shown in a prompt.")
