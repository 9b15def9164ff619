"""The run's limits beyond budget and time: the model's cost and a model failing again and again."""

from __future__ import annotations

from swarm_evo.run.session import RunSession


def check_limits(session: RunSession) -> str | None:
    """Stop the run (no new step starts; :meth:`RunSession.stop`) when a limit beyond budget and
    time is reached, and return the stop reason (None while the run may go on):

    - ``model.max_cost_usd``: the ledger's cost (every call, failed and preflight ones too)
      reached it — a clean stop, the run ends normally;
    - ``model.max_consecutive_failures``: that many nodes in a row (the latest ones, all made
      since this process opened the run) are generation failures (the model failed for good or
      never gave a program) — a failing stop: the run ends with exit 1 and can be resumed once
      the model works again. A resumed run counts only its own nodes (issue 31): the failures
      that stopped it are still the journal's last nodes, and its preflight probe has just
      shown that the endpoint answers.
    """
    model = session.config.model
    if model.max_cost_usd is not None:
        cost = session.ledger.totals().known_cost_usd  # every call has a price (checked at start)
        if cost >= model.max_cost_usd:
            session.stop(f"model.max_cost_usd reached: the run's model calls cost ${cost:.4f} "
                         f"(limit ${model.max_cost_usd:.4f})")
    recent = session.journal.nodes[session.opened_at_nodes:][-model.max_consecutive_failures:]
    if len(recent) == model.max_consecutive_failures and all(
        n.exc_type == "GenerationError" and "generation_error" in n.metadata for n in recent
    ):
        last = (recent[-1].exc_info or "").splitlines()[0][:300] if recent[-1].exc_info else "unknown error"
        session.stop(
            f"the model failed {len(recent)} times in a row ({session.endpoint.name} at {session.endpoint.where}; "
            f"last error: {last}): fix the model or its endpoint, then continue with "
            f"`swarm-evo resume {session.run_dir}`",
            failure=True,
        )
    return session.stop_reason
