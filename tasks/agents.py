"""Agent-evolution task: rewrite the weakest agents when due, publish the record (SPEC §9)."""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_markdown_artifact

from swarm_evo import agent_evolution
from swarm_evo.session import get_session
from tasks._policy import RETRY_DELAYS, TASK_DEFAULTS, retry_on_transient
from tasks.artifacts import artifact_key


@task(
    name="evolve-agents",
    task_run_name="evolve-agents-epoch{epoch}",
    retries=len(RETRY_DELAYS),
    retry_delay_seconds=RETRY_DELAYS,
    retry_condition_fn=retry_on_transient,
    **TASK_DEFAULTS,
)
def evolve_agents(run_dir: str, epoch: int) -> dict | None:
    """After global epoch ``epoch``: evolve the agents if due; the record becomes a markdown
    artifact ``<run>-agent-evolution-<k>``. Returns the record's summary, or None."""
    session = get_session(run_dir)
    record = agent_evolution.evolve_agents(session, epoch)
    if record is None:
        return None
    create_markdown_artifact(
        markdown=record.markdown(),
        key=artifact_key(run_dir, f"agent-evolution-{record.index}"),
        description=f"Agent evolution {record.index} of {session.objective.id}: "
        f"rewrote {', '.join(r.agent_id for r in record.rewrites if r.changed) or 'none'}",
    )
    return record.summary()
