"""Grade task: the best node's files to the run directory, and its grade (competitions: on
the private answers; problems: its evaluation next to the initial program's)."""

from __future__ import annotations

from contextlib import nullcontext

from prefect import task
from prefect.concurrency.sync import concurrency
from pydantic import BaseModel

from swarm_evo.population.node import Node
from swarm_evo.run.session import get_session
from swarm_evo.step import persistence
from tasks._policy import TASK_DEFAULTS


@task(name="grade-best", **TASK_DEFAULTS)
def grade_best(run_dir: str) -> tuple[Node | None, BaseModel]:
    """Write best_solution.py and the report: competitions submission/submission.csv (after the
    final fit of a run with a hidden split, which holds a GPU slot as an execution does) and
    grade_report.json; problems best_metrics.json and problem_report.json."""
    session = get_session(run_dir)
    limit = session.sandbox.gpu_limit
    with concurrency(limit, occupy=1, strict=True) if limit else nullcontext():
        return persistence.finalize_run(session)


@task(name="write-run-report", **TASK_DEFAULTS)
def write_run_report(run_dir: str) -> dict:
    """Write RUN_DIR/run_report.json (operations, steps per agent, agent evolutions)."""
    return persistence.write_run_report(get_session(run_dir))
