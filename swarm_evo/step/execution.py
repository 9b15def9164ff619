"""Execute a step's program and judge it through the objective."""

from __future__ import annotations

from swarm_evo.population.node import LLMUsage
from swarm_evo.run.model_context import exec_timeout
from swarm_evo.run.session import RunSession
from swarm_evo.search.debug_chain import Attempt


def execute_program(session: RunSession, node_id: str, code: str, attempt: int = 0, plan: str = "",
                    usage: LLMUsage | None = None) -> Attempt:
    """Run and judge ``code`` in ``nodes/<node_id>/`` through the objective (competitions: one
    execution and the submission check; problems: an Eval Service evaluation), holding one of the
    run's execution lanes while it runs (issue 52, item 2: waiting for one when all are busy;
    the attempt's ``execution`` records the lane, the wait and the times).
    The execution's time limit is taken once the lane is held (the wait counts against the run)."""
    workdir = session.node_dir(node_id)
    lanes = session.lanes
    if lanes is None:  # a session made without lanes (tests that build one by hand)
        assessment, execution = session.objective.assess(session.sandbox, code, workdir, exec_timeout(session)), None
    else:
        with lanes.hold() as record:
            assessment = session.objective.assess(session.sandbox, code, workdir, exec_timeout(session))
        execution = record.as_dict()
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
        execution=execution,
    )
