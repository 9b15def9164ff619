"""Persist task: append a node to the journal (atomic rewrite of journal.json)."""

from __future__ import annotations

from prefect import task

from swarm_evo.population.node import Node
from swarm_evo.run.session import get_session
from swarm_evo.step import persistence
from swarm_evo.step.request import OperationRequest
from tasks._policy import TASK_DEFAULTS


@task(name="append-node", task_run_name="append-slot{request.slot}", **TASK_DEFAULTS)
def append_node(run_dir: str, node: Node, request: OperationRequest) -> Node:
    """Append the step's node and commit its budget slot."""
    return persistence.append_node(get_session(run_dir), node, request)
