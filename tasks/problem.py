"""Tasks of a problem run before the search starts (SPEC §11): the initial program's
evaluation (the baseline) and the evaluation agent's auxiliary metrics file."""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_markdown_artifact

from swarm_evo.run.session import get_session
from swarm_evo.step import problem_setup
from tasks._policy import (
    LLM_RETRY,
    SANDBOX_RETRY_DELAYS,
    TASK_DEFAULTS,
    retry_on_sandbox_failure,
)
from tasks.artifacts import artifact_key


@task(
    name="evaluate-initial-program",
    retries=len(SANDBOX_RETRY_DELAYS),
    retry_delay_seconds=SANDBOX_RETRY_DELAYS,
    retry_condition_fn=retry_on_sandbox_failure,
    **TASK_DEFAULTS,
)
def evaluate_initial_program(run_dir: str) -> dict:
    """Evaluate the problem's initial program (RUN_DIR/initial_metrics.json); returns metrics.json."""
    return problem_setup.evaluate_initial_program(get_session(run_dir))


@task(
    name="write-auxiliary-metrics",
    **LLM_RETRY,
    **TASK_DEFAULTS,
)
def write_auxiliary_metrics(run_dir: str) -> dict:
    """The evaluation agent writes RUN_DIR/auxiliary_metrics.py; a markdown artifact shows
    the trial on the initial program's output."""
    session = get_session(run_dir)
    record = problem_setup.write_auxiliary_metrics(session)
    trial = record.get("trial") or {}
    lines = [f"# Auxiliary metrics of {session.objective.id}", "",
             f"File: `{record['file']}` (written: {record.get('written')})", ""]
    if record.get("error") or trial.get("error"):
        lines += [f"**Error:** {record.get('error') or trial.get('error')}", ""]
    lines += ["| metric | value on the initial program |", "|---|---|"]
    lines += [f"| {name} | {value:.6g} |" for name, value in (trial.get("metrics") or {}).items()]
    create_markdown_artifact(markdown="\n".join(lines) + "\n", key=artifact_key(run_dir, "auxiliary-metrics"),
                             description=f"Dynamic auxiliary metrics of {session.objective.id}")
    return record
