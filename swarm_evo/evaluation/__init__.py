"""The Eval Service (SPEC §11; seed 002): task-agnostic evaluation of candidate programs.

* :mod:`~swarm_evo.evaluation.contract`: EvaluationResult, MetricDefinition, RunLog and the
  ShinkaEvolve-compatible result files (metrics.json, correct.json, extra.*).
* :mod:`~swarm_evo.evaluation.codec`: tagged JSON for values crossing the sandbox boundary.
* :mod:`~swarm_evo.evaluation.harness`: call a candidate's entry function in the sandbox.
* :mod:`~swarm_evo.evaluation.runner`: the multi-run driver evaluators use.
* :mod:`~swarm_evo.evaluation.auxiliary`: static/dynamic auxiliary metrics in the sandbox.
* :mod:`~swarm_evo.evaluation.problem`: problem folders (problem.yaml, initial.py, evaluate.py);
  :mod:`~swarm_evo.evaluation.problem_spec` the schema of problem.yaml;
  :mod:`~swarm_evo.evaluation.problem_data` data directories, data files and instances.
* :mod:`~swarm_evo.evaluation.service`: evaluate_program, the pipeline of the Eval Service.

The package never imports Prefect (the ``evaluate-program`` flow wraps it).

May import: sandbox, population.
"""

from swarm_evo.evaluation.auxiliary import AUXILIARY_FILE, run_auxiliary
from swarm_evo.evaluation.codec import decode, encode
from swarm_evo.evaluation.contract import (
    EvaluationResult,
    Interpretation,
    MetricDefinition,
    MetricSource,
    RunLog,
    load_program_output,
    read_results,
    write_results,
)
from swarm_evo.evaluation.harness import HarnessRun, call_entry
from swarm_evo.evaluation.problem import (
    BUILTIN_PROBLEMS,
    PROBLEMS_DIR,
    Problem,
    ProblemError,
    load_problem,
)
from swarm_evo.evaluation.runner import RunScore, evaluate_runs
from swarm_evo.evaluation.service import EvaluatorError, evaluate_program

__all__ = [
    "AUXILIARY_FILE",
    "BUILTIN_PROBLEMS",
    "PROBLEMS_DIR",
    "EvaluationResult",
    "EvaluatorError",
    "HarnessRun",
    "Interpretation",
    "MetricDefinition",
    "MetricSource",
    "Problem",
    "ProblemError",
    "RunLog",
    "RunScore",
    "call_entry",
    "decode",
    "encode",
    "evaluate_program",
    "evaluate_runs",
    "load_problem",
    "load_program_output",
    "read_results",
    "run_auxiliary",
    "write_results",
]
