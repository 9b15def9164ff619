"""Review task: forced submit_review call plus the deterministic rules."""

from __future__ import annotations

from prefect import get_run_logger, task

from swarm_evo.llm.ledger import call_scope, node_scope, scope_usage
from swarm_evo.population.node import LLMUsage
from swarm_evo.run.session import get_session
from swarm_evo.search.debug_chain import Attempt
from swarm_evo.search.review import ReviewOutcome, decide_review
from swarm_evo.step import review_call
from tasks._policy import LLM_RETRY, TASK_DEFAULTS


@task(name="review", **LLM_RETRY, **TASK_DEFAULTS)
def review(run_dir: str, node_id: str, slot: int, final: Attempt) -> tuple[ReviewOutcome, LLMUsage]:
    """Review the last attempt of a node. A garbled tool call is already decided on the
    deterministic facts inside; a model error raises (after the transient retries). The usage
    counts every review call of this attempt, failed ones and earlier task attempts too."""
    session, scope = get_session(run_dir), node_scope(node_id, f"review{final.attempt}")
    with call_scope(scope):
        outcome, usage = review_call.review_program(session, node_id, slot, final)
    return outcome, scope_usage(session.endpoint.ledger_path, scope, usage)


@task(name="review-without-model", **TASK_DEFAULTS)
def review_without_model(run_dir: str, node_id: str, final: Attempt, error: str) -> tuple[ReviewOutcome, LLMUsage]:
    """The review when the model failed for good: the deterministic facts alone (execution
    error, submission check, the metric line of stdout or the evaluator's score; SPEC §6
    'facts win'), with ``review call: the model failed (<error>)`` among the reasons (a
    remark: it does not make the node buggy). The usage is that of the failed review calls."""
    session = get_session(run_dir)
    errors, metric = session.objective.review_facts(final, session.node_dir(node_id))
    outcome = decide_review(final.result, None, errors, metric=metric, code=final.code)
    outcome.reasons.append(f"review call: the model failed ({error[:1500]})")
    return outcome, scope_usage(session.endpoint.ledger_path, node_scope(node_id, f"review{final.attempt}"))


def review_or_facts(run_dir: str, node_id: str, slot: int, final: Attempt) -> tuple[ReviewOutcome, LLMUsage]:
    """:func:`review`, or :func:`review_without_model` when the review call failed for good
    (a model error after its retries): a failing model never loses the node."""
    try:
        return review(run_dir, node_id, slot, final)
    except Exception as exc:
        get_run_logger().warning("review of node %s failed (%s: %s); deciding on the facts alone",
                                 node_id[:8], type(exc).__name__, exc)
        return review_without_model(run_dir, node_id, final, f"{type(exc).__name__}: {exc}")
