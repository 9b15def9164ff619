"""Build a step's journal node: from its finished debug chain and review, or a dead node when
its generation failed for good (one node per step, SPEC §6)."""

from __future__ import annotations

from swarm_evo.llm.errors import transient_errors
from swarm_evo.population.hidden_display import shown_fields
from swarm_evo.population.genes import parse_genes
from swarm_evo.population import ranking
from swarm_evo.population.node import LLMUsage, Node
from swarm_evo.run.session import RunSession
from swarm_evo.search.debug_chain import ChainOutcome, recorded_output
from swarm_evo.search.review import ReviewOutcome
from swarm_evo.step.generation import Generated
from swarm_evo.step.request import OperationRequest
from swarm_evo.store.pool import read_executed_by


def assemble_node(
    session: RunSession,
    node_id: str,
    request: OperationRequest,
    generated: Generated,
    chain: ChainOutcome,
    review: ReviewOutcome,
    review_usage: LLMUsage,
    epoch: int,
    wall_seconds: float,
) -> Node:
    """Build the journal node of a finished step (one node per step, SPEC §6). ``metadata.schedule``
    gains the step's ``executions`` (lane, wait, start, end of each attempt's run) and
    ``nodes_at_exec`` (the journal's length at its first execution: the proposal's staleness is
    that minus ``nodes_at_start``)."""
    final = chain.final
    usage = generated.usage.add(chain.usage).add(review_usage)
    runs = chain.history or [final.history_entry()]
    exec_seconds = sum(h.get("exec_time") or 0.0 for h in runs)
    is_buggy = review.is_buggy or chain.dead
    metadata = dict(request.metadata)
    executions = [{**h["execution"], "failed": bool(h.get("problems"))} for h in runs if h.get("execution")]
    if executions:  # where and when its programs ran (issue 52): the slot timeline, the proposal's staleness
        metadata["schedule"] = {**(metadata.get("schedule") or {}), "executions": executions,
                                "nodes_at_exec": executions[0]["nodes_at_start"]}
    metadata.update(
        # it ran, wrote a valid submission (or passed the evaluator) and printed a finite metric:
        # a candidate for the hand-in even if the reviewer flagged it (Journal.submission_candidate)
        facts_passed=not chain.dead and not final.problems and review.metric_value is not None
        and not final.hidden_error,
        prevalidation=generated.prevalidation,
        debug_history=chain.history,
        review={**review.details, "reasons": review.reasons, "metric_disagreement": review.metric_disagreement},
        problems=final.problems,
        **({"evaluation": final.evaluation} if final.evaluation is not None else {}),
        **({"hidden_error": final.hidden_error} if final.hidden_error else {}),
        timings={
            "wall": round(wall_seconds, 3),
            "llm": round(usage.seconds, 3),
            "exec": round(exec_seconds, 3),
            "orchestration": round(max(0.0, wall_seconds - usage.seconds - exec_seconds), 3),
        },
    )
    node = Node(
        id=node_id,
        parent_id=request.parent_id,
        operation=request.operation,
        phase=request.phase,
        epoch=epoch,
        plan=final.plan or generated.plan,
        code=final.code,
        genes=parse_genes(final.code),
        exc_type=final.result.exc_type,
        exc_info=final.result.exc_info,
        term_out=recorded_output(final.result.term_out),
        exec_time=final.result.exec_time,
        metric_value=review.metric_value,
        hidden_score=final.hidden_score,
        lower_is_better=session.objective.is_lower_better,
        is_buggy=is_buggy,
        dead=chain.dead,
        debug_attempts=chain.attempts,
        approach_tag=review.approach_tag,
        analysis=review.analysis,
        agent_id=request.agent_id,
        llm_usage=usage,
        metadata=metadata,
    )
    executed_by = read_executed_by(session.node_dir(node_id))
    if executed_by is not None:  # the pool backend (issue 52, item 4): which worker ran its last execution
        node.metadata["executed_by"] = executed_by
    hidden = getattr(session.objective, "hidden", None)  # issue 53, item 8: what prompts show of the score
    node.metadata.update(shown_fields(node.hidden_score, hidden.split.resolution if hidden is not None else None))
    gap = ranking.printed_gap(node)
    if gap is not None:  # issue 41: how far the program's own validation overstates the held-out rows
        node.metadata["printed_gap"] = round(gap, 6)
        node.metadata["printed_misleads"] = ranking.printed_misleads(node)
    return node


def failed_generation_node(
    session: RunSession, node_id: str, request: OperationRequest, error: BaseException, epoch: int, wall_seconds: float
) -> Node:
    """A dead node for a step whose generation failed for good (counted in the budget).

    ``exc_type`` is always ``"GenerationError"`` (issue 7: whatever the last error was, a bad
    reply or a model error such as ``RateLimitError`` after its retries); ``exc_info`` is
    ``"<error class>: <error text>"`` (at most 2,000 characters);
    ``metadata.generation_error`` = ``{"type": <error class>, "transient": bool}`` where
    transient means one of ``transient_errors()``; ``llm_usage`` is what the failed calls cost
    when the error carries it (GenerationError.usage), else zero.
    """
    return Node(
        id=node_id,
        parent_id=request.parent_id,
        operation=request.operation,
        phase=request.phase,
        epoch=epoch,
        exc_type="GenerationError",
        exc_info=f"{type(error).__name__}: {error}"[:2000],
        lower_is_better=session.objective.is_lower_better,
        is_buggy=True,
        dead=True,
        agent_id=request.agent_id,
        llm_usage=getattr(error, "usage", None) or LLMUsage(),
        metadata={
            **request.metadata,
            "generation_error": {"type": type(error).__name__, "transient": isinstance(error, transient_errors())},
            "timings": {"wall": round(wall_seconds, 3)},
        },
    )
