"""The body shared by the draft_step and phase2_step subflows (SPEC §6 'Each step')."""

from __future__ import annotations

import time
from typing import Callable

from prefect import get_run_logger
from prefect.states import Failed, State

from flows._subflow import subflow_context
from flows.debug_attempt import debug_attempt, generation_failed
from swarm_evo.search.debug_chain import Attempt, debug_flagged, recorded_output, run_debug_chain
from swarm_evo.llm.errors import DeadlineReached
from swarm_evo.population.node import Node, new_node_id
from swarm_evo.run.lanes import CURRENT_TICKET, StepTicket
from swarm_evo.run.session import get_session
from swarm_evo.step import assembly, attempt_files, limits, review_call
from swarm_evo.step.request import OperationRequest, release_request
from tasks.artifacts import update_progress
from tasks.execute import execute
from tasks.generate import generate
from tasks.persist import DEAD, append_node
from tasks.review import review_or_facts


def _outcome(node: Node) -> dict | State:
    """The step run's result: a summary of its node; for a dead node a state named ``Dead``
    carrying it, after a WARNING log line with the node's failure (its exception and the tail of
    its last output) and a ``dead-step<n>`` task run that ends Failed (``Dead``) with that text
    as its message, so the death shows in a failure colour in the Prefect UI (issue 54, item 2).

    The step run itself ends ``Failed(name="Dead")`` too, its data the summary: the scheduler
    calls it with ``return_state=True`` and takes a Dead state's data as the step's outcome
    (``flows/_scheduler.py``), so the phase flow and the run still complete.
    """
    summary = {
        "node_id": node.id,
        "step": node.step,
        "operation": node.operation,
        "metric": node.metric_value,
        "is_buggy": node.is_buggy,
        "dead": node.dead,
        "debug_attempts": node.debug_attempts,
    }
    if node.dead:
        from tasks.persist import dead_state, mark_dead

        dead = dead_state(node)
        get_run_logger().warning("step %s %s: node %s %s", node.step, node.operation, node.id[:8], dead.message)
        mark_dead(node.id, node.step, dead.message, return_state=True)
        # A named failed state marks the dead node; the scheduler takes it with return_state=True.
        return Failed(name=DEAD, message=dead.message.splitlines()[0][:500], data=summary)
    return summary


def _failed_generation(session, run_dir: str, node_id: str, request, exc: BaseException, epoch: int,
                       started: float) -> dict | State:
    """GenerationError or a model error after its retries: a dead node, counted in the budget."""
    get_run_logger().warning("generation failed for slot %s (%s): %s", request.slot, type(exc).__name__, exc)
    node = assembly.failed_generation_node(session, node_id, request, exc, epoch, time.perf_counter() - started)
    append_node(run_dir, node, request)
    update_progress(run_dir)
    return _outcome(node)


def run_step(run_dir: str, slot: int, epoch: int, select: Callable) -> dict | State:
    """select → generate (+ static check and self-fix) → execute → debug chain → review → append.

    The node records when the step started (issue 52): ``metadata.schedule`` =
    ``{"started_s": the run's elapsed seconds at its start, "nodes_at_start": the journal's length
    then}``, to which its assembly adds its executions (lanes, waits, times) and ``nodes_at_exec``.

    Whatever happens after selection, the request's claims end with the step: a merge's gene
    plan leaves ``plans_in_flight`` and a greedy debug's leaf ``debugs_in_flight``, so a step
    that crashed (a sandbox error, a Prefect crash) does not steer the novelty guard away from
    that plan for the rest of the run (issue 16).
    """
    session = get_session(run_dir)
    started = time.perf_counter()
    ticket = CURRENT_TICKET.get()  # the scheduler's: when it decided to start this step
    schedule = (ticket or StepTicket(session.budget.elapsed(), len(session.journal))).schedule()
    request: OperationRequest = select(run_dir, slot)
    request.metadata["schedule"] = schedule
    try:
        return _take_step(session, run_dir, slot, epoch, request, started)
    finally:
        release_request(session, request)


def _take_step(session, run_dir: str, slot: int, epoch: int, request, started: float) -> dict | State:
    """The step after selection (:func:`run_step`)."""
    logger = get_run_logger()
    node_id = new_node_id()
    try:
        generated = generate(run_dir, node_id, request)
    except DeadlineReached as exc:  # the time or cost limit, or a transient error too near the deadline to retry
        limits.check_limits(session)  # the cost limit stops the run
        if not session.budget.time_up():  # no retry fits before the deadline: the run's time is over
            session.stop(f"the time limit is near: {exc}")
        logger.info("slot %s not started: %s", slot, exc)  # a run limit came first: no node, no failure
        session.budget.release(slot)
        return None
    except Exception as exc:  # retries for transient errors already ran inside the task
        return _failed_generation(session, run_dir, node_id, request, exc, epoch, started)
    first = execute(run_dir, node_id, generated.code, 0, generated.plan)

    last_run = [first]  # the last attempt whose program ran: what the next fix works on

    def attempt_fn(n: int, previous: Attempt) -> Attempt:
        # after an attempt whose generation failed (no program), debug the last program that ran
        base = last_run[-1] if generation_failed(previous) else previous
        with subflow_context(session.config.search.subflow_heartbeats):
            result = debug_attempt(
                run_dir=run_dir,
                node_id=node_id,
                slot=slot,
                attempt=n,
                previous_code=base.code,
                previous_term_out=recorded_output(base.result.term_out),
                previous_exc_type=base.result.exc_type,
                previous_problems=base.problems,
            )
        if not generation_failed(result):
            last_run.append(result)
        return result

    max_attempts = session.config.search.debug_max_attempts

    def time_up() -> bool:  # after the deadline, or once the run stops, no debug calls the model
        return session.budget.time_up() or limits.check_limits(session) is not None

    chain = run_debug_chain(first, max_attempts, attempt_fn, time_up)
    outcome, review_usage = review_or_facts(run_dir, node_id, slot, chain.final)
    while review_call.flagged_by_reviewer(outcome, chain.final) and chain.attempts < max_attempts and not time_up():
        # every deterministic check passed but the reviewer says bug: debug it with the reviewer's reason
        reasons = review_call.reviewer_reasons(outcome)
        logger.info("node %s passed every check but the reviewer flagged it (%s); debugging it", node_id[:8],
                    "; ".join(reasons)[:200])
        before = chain.final
        node_dir = session.node_dir(node_id)
        attempt_files.set_aside(node_dir, before.attempt)  # the fix must not overwrite what may be kept
        spent = chain.attempts
        chain = debug_flagged(chain, reasons, max_attempts, attempt_fn, time_up)
        if chain.final is before:  # no fix passed: the node keeps the flagged program, and its files
            attempt_files.bring_back(node_dir, before.attempt, chain.attempts if chain.attempts > spent else None)
            break
        outcome, more_usage = review_or_facts(run_dir, node_id, slot, chain.final)
        review_usage = review_usage.add(more_usage)
    node = assembly.assemble_node(
        session, node_id, request, generated, chain, outcome, review_usage, epoch, time.perf_counter() - started
    )
    append_node(run_dir, node, request)
    update_progress(run_dir)
    logger.info(
        "step %s %s: metric=%s buggy=%s dead=%s debug_attempts=%s",
        node.step, node.operation, node.metric_value, node.is_buggy, node.dead, node.debug_attempts,
    )
    return _outcome(node)
