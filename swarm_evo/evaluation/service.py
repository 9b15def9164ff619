"""The Eval Service core: primary evaluation, auxiliary metrics, result files (seed 002; SPEC §11).

Seed 002's ``run_full_evaluation`` runs the primary evaluator, then the dynamic and static
auxiliary metrics, merges them and writes ``metrics.json`` / ``correct.json``.
:func:`evaluate_program` is that pipeline without the HTTP job service (Prefect's API plays
that role: the ``evaluate-program`` flow wraps this function). It never imports Prefect.

Failures are split by whose fault they are: the candidate program's (crash, timeout, invalid
output) are *results* (``correct=False`` with ``error``); the evaluator's own (an exception in
evaluate.py, a wrong return type) raise :class:`EvaluatorError`, so the flow run fails; the
sandbox's (daemon down) raise :class:`~swarm_evo.sandbox.base.SandboxError` (retryable).

A search run's deadline bounds a whole evaluation (issue 31): ``time_left`` covers every
sandbox execution of it (all ``num_runs`` runs, an evaluator's own reference runs, the
auxiliary metrics) through :class:`TimeBoundSandbox`, so an evaluation never outlasts the
run's time limit however many runs the problem asks for.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Callable

from swarm_evo.evaluation.auxiliary import run_auxiliary
from swarm_evo.evaluation.contract import (
    EXTRA_FILES,
    EvaluationResult,
    write_metrics_files,
    write_results,
)
from swarm_evo.evaluation.problem import Problem, ProblemError
from swarm_evo.sandbox.base import ExecutionResult, Sandbox, SandboxError, SandboxUnavailableError

log = logging.getLogger(__name__)


class EvaluatorError(RuntimeError):
    """The evaluator itself failed (not the program): missing program file, an exception in
    the problem's evaluate.py, or a return value that is not an EvaluationResult."""


class TimeBoundSandbox:
    """A sandbox whose executions all end within ``seconds`` from its creation: each execution's
    timeout is cut to the time left; once none is left, an execution does not start and reports
    a ``TimeoutError`` (``timed_out``; ``exc_info`` says it was not run). Any other attribute is
    the wrapped sandbox's.

    Args:
        sandbox: the sandbox to bound.
        seconds: the time the executions may take together (≥ 0).
        clock: monotonic clock in seconds (injectable for tests).
    """

    def __init__(self, sandbox: Sandbox, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.sandbox = sandbox
        self.seconds = max(0.0, float(seconds))
        self.clock = clock
        self.deadline = clock() + self.seconds
        self.gpu_limit = getattr(sandbox, "gpu_limit", None)

    def execute(self, code: str, workdir: Path, public_dir: Path, timeout: float) -> ExecutionResult:
        """:meth:`Sandbox.execute` with ``timeout`` cut to the time left (see the class)."""
        left = self.deadline - self.clock()
        if left <= 0:
            reason = (f"not run: the evaluation's {self.seconds:.0f} s (the time left before the run's "
                      "time limit) are used up")
            return ExecutionResult(exc_type="TimeoutError", exc_info=reason, term_out=f"TimeoutError: {reason}",
                                   timed_out=True)
        return self.sandbox.execute(code, workdir, public_dir, min(float(timeout), left))

    def __getattr__(self, name: str):
        return getattr(self.sandbox, name)


def evaluate_program(
    problem: Problem,
    program_path: Path,
    results_dir: Path,
    *,
    sandbox: Sandbox,
    timeout: float | None = None,
    num_runs: int | None = None,
    auxiliary_path: Path | None = None,
    auxiliary_timeout: float = 10.0,
    use_static_auxiliary: bool = True,
    time_left: float | None = None,
) -> EvaluationResult:
    """Evaluate one program of ``problem`` and write its result files into ``results_dir``.

    Steps (seed 002 ``run_full_evaluation``):

    1. ``program_path`` must exist.
    2. Primary: ``problem.evaluator()(str(program_path), str(results_dir), sandbox=sandbox,
       problem=problem, timeout=timeout or problem.timeout, num_runs=num_runs or
       problem.num_runs)``. A non-finite ``combined_score`` makes the result incorrect; an
       incorrect result always scores 0.0.
    3. :func:`write_results` (metrics.json, correct.json, extra.*), so the output exists on disk.
    4. When the result is correct and a program output exists: the static auxiliary file
       (``problem.static_auxiliary``, if ``use_static_auxiliary``) and the dynamic one
       (``auxiliary_path``, if that file exists), each in the sandbox with
       ``auxiliary_timeout`` seconds (:func:`run_auxiliary`). Metrics and definitions are
       merged (a dynamic metric never replaces a static one of the same name); errors go to
       ``auxiliary_errors[source]``; they never change ``correct`` or ``combined_score``.
    5. metrics.json and correct.json again (with the auxiliary metrics); return the result.

    Args:
        timeout: seconds per run (default ``problem.timeout``).
        num_runs: runs of the program (default ``problem.num_runs``).
        time_left: seconds the whole evaluation may take (a search run's time left before its
            deadline), primary runs and auxiliary metrics together; None: no bound beyond the
            per-run ``timeout``. Runs that find no time left are not started and count as timed
            out (the result is then incorrect); auxiliary metrics without time get an error.

    Raises:
        EvaluatorError: the program file is missing, the evaluator raised (message has the
            exception type and text) or returned something other than an EvaluationResult.
        SandboxError: the sandbox failed (passed through unchanged so callers may retry).
    """
    program_path = Path(program_path)
    results_dir = Path(results_dir)
    if not program_path.is_file():
        raise EvaluatorError(f"program {program_path} not found")
    results_dir.mkdir(parents=True, exist_ok=True)
    if time_left is not None:
        sandbox = TimeBoundSandbox(sandbox, time_left)
    try:
        evaluate = problem.evaluator()
    except ProblemError as exc:
        raise EvaluatorError(f"evaluator of problem '{problem.name}' cannot be loaded: {exc}") from exc
    try:
        result = evaluate(
            str(program_path),
            str(results_dir),
            sandbox=sandbox,
            problem=problem,
            timeout=float(timeout if timeout is not None else problem.timeout),
            num_runs=int(num_runs if num_runs is not None else problem.num_runs),
        )
    except SandboxError:
        raise
    except Exception as exc:
        raise EvaluatorError(
            f"evaluator of problem '{problem.name}' failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(result, EvaluationResult):
        raise EvaluatorError(
            f"evaluator of problem '{problem.name}' returned {type(result).__name__}, "
            "expected an EvaluationResult"
        )
    result = _enforce_invariants(result)
    write_results(result, results_dir)

    has_output = result.program_output is not None or any((results_dir / n).is_file() for n in EXTRA_FILES)
    if result.correct and has_output:
        jobs: list[tuple[str, Path]] = []
        if use_static_auxiliary and problem.static_auxiliary is not None:
            jobs.append(("auxiliary_static", problem.static_auxiliary))
        if auxiliary_path is not None and Path(auxiliary_path).is_file():
            jobs.append(("auxiliary_dynamic", Path(auxiliary_path)))
        metrics = dict(result.auxiliary_metrics)
        definitions = dict(result.auxiliary_definitions)
        errors = dict(result.auxiliary_errors)
        for source, path in jobs:
            try:
                values, defs, error = run_auxiliary(
                    sandbox, path, results_dir, source=source, timeout=auxiliary_timeout
                )
            except SandboxUnavailableError:  # the sandbox cannot run programs any more (the pool backend's
                raise  # missing workers, issue 52): not the auxiliary file's error
            except Exception as exc:  # noqa: BLE001 - auxiliary errors never fail the primary evaluation
                log.warning("auxiliary metrics %s of %s failed: %s: %s", source, results_dir, type(exc).__name__, exc)
                values, defs, error = {}, {}, f"{type(exc).__name__}: {exc}"
            for name, value in values.items():
                if name not in metrics:
                    metrics[name] = value
                    definitions[name] = defs[name]
            if error:
                errors[source] = error
        result = result.model_copy(
            update={"auxiliary_metrics": metrics, "auxiliary_definitions": definitions, "auxiliary_errors": errors}
        )
        write_metrics_files(result, results_dir)  # extra.* is unchanged since step 3
    return result


def _enforce_invariants(result: EvaluationResult) -> EvaluationResult:
    """combined_score finite, and 0.0 whenever the result is not correct (SPEC §11)."""
    score = result.combined_score
    if not math.isfinite(score):
        return result.model_copy(
            update={
                "correct": False,
                "combined_score": 0.0,
                "error": result.error or f"non-finite combined_score {score!r}",
            }
        )
    if not result.correct and score != 0.0:
        return result.model_copy(update={"combined_score": 0.0})
    return result
