"""Persist task: append a node to the journal (atomic rewrite of journal.json); and the mark a
dead node leaves in the Prefect UI."""

from __future__ import annotations

from prefect import task
from prefect.runtime import flow_run
from prefect.states import Failed, State

from swarm_evo.population.node import Node
from swarm_evo.reporting.failures import node_failure
from swarm_evo.run.session import get_session
from swarm_evo.step import persistence
from swarm_evo.step.request import OperationRequest
from tasks._policy import TASK_DEFAULTS
from tasks.artifacts import label_step_run, publish_node_page

DEAD = "Dead"
"""Name of the Failed state that marks a dead node."""


@task(name="append-node", task_run_name="append-slot{request.slot}", **TASK_DEFAULTS)
def append_node(run_dir: str, node: Node, request: OperationRequest) -> Node:
    """Append the step's node and commit its budget slot; then the views of it in the Prefect UI
    (issue 54, items 3 and 4): the node records its step's flow run (``metadata.prefect.flow_run_id``,
    which the node table links), its page is published as a markdown artifact
    (:func:`tasks.artifacts.publish_node_page`: code, diff to its parent, output, error, debug
    chain) and the step's flow run is renamed ``step<n>-<operation>-<id8>`` and tagged
    (:func:`tasks.artifacts.label_step_run`)."""
    flow_run_id = flow_run.get_id()
    if flow_run_id:
        node.metadata["prefect"] = {"flow_run_id": str(flow_run_id)}
    appended = persistence.append_node(get_session(run_dir), node, request)
    if flow_run_id:
        publish_node_page(run_dir, appended)
        label_step_run(appended)
    return appended


def dead_state(node: Node) -> State:
    """A Failed state named ``Dead`` whose message is the node's failure (its exception and the
    tail of its last output: :func:`swarm_evo.reporting.failures.node_failure`)."""
    return Failed(name=DEAD, message=node_failure(node))


@task(name="dead-node", task_run_name="dead-step{step}", **TASK_DEFAULTS)
def mark_dead(node_id: str, step: int | None, message: str) -> State:
    """A task run that ends Failed (``Dead``) with the dead node's failure as its message, so the
    step's run shows the death in a failure colour in the Prefect UI (issue 54, item 2). Call it
    with ``return_state=True``: its failure is the node's, not the step's."""
    return Failed(name=DEAD, message=message)
