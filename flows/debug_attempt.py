"""debug_attempt: one link of the chained debug, its own subflow run (SPEC §6).

Its parameters carry the previous attempt's code and error output, so attempt n visibly
works on attempt n−1's result in the Prefect UI (after an attempt whose fix could not be
generated, on the last attempt that ran). Prefect ``retries`` would re-run it with the
same parameters, which is why the chain is a loop of subflow runs and not a retry.
"""

from __future__ import annotations

from prefect import flow, runtime

from swarm_evo.llm.errors import GenerationError
from swarm_evo.population.node import LLMUsage
from swarm_evo.sandbox import ExecutionResult
from swarm_evo.search.debug_chain import Attempt
from swarm_evo.step import generation
from tasks.execute import execute
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


@flow(name="debug-attempt", flow_run_name=_run_name)
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
    """Ask for a minimal fix of ``previous_code`` given its output, then execute the fix.

    A generation that fails for good (a reply without code after its re-ask, a model error
    after its retries, the run's deadline), or a fix that returns the previous program
    unchanged, keeps the previous program and counts as a failed attempt with exc_type
    ``GenerationError`` without running anything (:func:`generation_failed`); the chain goes
    on, and the next attempt works on the last program that ran (flows/_step.py).
    """
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
