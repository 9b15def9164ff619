"""Execute a step's program and judge it through the objective."""

from __future__ import annotations

from swarm_evo.population.node import LLMUsage
from swarm_evo.run.model_context import exec_timeout
from swarm_evo.run.session import RunSession
from swarm_evo.search.debug_chain import Attempt


def execute_program(session: RunSession, node_id: str, code: str, attempt: int = 0, plan: str = "",
                    usage: LLMUsage | None = None) -> Attempt:
    """Run and judge ``code`` in ``nodes/<node_id>/`` through the objective (competitions: one
    execution and the submission check; problems: an Eval Service evaluation)."""
    workdir = session.node_dir(node_id)
    assessment = session.objective.assess(session.sandbox, code, workdir, exec_timeout(session))
    return Attempt(
        attempt=attempt,
        plan=plan,
        code=code,
        result=assessment.result,
        problems=assessment.problems,
        usage=usage or LLMUsage(),
        metric=assessment.metric,
        evaluation=assessment.evaluation,
        hidden_score=assessment.hidden_score,
        hidden_error=assessment.hidden_error,
    )
