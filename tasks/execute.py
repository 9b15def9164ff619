"""Sandbox task: run a program in its node directory.

A program that fails (an exception, no valid submission, no metric line: ``Attempt.failed``)
ends its ``execute-attempt<n>`` task run in a Failed state named ``ProgramFailed`` whose message
is the error's tail, so the Prefect UI shows it in a failure colour (issue 54, item 2); the
attempt itself still reaches the caller (:data:`execute` unwraps the state), and the flow run
around it completes. A sandbox that fails (not the program) raises as before, after the task's
retries.
"""

from __future__ import annotations

from contextlib import nullcontext

from prefect import get_run_logger, task
from prefect.concurrency.sync import concurrency
from prefect.states import Failed, State

from swarm_evo.population.node import LLMUsage
from swarm_evo.reporting.failures import attempt_failure
from swarm_evo.run.session import get_session
from swarm_evo.search.debug_chain import Attempt
from swarm_evo.step import execution
from swarm_evo.store.pool import PoolUnavailableError, bind_pool
from tasks._policy import SANDBOX_RETRY_DELAYS, TASK_DEFAULTS, retry_on_sandbox_failure

PROGRAM_FAILED = "ProgramFailed"
"""Name of the Failed state of an execution whose program failed."""


def failed_attempt_state(attempt: Attempt, name: str = PROGRAM_FAILED) -> State:
    """A Failed state named ``name`` carrying ``attempt`` as its data and the error's tail as its
    message (:func:`swarm_evo.reporting.failures.attempt_failure`)."""
    result = attempt.result
    message = attempt_failure(attempt.attempt, result.exc_type, attempt.problems, result.term_out)
    return Failed(name=name, message=message, data=attempt)


def unwrap_attempt(state: State) -> Attempt:
    """The :class:`Attempt` of a task or flow run called with ``return_state=True``: its result
    when Completed, its data when it failed with one (a failed program); any other failure (a
    sandbox error, a crash) raises as a plain call would."""
    value = state.result(raise_on_failure=False)
    if isinstance(value, Attempt):
        return value
    return state.result()


@task(
    name="execute",
    task_run_name="execute-attempt{attempt}",
    retries=len(SANDBOX_RETRY_DELAYS),
    retry_delay_seconds=SANDBOX_RETRY_DELAYS,
    retry_condition_fn=retry_on_sandbox_failure,
    **TASK_DEFAULTS,
)
def execute_task(run_dir: str, node_id: str, code: str, attempt: int = 0, plan: str = "",
                 usage: LLMUsage | None = None) -> Attempt | State:
    """Execute ``code`` and check its outcome (exception, submission format, metric line); a
    failed program ends the task run Failed (``ProgramFailed``, :func:`failed_attempt_state`)
    with the error's tail logged at WARNING.

    With shared GPUs the execution holds a slot of the host's global concurrency limit. On the
    pool backend (issue 52, item 5) a pool that cannot run it (no worker within
    ``sandbox.pool_wait``, its workers lost past the retries) stops the run (resumable) and the
    step ends with that error: no node.
    """
    session = get_session(run_dir)
    bind_pool(session.sandbox, session.journal.info.get("run_id"), session.mirror)
    limit = session.sandbox.gpu_limit
    try:
        with concurrency(limit, occupy=1, strict=True) if limit else nullcontext():
            result = execution.execute_program(session, node_id, code, attempt, plan, usage)
    except PoolUnavailableError as exc:
        session.stop(str(exc), failure=True)
        raise
    if not result.failed:
        return result
    state = failed_attempt_state(result)
    get_run_logger().warning("node %s: %s", node_id[:8], state.message)
    return state


class _Execute:
    """:func:`execute_task` called as a function that returns the :class:`Attempt` whether the
    program failed or not (the task run keeps its Failed state in the UI); ``submit`` and
    every other attribute are the task's."""

    def __call__(self, run_dir: str, node_id: str, code: str, attempt: int = 0, plan: str = "",
                 usage: LLMUsage | None = None) -> Attempt:
        return unwrap_attempt(execute_task(run_dir, node_id, code, attempt, plan, usage, return_state=True))

    def __getattr__(self, name: str):
        return getattr(execute_task, name)


execute = _Execute()
"""Run a program (:func:`execute_task`) and return its :class:`Attempt`, failed or not."""
