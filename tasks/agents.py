"""Agent-evolution task: rewrite the weakest agents when due, publish the record (SPEC §9)."""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_markdown_artifact

from swarm_evo.learning.agent_evolution import agent_texts_tool
from swarm_evo.llm.review_completion import ReviewReply, complete_review
from swarm_evo.run.session import get_session
from swarm_evo.step import evolve_agents as evolution
from tasks._policy import LLM_RETRY, TASK_DEFAULTS
from tasks.artifacts import artifact_key


@task(name="evolve-agent-call", task_run_name="evolve-agent-call-{ctx[call_key]}", **LLM_RETRY, **TASK_DEFAULTS)
def ask_agent_texts(run_dir: str, prompt: str, ctx: dict) -> ReviewReply:
    """One forced ``submit_agent_texts`` call for one weak agent (``ctx["call_key"]`` is
    ``evolution<k>:<agent id>``); transient model errors are retried (tasks._policy.LLM_RETRY).
    Returns the :class:`swarm_evo.llm.review_completion.ReviewReply` of :func:`swarm_evo.llm.review_completion.complete_review`."""
    return complete_review(get_session(run_dir).evolution_endpoint, prompt, agent_texts_tool(), ctx)


@task(name="evolve-agents", task_run_name="evolve-agents-epoch{epoch}", **TASK_DEFAULTS)
def evolve_agents(run_dir: str, epoch: int) -> dict | None:
    """After global epoch ``epoch``: evolve the agents if due; the record becomes a markdown
    artifact ``<run>-agent-evolution-<k>``. Returns the record's summary, or None.

    Not retried as a whole (a retry would rewrite the agents already rewritten): each model
    call is its own task, :func:`ask_agent_texts`, with the transient retries; a call that
    fails for good leaves that agent's texts as they were (the record says why)."""
    session = get_session(run_dir)
    record = evolution.evolve_agents(
        session, epoch, ask=lambda prompt, ctx: ask_agent_texts(run_dir, prompt, ctx)
    )
    if record is None:
        return None
    create_markdown_artifact(
        markdown=record.markdown(),
        key=artifact_key(run_dir, f"agent-evolution-{record.index}"),
        description=f"Agent evolution {record.index} of {session.objective.id}: "
        f"rewrote {', '.join(r.agent_id for r in record.rewrites if r.changed) or 'none'}",
    )
    return record.summary()
