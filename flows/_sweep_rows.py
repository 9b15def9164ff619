"""The rows of a benchmark sweep (flows/benchmark_sweep.py): one per finished run, read from
the run's own report, collected in plan order with a progress artifact.

A sweep item is ``(task, policy, seed)``: ``task`` is a competition id, or the ``task`` string
of a :class:`swarm_evo.sweeps.sweep_problems.ProblemTask` (``tsp:kroA100``) listed in ``problems``.
A competition run's row is its ``RUN_DIR/grade_report.json`` (:func:`swarm_evo.sweeps.sweep.report_row`),
a problem run's its ``RUN_DIR/problem_report.json`` (:func:`swarm_evo.sweeps.sweep_problems.problem_row`);
a run that failed gets a row without a score and ``error = "run failed: ..."``.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from prefect import get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.exceptions import MissingContextError

from swarm_evo.competition import CompetitionError, load_competition
from swarm_evo.evaluation import ProblemError, load_problem
from swarm_evo.objective.load import stored_competition
from swarm_evo.population.journal import RESULT_FILE
from swarm_evo.store import StoreError, is_url
from swarm_evo.sweeps import sweep, sweep_problems
from swarm_evo.sweeps.sweep_store import SweepStore

Item = tuple[str, str, int]
"""``(task, policy, seed)``."""


def _direction(competition_id: str, data_dir: str) -> bool:
    """is_lower_better of the competition (False when it cannot be loaded here); a store URL is
    read through this machine's data cache (its public part)."""
    try:
        if is_url(data_dir):
            return stored_competition(competition_id, data_dir).is_lower_better
        return load_competition(competition_id, Path(data_dir)).is_lower_better
    except (CompetitionError, StoreError):
        return False


def failed_row(item: Item, run_dir: Path, data_dir: str, problems: dict[str, sweep_problems.ProblemTask],
               problem_data_dir: str | None, error: str) -> dict:
    """The row of a run that ended without a report (competition or problem, see the module)."""
    task, policy, seed = item
    if task not in problems:
        return sweep.failed_row(task, is_lower_better=_direction(task, data_dir), policy=policy, seed=seed,
                                run_dir=run_dir, error=error)
    problem_task = problems[task]
    try:
        problem = load_problem(problem_task.problem, Path(problem_data_dir) if problem_data_dir else None,
                               problem_task.instance)
        meta = dict(score_name=problem.score_name, is_lower_better=problem.score_interpretation == "lower_better",
                    known_best=problem.known_best)
    except ProblemError:
        meta = dict(score_name=None, is_lower_better=False, known_best=None)
    return sweep_problems.failed_problem_row(problem_task, policy=policy, seed=seed, run_dir=run_dir, error=error,
                                             **meta)


def row_from_run(item: Item, run_dir: Path, data_dir: str, problems: dict[str, sweep_problems.ProblemTask],
                 problem_data_dir: str | None, result: dict | None, error: str | None,
                 missing: str | None = None) -> dict:
    """The row of a finished run.

    A run that failed (``error``) gets a failed row even if its directory holds a report (it
    may be an earlier attempt's). A completed run: its report file in ``run_dir``, else the
    report in its returned summary (``result``), else a failed row saying so (``missing``: why
    the report may be unreachable).
    """
    task, policy, seed = item
    is_problem = task in problems
    report_file = sweep_problems.PROBLEM_REPORT_FILE if is_problem else sweep.GRADE_REPORT_FILE
    report = None
    if error is None:
        report = sweep_problems.read_problem_report(run_dir) if is_problem else sweep.read_grade_report(run_dir)
        if report is None and isinstance(result, dict):
            report = result.get("problem_report" if is_problem else "grade_report")
        if report is None:
            error = missing or f"the run completed without {run_dir / report_file}"
    if report is None:
        return failed_row(item, run_dir, data_dir, problems, problem_data_dir, error)
    if is_problem:
        return sweep_problems.problem_row(report, problems[task], policy=policy, seed=seed, run_dir=run_dir)
    return sweep.report_row(report, policy=policy, seed=seed, run_dir=run_dir)


def stored_row(sweep_store: SweepStore | None, item: Item, run_dir: Path, data_dir: str, problems: dict,
               problem_data_dir: str | None, result: dict | None, error: str | None, missing: str | None = None,
               resumes: int = 0) -> dict:
    """:func:`row_from_run`, with a run store: when the store's copy of the run's reports is final
    (it holds ``result.json``, uploaded last), its reports, ``result.json`` and submission are
    first copied from ``STORE/sweeps/<sweep>/runs/<run name>/`` into ``run_dir`` (the sweep's
    own ``OUT/runs/<run name>``), so the row is the store's, whichever machine ran the run;
    otherwise (the last upload did not finish, or the store does not answer) the row uses the
    local files, with a warning, and nothing local is deleted (issue 40, item 5). The row adds
    ``run_url`` (what ``swarm-evo resume`` takes) and ``resumes`` (times the sweep resumed the
    run after a crash or its run timeout)."""
    if sweep_store is None:
        return row_from_run(item, run_dir, data_dir, problems, problem_data_dir, result, error, missing)
    url = sweep_store.run_url(run_dir.name)
    try:
        stored = sweep_store.fetch_reports(run_dir.name, run_dir)
        why = None if stored.final else f"it holds no {RESULT_FILE} yet: the run's last upload did not finish"
    except Exception as exc:  # the store is down: the local files, if any, make the row
        stored, why = None, f"the store does not answer ({type(exc).__name__}: {exc})"
    if why is not None:
        _logger().warning("run %s: the store's copy %s is not final (%s); the row uses the local files in %s",
                          run_dir.name, url, why, run_dir)
    if stored is not None and stored.result is not None:
        result = stored.result
    row = row_from_run(item, run_dir, data_dir, problems, problem_data_dir, result, error,
                       missing=f"the run completed without a report in the store ({url})" if why is None else
                       f"the run completed, but its reports are neither final in the store {url} ({why}) nor in "
                       f"{run_dir}")
    row.update(run_url=url, resumes=resumes)
    return row


def _logger():
    """The flow run's logger inside a flow, else this module's."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(__name__)


def has_report(item: Item, run_dir: Path, problems: dict) -> bool:
    """True when the run's report file is readable here."""
    if item[0] in problems:
        return sweep_problems.read_problem_report(run_dir) is not None
    return sweep.read_grade_report(run_dir) is not None


def describe(row: dict) -> str:
    """``score S (valid submission: V)`` or, for a problem, ``tour_length S (valid: V)``."""
    if sweep_problems.is_problem_row(row):
        return f"{row.get('score_name') or 'score'} {row['score']} (valid: {row['valid']})"
    return f"score {row['score']} (valid submission: {row['valid_submission']})"


class Rows:
    """The sweep's rows in plan order; each finished run rewrites the output files.

    ``reused``: rows of a restarted sweep's finished runs (swarm_evo/sweeps/sweep_identity.py),
    kept as they are; the other items get theirs through :meth:`add`.
    """

    def __init__(self, items: list[Item], out_dir: Path, sweep_store: SweepStore | None = None,
                 reused: dict[Item, dict] | None = None):
        self._order = {item: i for i, item in enumerate(items)}
        self._rows: dict[Item, dict] = dict(reused or {})
        self.out_dir = out_dir
        self.sweep_store = sweep_store  # the files also go to STORE/sweeps/<sweep>/
        self._lock = threading.Lock()
        self._progress = create_progress_artifact(
            progress=self._done(), description=f"Finished runs of the benchmark sweep {out_dir}, as % of {len(items)}"
        )

    def _done(self) -> float:
        return 100.0 * len(self._rows) / max(1, len(self._order))

    def add(self, item: Item, row: dict) -> None:
        with self._lock:
            self._rows[item] = row
            sweep.write_outputs(self.rows(), self.out_dir)
            self.publish()
            done = self._done()
        update_progress_artifact(artifact_id=self._progress, progress=done)

    def publish(self) -> None:
        """Copy the sweep's files to the store (a store that fails is logged; they stay in OUT)."""
        if self.sweep_store is None:
            return
        try:
            self.sweep_store.publish(self.out_dir)
        except Exception as exc:
            _logger().warning("the sweep's files could not be copied to %s (%s: %s); they are in %s",
                              self.sweep_store.url, type(exc).__name__, exc, self.out_dir)

    def rows(self) -> list[dict]:
        return [self._rows[item] for item in sorted(self._rows, key=self._order.__getitem__)]
