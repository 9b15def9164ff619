"""What a prepared operation carries from selection to its node, and the end of its claims on
the session (a merge's plan in flight, a greedy debug's leaf)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from swarm_evo.population.node import Operation
from swarm_evo.run.session import RunSession


class OperationRequest(BaseModel):
    """A prepared operation: the prompt for the model and what the node will record."""

    operation: Operation
    phase: Literal[1, 2]
    slot: int
    parent_id: str | None = None
    template: str
    prompt: str
    ctx: dict[str, Any]
    agent_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


def release_request(session: RunSession, request: OperationRequest) -> None:
    """Forget a merge's in-flight plan, or a greedy debug's claim on its leaf, once its node
    is in the journal (or abandoned)."""
    key = (request.metadata.get("gene_plan") or {}).get("key")
    if key:
        with session.lock:
            session.plans_in_flight.discard(tuple(key))
    if request.operation == "debug" and request.parent_id:
        with session.lock:
            session.debugs_in_flight.discard(request.parent_id)
