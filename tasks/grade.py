"""Grade task: best node's files to the run directory, graded on the private answers."""

from __future__ import annotations

from prefect import task

from swarm_evo import steps
from swarm_evo.competition import CompetitionReport
from swarm_evo.node import Node
from swarm_evo.session import get_session
from tasks._policy import TASK_DEFAULTS


@task(name="grade-best", **TASK_DEFAULTS)
def grade_best(run_dir: str) -> tuple[Node | None, CompetitionReport]:
    """Write best_solution.py, submission/submission.csv and grade_report.json."""
    return steps.finalize_run(get_session(run_dir))


@task(name="write-run-report", **TASK_DEFAULTS)
def write_run_report(run_dir: str) -> dict:
    """Write RUN_DIR/run_report.json (operations, steps per agent, agent evolutions)."""
    return steps.write_run_report(get_session(run_dir))
