"""A program-optimisation problem as the search's objective (SPEC §11, seed 002).

Every program the search writes is evaluated through the Eval Service core
(:func:`swarm_evo.evaluation.evaluate_program`): the candidate runs in the sandbox, the
problem's evaluator validates its output and recomputes the score, auxiliary metrics are added,
and ``metrics.json`` / ``correct.json`` land in ``nodes/<id>/results/``. Fitness is
``combined_score`` (always maximised); the loci are the problem's own section markers.

Run directory additions::

    RUN_DIR/initial/                  the problem's initial program and its evaluation
    RUN_DIR/initial_metrics.json      that evaluation's metrics.json
    RUN_DIR/auxiliary_metrics.py      the agent-written dynamic auxiliary metrics
    RUN_DIR/best_solution.py          the best valid node's program
    RUN_DIR/best_metrics.json         the best node's metrics.json
    RUN_DIR/problem_report.json       the final report (ProblemReport)
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, Field

from swarm_evo.evaluation import EvaluationResult, Problem, evaluate_program
from swarm_evo.objective.base import Assessment
from swarm_evo.population.genes import marker, parse_genes
from swarm_evo.population.journal import atomic_copy, atomic_write_text
from swarm_evo.population.node import Node
from swarm_evo.population.source import parse_program
from swarm_evo.prompting.prompts import templates_dir
from swarm_evo.sandbox import ExecutionResult, Sandbox
from swarm_evo.search.debug_chain import Attempt

RESULTS_DIR = "results"
INITIAL_DIR = "initial"
INITIAL_METRICS = "initial_metrics.json"
BEST_METRICS = "best_metrics.json"
DYNAMIC_AUXILIARY = "auxiliary_metrics.py"
REPORT_FILE = "problem_report.json"
AUXILIARY_TIMEOUT = 10.0
"""Seconds each auxiliary metrics file may run (seed 002's default)."""


class ProblemReport(BaseModel):
    """The end of a problem run: the best node's evaluation next to the initial program's.

    ``score`` and ``initial_score`` are ``combined_score`` values (maximised); ``raw_score``
    is the problem's own number (e.g. the sum of radii, the tour length) with its
    ``interpretation``; ``gap_to_known_best`` is ``known_best − raw_score`` for
    higher-is-better scores and ``raw_score − known_best`` otherwise (None when unknown).
    ``instance``: the problem's instance (e.g. ``kroA100``; None for problems without).
    """

    problem: str
    instance: str | None = None
    best_node_id: str | None = None
    best_step: int | None = None
    correct: bool = False
    score: float | None = None
    initial_score: float | None = None
    improvement: float | None = None
    score_name: str
    raw_score: float | None = None
    initial_raw_score: float | None = None
    interpretation: str
    known_best: float | None = None
    gap_to_known_best: float | None = None
    public_metrics: dict[str, Any] = Field(default_factory=dict)
    auxiliary_metrics: dict[str, float] = Field(default_factory=dict)


def _raw(metrics: dict | None, name: str) -> float | None:
    value = (metrics or {}).get("public", {}).get(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _read_json(path: Path) -> dict | None:
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


class ProblemObjective:
    """The search's view of one problem (see :class:`swarm_evo.objective.Objective`).

    Args:
        problem: the loaded problem (swarm_evo.evaluation.load_problem).
        auxiliary_path: the dynamic auxiliary metrics file every evaluation runs (set once the
            agent has written it; None = static auxiliary metrics only).
        time_left: seconds left before the run's deadline (``Budget.time_left``; set by the
            session), which bounds each whole evaluation, all ``num_runs`` runs and the
            auxiliary metrics together; None (or a call returning None) = no bound.
    """

    kind = "problem"
    is_lower_better = False

    def __init__(self, problem: Problem, auxiliary_path: Path | None = None,
                 time_left: Callable[[], float | None] | None = None):
        self.problem = problem
        self.id = problem.name
        self.instance = problem.instance
        self.label = problem.label
        self.loci = tuple(problem.loci)
        self.required_loci = tuple(problem.required_loci)
        self.agent_texts_dir = templates_dir() / "agents" / "program"
        self.auxiliary_path = auxiliary_path
        self.time_left = time_left

    def prompt_view(self) -> dict[str, Any]:
        """name (the title, naming the instance), description (rendered for the instance), the
        entry function, the score, the instance, the seconds per run and the initial program."""
        p = self.problem
        return {
            "kind": self.kind,
            "id": p.name,
            "name": p.title,
            "description": p.description,
            "metric": f"combined_score ({p.score_name}, {p.score_interpretation.replace('_', ' ')})",
            "is_lower_better": False,
            "entry": p.entry,
            "score_name": p.score_name,
            "known_best": p.known_best,
            "instance": p.instance,
            "initial_program": p.initial_program,
            "timeout": p.timeout,
        }

    def offline_view(self) -> dict[str, Any]:
        """``{"problem": {...}}`` as /work docs/CONTRACTS.md describes for problem runs."""
        p = self.problem
        return {
            "problem": {
                "name": p.name,
                "entry": p.entry,
                "loci": list(p.loci),
                "required_loci": list(p.required_loci),
                "initial_program": p.initial_program,
                "alleles": {locus: dict(texts) for locus, texts in p.alleles.items()},
                "score_name": p.score_name,
                "directions": list(p.directions),
            }
        }

    def data_preview(self) -> str:
        """Problems pass their data as call arguments; there is no file preview."""
        return ""

    def directions(self) -> list[tuple[str, tuple[str, ...]]]:
        """The problem's own ideas (problem.yaml ``directions``), offered until tried."""
        return [(text, ()) for text in self.problem.directions]

    def has_text_data(self) -> bool:
        """Problems have no text inputs for the ML catalogue (their directions are their own)."""
        return False

    def static_check(self, code: str) -> list[str]:
        """Compiles, carries every section marker, defines the entry function at top level."""
        errors: list[str] = []
        try:
            tree = parse_program(code)
        except SyntaxError as exc:
            where = f"line {exc.lineno}" if exc.lineno else "an unknown line"
            return [f"The program does not compile: {type(exc).__name__} at {where}: {exc.msg}. "
                    "Fix the syntax so that the whole file compiles."]
        missing = [locus for locus in self.loci if locus not in parse_genes(code)]
        if missing:
            errors.append(
                f"Missing section marker(s): {', '.join(f'`{marker(m)}`' for m in missing)}. Keep all "
                f"{len(self.loci)} markers ({', '.join(self.loci)}), each alone on its line, in that order."
            )
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if self.problem.entry not in defined:
            errors.append(
                f"The program must define `def {self.problem.entry}(...)` at the top level: the evaluator "
                "imports the file and calls it."
            )
        return errors

    def run_timeout(self, timeout: float) -> float:
        """Seconds per candidate run: the problem's timeout, capped by the step's."""
        return max(1.0, min(float(self.problem.timeout), float(timeout)))

    def evaluate(self, sandbox: Sandbox, program: Path, results_dir: Path, timeout: float) -> EvaluationResult:
        """Evaluate ``program`` into a fresh ``results_dir`` (primary + auxiliary metrics): each
        run within :meth:`run_timeout`, the whole evaluation within ``time_left()`` (issue 31:
        a problem with ``num_runs`` > 1 never outlasts the run's deadline).

        Raises:
            EvaluatorError: the problem's evaluator itself failed.
        """
        shutil.rmtree(results_dir, ignore_errors=True)
        return evaluate_program(
            self.problem, program, results_dir, sandbox=sandbox, timeout=self.run_timeout(timeout),
            auxiliary_path=self.auxiliary_path if self.auxiliary_path and self.auxiliary_path.is_file() else None,
            auxiliary_timeout=AUXILIARY_TIMEOUT, time_left=self.time_left() if self.time_left else None,
        )

    def assess(self, sandbox: Sandbox, code: str, workdir: Path, timeout: float) -> Assessment:
        """Write ``workdir/solution.py`` and evaluate it into ``workdir/results/``."""
        workdir.mkdir(parents=True, exist_ok=True)
        program = workdir / "solution.py"
        program.write_text(code, encoding="utf-8")
        evaluation = self.evaluate(sandbox, program, workdir / RESULTS_DIR, timeout)
        return Assessment(
            result=execution_view(evaluation),
            problems=[] if evaluation.correct else [evaluation.error or "the evaluation did not pass"],
            metric=evaluation.combined_score if evaluation.correct else None,
            evaluation=evaluation.summary(),
        )

    def review_facts(self, final: Attempt, workdir: Path) -> tuple[list[str], float | None]:
        """The evaluation's verdict: its error (unless the run crashed) and the score."""
        evaluation = final.evaluation or {}
        errors = []
        if not evaluation.get("correct") and final.result.exc_type is None:
            errors.append(f"evaluation: {evaluation.get('error') or 'the output did not pass validation'}")
        return errors, final.metric

    def evaluate_initial(self, sandbox: Sandbox, run_dir: Path, timeout: float) -> EvaluationResult:
        """Evaluate the problem's initial program into ``RUN_DIR/initial/`` and copy its
        metrics.json to ``RUN_DIR/initial_metrics.json`` (the baseline of the report)."""
        folder = run_dir / INITIAL_DIR
        folder.mkdir(parents=True, exist_ok=True)
        program = folder / "solution.py"
        program.write_text(self.problem.initial_program, encoding="utf-8")
        evaluation = self.evaluate(sandbox, program, folder / RESULTS_DIR, timeout)
        shutil.copyfile(folder / RESULTS_DIR / "metrics.json", run_dir / INITIAL_METRICS)
        return evaluation

    def publish_best(self, run_dir: Path, node: Node) -> None:
        """``best_solution.py`` and ``best_metrics.json`` of ``node``, each replaced atomically."""
        atomic_write_text(run_dir / "best_solution.py", node.code)
        atomic_copy(run_dir / "nodes" / node.id / RESULTS_DIR / "metrics.json", run_dir / BEST_METRICS)

    def finalize(self, run_dir: Path, handed_in: Node | None) -> ProblemReport:
        """Write ``problem_report.json`` for ``handed_in`` (whose ``best_solution.py`` and
        ``best_metrics.json`` :meth:`publish_best` already wrote; None: no node was handed in)."""
        p = self.problem
        best = handed_in
        initial = _read_json(run_dir / INITIAL_METRICS)
        best_metrics = _read_json(run_dir / BEST_METRICS) if best is not None else None
        raw = _raw(best_metrics, p.score_name)
        gap = None
        if raw is not None and p.known_best is not None:
            gap = p.known_best - raw if p.score_interpretation != "lower_better" else raw - p.known_best
        initial_score = (initial or {}).get("combined_score")
        score = best.metric_value if best is not None else None
        report = ProblemReport(
            problem=p.name,
            instance=p.instance,
            best_node_id=best.id if best else None,
            best_step=best.step if best else None,
            correct=bool(best_metrics and best_metrics.get("correct", True)),
            score=score,
            initial_score=initial_score,
            improvement=None if score is None or initial_score is None else score - initial_score,
            score_name=p.score_name,
            raw_score=raw,
            initial_raw_score=_raw(initial, p.score_name),
            interpretation=p.score_interpretation,
            known_best=p.known_best,
            gap_to_known_best=gap,
            public_metrics=(best_metrics or {}).get("public", {}),
            auxiliary_metrics=(best_metrics or {}).get("auxiliary", {}),
        )
        atomic_write_text(run_dir / REPORT_FILE, report.model_dump_json(indent=2))
        return report


def execution_view(evaluation: EvaluationResult) -> ExecutionResult:
    """One ExecutionResult standing for an evaluation's runs (what the node and the debug
    prompt show): the first failing run's output (else the first run's), plus a last line
    with the evaluator's verdict; ``exec_time`` is the total over runs."""
    runs = evaluation.runs
    shown = next((r for r in runs if r.exc_type or r.error), runs[0] if runs else None)
    verdict = (
        f"Evaluation: correct, combined_score={evaluation.combined_score:.6g}"
        if evaluation.correct
        else f"Evaluation: NOT correct: {evaluation.error or 'failed'}"
    )
    term_out = ((shown.term_out.rstrip() + "\n") if shown and shown.term_out else "") + verdict
    return ExecutionResult(
        stdout=term_out,
        term_out=term_out,
        exc_type=shown.exc_type if shown else None,
        exc_info=shown.exc_info if shown else None,
        exec_time=round(sum(r.exec_time for r in runs), 3),
        timed_out=bool(shown and shown.timed_out),
    )
