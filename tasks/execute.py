"""Sandbox task: run a program in its node directory."""

from __future__ import annotations

from contextlib import nullcontext

from prefect import task
from prefect.concurrency.sync import concurrency

from swarm_evo.population.node import LLMUsage
from swarm_evo.run.session import get_session
from swarm_evo.search.debug_chain import Attempt
from swarm_evo.step import execution
from tasks._policy import SANDBOX_RETRY_DELAYS, TASK_DEFAULTS, retry_on_sandbox_failure


@task(
    name="execute",
    task_run_name="execute-attempt{attempt}",
    retries=len(SANDBOX_RETRY_DELAYS),
    retry_delay_seconds=SANDBOX_RETRY_DELAYS,
    retry_condition_fn=retry_on_sandbox_failure,
    **TASK_DEFAULTS,
)
def execute(run_dir: str, node_id: str, code: str, attempt: int = 0, plan: str = "",
            usage: LLMUsage | None = None) -> Attempt:
    """Execute ``code`` and check its outcome (exception, submission format, metric line).

    With shared GPUs the execution holds a slot of the host's global concurrency limit.
    """
    session = get_session(run_dir)
    limit = session.sandbox.gpu_limit
    with concurrency(limit, occupy=1, strict=True) if limit else nullcontext():
        return execution.execute_program(session, node_id, code, attempt, plan, usage)
