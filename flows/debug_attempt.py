"""debug_attempt: one link of the chained debug, its own subflow run (SPEC §6).

Its parameters carry the previous attempt's code and error output, so attempt n visibly
works on attempt n−1's result in the Prefect UI (after an attempt whose fix could not be
generated, on the last attempt that ran). Prefect ``retries`` would re-run it with the
same parameters, which is why the chain is a loop of subflow runs and not a retry.

An attempt that failed (its fix could not be generated, or its program failed) ends its subflow
run in a Failed state named ``AttemptFailed`` whose message is the error's tail, so the UI shows
it in a failure colour (issue 54, item 2); :func:`debug_attempt` calls the flow with
``return_state=True`` and hands the :class:`Attempt` back, so the step's run still completes
(Prefect 3.8.8: a parent flow that returns normally is Completed whatever the final states of
the subflows it called with ``return_state=True``).
"""

from __future__ import annotations

from prefect import flow, get_run_logger, runtime
from prefect.states import State

from swarm_evo.llm.errors import GenerationError
from swarm_evo.population.node import LLMUsage
from swarm_evo.sandbox import ExecutionResult
from swarm_evo.search.debug_chain import Attempt
from swarm_evo.step import generation
from tasks.execute import execute, failed_attempt_state, unwrap_attempt
from tasks.generate import generate_debug

NO_PROGRAM = "GenerationError"
"""exc_type of an attempt whose fix could not be generated (its program is the previous one)."""


def generation_failed(attempt: Attempt) -> bool:
    """True for an attempt made by :func:`debug_attempt` when its generation failed for good:
    exc_type ``GenerationError`` and no execution (``exit_code`` None, ``exec_time`` 0)."""
    result = attempt.result
    return result.exc_type == NO_PROGRAM and result.exit_code is None and not result.exec_time


def _run_name() -> str:
    params = runtime.flow_run.parameters
    return f"debug-{str(params['node_id'])[:8]}-attempt{params['attempt']}"


ATTEMPT_FAILED = "AttemptFailed"
"""Name of the Failed state of a debug-attempt subflow run whose attempt failed."""


def debug_attempt(
    run_dir: str,
    node_id: str,
    slot: int,
    attempt: int,
    previous_code: str,
    previous_term_out: str,
    previous_exc_type: str | None,
    previous_problems: list[str],
) -> Attempt:
    """Run one debug attempt as its own subflow run (:func:`debug_attempt_flow`) and return its
    :class:`Attempt`, failed or not; the run itself ends Failed (``AttemptFailed``) when the
    attempt failed. An error of the flow itself (a sandbox failure) raises as before."""
    state = debug_attempt_flow(
        run_dir=run_dir, node_id=node_id, slot=slot, attempt=attempt, previous_code=previous_code,
        previous_term_out=previous_term_out, previous_exc_type=previous_exc_type,
        previous_problems=previous_problems, return_state=True,
    )
    return unwrap_attempt(state)


@flow(name="debug-attempt", flow_run_name=_run_name)
def debug_attempt_flow(
    run_dir: str,
    node_id: str,
    slot: int,
    attempt: int,
    previous_code: str,
    previous_term_out: str,
    previous_exc_type: str | None,
    previous_problems: list[str],
) -> Attempt | State:
    """Ask for a minimal fix of ``previous_code`` given its output, then execute the fix; a failed
    attempt ends the run Failed (``AttemptFailed``, the error's tail as its message, logged at
    WARNING).

    A generation that fails for good (a reply without code after its re-ask, a model error
    after its retries, the run's deadline), or a fix that returns the previous program
    unchanged, keeps the previous program and counts as a failed attempt with exc_type
    ``GenerationError`` without running anything (:func:`generation_failed`); the chain goes
    on, and the next attempt works on the last program that ran (flows/_step.py).
    """
    result = _attempt(run_dir, node_id, slot, attempt, previous_code, previous_term_out, previous_exc_type,
                      previous_problems)
    if not result.failed:
        return result
    state = failed_attempt_state(result, ATTEMPT_FAILED)
    get_run_logger().warning("node %s: debug %s", node_id[:8], state.message)
    return state


def _attempt(run_dir: str, node_id: str, slot: int, attempt: int, previous_code: str, previous_term_out: str,
             previous_exc_type: str | None, previous_problems: list[str]) -> Attempt:
    """The attempt itself: generate the fix, then run it (:func:`debug_attempt_flow`)."""
    try:
        fix = generate_debug(
            run_dir, node_id, slot, attempt, previous_code, previous_term_out, previous_exc_type, previous_problems
        )
    except Exception as exc:  # GenerationError, DeadlineReached, or a litellm error after the task's retries
        error = exc if isinstance(exc, GenerationError) else f"{type(exc).__name__}: {exc}"
        return _no_program(attempt, previous_code, f"debug attempt {attempt} produced no program: {error}",
                           getattr(exc, "usage", None) or LLMUsage())
    if generation.same_program(fix.code, previous_code):  # running it again would fail the same way
        return _no_program(attempt, previous_code,
                           f"debug attempt {attempt} returned the previous program unchanged", fix.usage)
    return execute(run_dir, node_id, fix.code, attempt, fix.plan, fix.usage)


def _no_program(attempt: int, previous_code: str, message: str, usage: LLMUsage) -> Attempt:
    """A failed attempt that ran nothing (:func:`generation_failed`): the previous program stays."""
    return Attempt(
        attempt=attempt,
        code=previous_code,
        result=ExecutionResult(
            stdout="", stderr=message, term_out=message, exit_code=None, exc_type=NO_PROGRAM,
            exc_info=message[:2000], exec_time=0.0, timed_out=False, output_truncated=False,
        ),
        problems=[message],
        usage=usage,
    )
