"""LLM tasks: select the operation, generate a program, generate a debug fix."""

from __future__ import annotations

from prefect import task

from swarm_evo.run.session import get_session
from swarm_evo.step import generation, operations
from swarm_evo.step.request import OperationRequest
from tasks._policy import LLM_RETRY, TASK_DEFAULTS


@task(name="select-draft", **TASK_DEFAULTS)
def select_draft(run_dir: str, slot: int) -> OperationRequest:
    """Phase 1: the draft prompt with the draft history."""
    return operations.prepare_draft(get_session(run_dir), slot)


@task(name="select-phase2", **TASK_DEFAULTS)
def select_phase2(run_dir: str, slot: int) -> OperationRequest:
    """Phase 2: merge (pheromone gene plan) or mutate (tournament), and its prompt."""
    return operations.prepare_phase2(get_session(run_dir), slot)


@task(
    name="generate",
    task_run_name="generate-{request.operation}-slot{request.slot}",
    **LLM_RETRY,
    **TASK_DEFAULTS,
)
def generate(run_dir: str, node_id: str, request: OperationRequest) -> generation.Generated:
    """The operation's program, statically pre-validated (one self-fix). A failing self-fix
    never fails the task (the original program is kept), so a Prefect retry never pays for the
    program again; ``usage`` counts every call made for the node's generation, the failed ones
    and those of earlier task attempts too.

    Raises (after the retries of tasks._policy.LLM_RETRY): GenerationError or a litellm
    exception, with ``usage`` (the calls so far); flows/_step.py turns either into a dead node."""
    return generation.generate_program(get_session(run_dir), node_id, request)


@task(
    name="generate-debug",
    **LLM_RETRY,
    **TASK_DEFAULTS,
)
def generate_debug(
    run_dir: str,
    node_id: str,
    slot: int,
    attempt: int,
    code: str,
    term_out: str,
    exc_type: str | None,
    problems: list[str],
) -> generation.Generated:
    """The debug fix of attempt ``attempt`` for the previous attempt's code and error.

    Raises (after the retries of tasks._policy.LLM_RETRY): GenerationError or a litellm
    exception, with ``usage`` (the calls so far); flows/debug_attempt.py turns either into a
    failed attempt."""
    return generation.debug_program(get_session(run_dir), node_id, slot, attempt, code, term_out, exc_type, problems)
