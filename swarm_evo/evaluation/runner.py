"""The generic multi-run driver evaluators use (ShinkaEvolve's ``run_shinka_eval``; SPEC §11).

``run_shinka_eval(program_path, results_dir, experiment_fn_name, num_runs,
get_experiment_kwargs, validate_fn, aggregate_metrics_fn)`` imports the candidate into the
evaluator and calls it ``num_runs`` times. :func:`evaluate_runs` keeps that shape but runs
every call in the sandbox through :func:`~swarm_evo.evaluation.harness.call_entry` (one
sandbox execution per run, with its own timeout), and leaves validation and scoring to the
evaluator's ``score_run``, which must recompute the score from the outputs and never trust a
number the program reports.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, Field

from swarm_evo.evaluation.contract import EvaluationResult, MetricDefinition, RunLog
from swarm_evo.evaluation.harness import HarnessRun, call_entry
from swarm_evo.sandbox.base import Sandbox

RUNS_DIR = "runs"


class RunScore(BaseModel):
    """An evaluator's verdict on one run (what ``score_run`` returns).

    Fields:
        correct: the outputs passed validation.
        score: this run's combined score (maximised; forced to 0.0 when not correct).
        error: why the run is not correct (one line), None when it is.
        public: metrics of this run shown to the LLM (raw score, direction, diagnostics).
        private: metrics never shown to the LLM.
        output: the validated program output to keep (stored as ``extra.*``), or None.
    """

    correct: bool
    score: float = 0.0
    error: str | None = None
    public: dict[str, Any] = Field(default_factory=dict)
    private: dict[str, Any] = Field(default_factory=dict)
    output: Any = None


def run_dir(results_dir: Path, run: int) -> Path:
    """The directory of run ``run`` (0-based): ``results_dir/runs/run-<run>``."""
    return Path(results_dir) / RUNS_DIR / f"run-{run}"


def evaluate_runs(
    program_path: Path,
    results_dir: Path,
    *,
    sandbox: Sandbox,
    entry: str,
    calls_for_run: Callable[[int], list[dict]],
    score_run: Callable[[int, list[Any], HarnessRun], RunScore],
    num_runs: int,
    timeout: float,
    definitions: dict[str, MetricDefinition] | None = None,
) -> EvaluationResult:
    """Run the candidate ``num_runs`` times in the sandbox and aggregate the scores.

    Run ``i`` (0-based) executes ``calls_for_run(i)`` (``[{"args": [...], "kwargs": {...}}]``)
    in ``results_dir/runs/run-<i>/`` via :func:`call_entry` with ``timeout`` seconds. A crash,
    timeout, missing entry or unencodable output makes the run incorrect with the harness
    error; otherwise ``score_run(i, outputs, harness_run)`` validates the outputs and returns
    a :class:`RunScore` (a correct run with a non-finite score is made incorrect).

    Aggregation: ``correct`` = every run correct; ``combined_score`` = mean of the run
    scores when correct, else 0.0; ``error`` = the first run error; ``public_metrics`` /
    ``private_metrics`` / ``program_output`` = those of the best-scoring correct run (else of
    the first run); ``execution_time`` = mean sandbox ``exec_time`` (s); ``runs`` = one
    :class:`RunLog` per run; ``auxiliary_definitions`` = ``definitions`` (the evaluator's
    primary metric definitions, if any). Writes no result files (the Eval Service does).

    Raises:
        ValueError: ``num_runs`` < 1 or ``program_path`` cannot be read.
        Exception: whatever ``calls_for_run``/``score_run`` raise (evaluator bugs, which the
            Eval Service reports as EvaluatorError) and SandboxError.
    """
    if num_runs < 1:
        raise ValueError(f"num_runs must be at least 1, got {num_runs}")
    try:
        code = Path(program_path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the program {program_path}: {exc}") from exc
    scores: list[RunScore] = []
    logs: list[RunLog] = []
    for i in range(num_runs):
        harness = call_entry(sandbox, code, entry, calls_for_run(i), run_dir(results_dir, i), timeout)
        if harness.error is not None or harness.outputs is None:
            score = RunScore(correct=False, error=harness.error or "the program returned no outputs")
        else:
            score = score_run(i, harness.outputs, harness)
            if not isinstance(score, RunScore):
                raise TypeError(f"score_run returned {type(score).__name__}, expected RunScore")
            score = _checked(score)
        scores.append(score)
        ex = harness.execution
        logs.append(
            RunLog(
                run=i,
                exec_time=ex.exec_time,
                exc_type=ex.exc_type,
                exc_info=ex.exc_info,
                timed_out=ex.timed_out,
                term_out=ex.term_out,
                error=score.error,
            )
        )
    correct = all(s.correct for s in scores)
    valid = [s for s in scores if s.correct]
    best = max(valid, key=lambda s: s.score) if valid else scores[0]
    error = next((s.error for s in scores if s.error), None)
    return EvaluationResult(
        combined_score=sum(s.score for s in scores) / len(scores) if correct else 0.0,
        correct=correct,
        error=error,
        public_metrics=dict(best.public),
        private_metrics=dict(best.private),
        auxiliary_definitions=dict(definitions or {}),
        program_output=best.output,
        execution_time=sum(log.exec_time for log in logs) / len(logs),
        num_runs=num_runs,
        num_valid_runs=len(valid),
        runs=logs,
    )


def _checked(score: RunScore) -> RunScore:
    """Force the invariants: an incorrect run scores 0.0 and has an error; scores are finite."""
    if score.correct and not math.isfinite(score.score):
        return score.model_copy(update={"correct": False, "score": 0.0, "error": f"non-finite score {score.score!r}"})
    if not score.correct:
        return score.model_copy(update={"score": 0.0, "error": score.error or "the output failed validation"})
    return score
