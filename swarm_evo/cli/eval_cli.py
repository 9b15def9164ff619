"""``swarm-evo eval``: the Eval Service from the command line (SPEC §11).

    swarm-evo eval submit --problem P PROGRAM.py [--results-dir DIR] [--num-runs N] [--timeout S]
                          [--auxiliary-metrics FILE] [--deployment NAME] [...]
    swarm-evo eval status JOB_ID
    swarm-evo eval result JOB_ID
    swarm-evo eval run --problem P PROGRAM.py --results-dir DIR [--deployment NAME] [...]
    swarm-evo eval serve [--name default] [--limit N] [--poll SECONDS]

A job is a flow run of the ``evaluate-program`` deployment on the Prefect server named by
PREFECT_API_URL (job id = flow run id). ``submit`` sends the program's text, so the serving
machine needs no copy of it. ``run`` evaluates in this process (when PREFECT_API_URL is unset,
against the temporary API that runs start, ``flows/_ephemeral.py``), or with ``--deployment``
submits and waits.

Exit codes: 0 success (``run``: the program is correct), 1 the program is not correct or the
job failed (its error is printed), 2 bad input (the message names the file/field and the fix),
3 ``result`` of a job that has not finished yet.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_NOT_FINISHED = 3
DEFAULT_DEPLOYMENT = "evaluate-program/default"  # = flows.evaluate_program.DEFAULT_DEPLOYMENT


def _add_evaluation_options(p: argparse.ArgumentParser) -> None:
    from swarm_evo.sandbox import backends

    p.add_argument("--problem", required=True,
                   help="built-in problem (circle-packing, tsp, count-primes) or a problem folder")
    p.add_argument("program", type=Path, help="the candidate program (.py)")
    p.add_argument("--num-runs", type=int, default=None, help="runs (default: the problem's num_runs)")
    p.add_argument("--timeout", type=float, default=None, help="seconds per run (default: the problem's timeout)")
    p.add_argument("--auxiliary-metrics", type=Path, default=None,
                   help="dynamic auxiliary_metrics.py (evaluate_auxiliary_metrics(program_output))")
    p.add_argument("--auxiliary-timeout", type=float, default=10.0, help="seconds for each auxiliary metrics file")
    p.add_argument("--data-dir", default=None, help="where problem data files are looked up (e.g. tsp/berlin52.tsp)")
    p.add_argument("--instance", default=None,
                   help="the problem's instance (tsp: a TSPLIB name such as kroA100; default: the problem's default)")
    p.add_argument("--executor", choices=backends.NAMES, default=backends.NAMES[0],
                   help="sandbox backend: " + backends.help_text())
    p.add_argument("--image", default=None, help="Docker sandbox image (default swarm-evo-sandbox:latest)")


def add_eval_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``eval`` and its sub-commands on ``subparsers`` (from ``add_subparsers``)."""
    e = subparsers.add_parser(
        "eval", help="Eval Service: evaluate programs (Prefect flow evaluate-program)",
        description="The Eval Service: evaluate candidate programs of a problem, in this process or as "
        "jobs (flow runs of the evaluate-program deployment on the server named by PREFECT_API_URL).",
    )
    sub = e.add_subparsers(dest="eval_command", required=True)

    s = sub.add_parser("submit", help="submit an evaluation job; prints the job id")
    _add_evaluation_options(s)
    s.add_argument("--results-dir", type=Path, default=None,
                   help="results directory on the evaluating machine (default runs/eval/<problem>-<time>)")
    s.add_argument("--deployment", default=DEFAULT_DEPLOYMENT, help=f"FLOW/DEPLOYMENT (default {DEFAULT_DEPLOYMENT})")

    st = sub.add_parser("status", help="a job's status as JSON (pending, running, completed, failed)")
    st.add_argument("job_id")

    r = sub.add_parser("result", help="a finished job's EvaluationResult as JSON")
    r.add_argument("job_id")

    run = sub.add_parser("run", help="evaluate one program; writes DIR/metrics.json and DIR/correct.json")
    _add_evaluation_options(run)
    run.add_argument("--results-dir", type=Path, required=True)
    run.add_argument("--deployment", default=None,
                     help="submit to this deployment and wait (default: evaluate in this process)")
    run.add_argument("--wait-timeout", type=float, default=None, help="with --deployment: seconds to wait")

    sv = sub.add_parser("serve", help="serve the evaluate-program deployment (Prefect runner; blocks)")
    sv.add_argument("--name", default="default", help="deployment name (evaluate-program/NAME)")
    sv.add_argument("--limit", type=int, default=None, help="evaluations at a time (default: no limit)")
    sv.add_argument("--poll", type=int, default=2, help="seconds between polls for submitted jobs")
    return e


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> int:
    print(f"swarm-evo: error: {message}", file=sys.stderr)
    return code


def _quiet_prefect() -> None:
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")


def _print_json(value) -> None:
    print(json.dumps(value, indent=2))


def _check_inputs(args) -> int | None:
    """Bad-input checks that need no Prefect and no evaluation code; an exit code or None."""
    problem = _file_problem(args.program)
    if problem:
        return _fail(f"program {args.program} {problem}: give the path of the candidate .py file")
    if args.auxiliary_metrics is not None:
        problem = _file_problem(args.auxiliary_metrics)
        if problem:
            return _fail(f"--auxiliary-metrics {args.auxiliary_metrics} {problem}: give an auxiliary_metrics.py file")
    if args.eval_command == "run":  # submit's --results-dir names a path on the evaluating machine
        problem = _directory_problem(args.results_dir.expanduser())
        if problem:
            return _fail(f"--results-dir {args.results_dir} {problem}: give a directory (created when missing)")
    for flag, value in (("--num-runs", args.num_runs), ("--timeout", args.timeout),
                        ("--auxiliary-timeout", args.auxiliary_timeout)):
        if value is not None and value <= 0:
            return _fail(f"{flag} must be > 0 (got {value})")
    return None


def _file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be read as a program file (``"not found"``, ``"is a directory"``), or None."""
    if not path.exists():
        return "not found"
    if path.is_dir():
        return "is a directory, not a file"
    if not path.is_file():
        return "is not a regular file"
    if not os.access(path, os.R_OK):
        return "is not readable"
    return None


def _directory_problem(path: Path) -> str | None:
    """Why results cannot be written under ``path`` (it or an ancestor is a file, ...), or None."""
    if path.exists():
        if not path.is_dir():
            return "is a file, not a directory"
        return None if os.access(path, os.W_OK | os.X_OK) else "is not writable"
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                return f"is under {parent}, which is a file"
            return None if os.access(parent, os.W_OK | os.X_OK) else f"cannot be created in {parent} (not writable)"
    return None


def _problem_argument(problem: str) -> str:
    """A problem folder that exists here is sent as an absolute path; a name as given."""
    path = Path(problem).expanduser()
    return str(path.resolve()) if path.is_dir() else problem


def _job_parameters(args, *, inline: bool) -> dict:
    """Flow parameters; ``inline`` sends the program (and auxiliary file) as text."""
    params = {
        "problem": _problem_argument(args.problem),
        "results_dir": str(args.results_dir.expanduser().resolve()) if args.results_dir else None,
        "num_runs": args.num_runs,
        "timeout": args.timeout,
        "auxiliary_timeout": args.auxiliary_timeout,
        "data_dir": str(Path(args.data_dir).expanduser().resolve()) if args.data_dir else None,
        "executor": args.executor,
        "image": args.image,
        "instance": args.instance,
    }
    if inline:
        params["program_code"] = args.program.read_text(encoding="utf-8")
        if args.auxiliary_metrics is not None:
            params["auxiliary_metrics_code"] = args.auxiliary_metrics.read_text(encoding="utf-8")
    else:
        params["program_path"] = str(args.program.resolve())
        if args.auxiliary_metrics is not None:
            params["auxiliary_metrics_path"] = str(args.auxiliary_metrics.resolve())
    return {key: value for key, value in params.items() if value is not None}


def _need_server() -> int | None:
    from flows.evaluation_jobs import api_url

    if not api_url():
        return _fail("no Prefect server: set PREFECT_API_URL to the /api URL of the server where "
                     "`swarm-evo eval serve` runs (e.g. http://127.0.0.1:4200/api)")
    return None


def _submit(args) -> int:
    bad = _check_inputs(args) or _need_server()
    if bad is not None:
        return bad
    from flows.evaluation_jobs import submit_evaluation

    print(submit_evaluation(_job_parameters(args, inline=True), deployment=args.deployment))
    return 0


def _status(args) -> int:
    bad = _need_server()
    if bad is not None:
        return bad
    from flows.evaluation_jobs import evaluation_status

    _print_json(evaluation_status(args.job_id))
    return 0


def _result(args) -> int:
    bad = _need_server()
    if bad is not None:
        return bad
    from flows.evaluation_jobs import (
        JobFailedError,
        JobNotFinishedError,
        evaluation_result,
        evaluation_status,
    )

    try:
        result = evaluation_result(args.job_id)
    except JobFailedError as exc:
        _print_json(evaluation_status(args.job_id))
        return _fail(f"job {args.job_id} failed: {exc}", EXIT_FAILED)
    except JobNotFinishedError as exc:
        _print_json(evaluation_status(args.job_id))
        return _fail(f"{exc}; try again later (`swarm-evo eval status {args.job_id}`)", EXIT_NOT_FINISHED)
    _print_json(result)
    return 0


def _run_in_process(args) -> dict:
    from flows._ephemeral import start_ephemeral_api
    from flows.evaluate_program import evaluate_program
    from swarm_evo.evaluation import load_problem

    load_problem(args.problem, Path(args.data_dir) if args.data_dir else None, args.instance)  # ProblemError before the flow
    start_ephemeral_api()  # no PREFECT_API_URL: the runs' own API (flows/_ephemeral.py), stopped even on SIGKILL
    return evaluate_program(**_job_parameters(args, inline=False))


def _run_on_deployment(args) -> dict:
    from flows.evaluation_jobs import evaluation_result, submit_evaluation, wait_for_evaluation

    job_id = submit_evaluation(_job_parameters(args, inline=True), deployment=args.deployment)
    print(f"job {job_id} submitted to {args.deployment}", file=sys.stderr)
    wait_for_evaluation(job_id, timeout=args.wait_timeout)
    result = evaluation_result(job_id)
    results_dir = args.results_dir.expanduser().resolve()
    if not (results_dir / "metrics.json").is_file():  # evaluated on another machine: write the files here
        from swarm_evo.evaluation import EvaluationResult
        from swarm_evo.evaluation.contract import write_results

        write_results(EvaluationResult.model_validate(result), results_dir)
    return result


def _run(args) -> int:
    bad = _check_inputs(args) or (_need_server() if args.deployment else None)
    if bad is not None:
        return bad
    from flows.evaluation_jobs import JobFailedError
    from swarm_evo.evaluation import EvaluatorError

    try:
        result = _run_on_deployment(args) if args.deployment else _run_in_process(args)
    except (EvaluatorError, JobFailedError, TimeoutError) as exc:
        return _fail(f"evaluation failed: {exc}", EXIT_FAILED)
    _print_json(result)
    return 0 if result.get("correct") else EXIT_FAILED


def _serve(args) -> int:
    from flows.evaluate_program import serve_evaluations

    if args.limit is not None and args.limit < 1:
        return _fail(f"--limit must be >= 1 (got {args.limit})")
    if args.poll < 1:
        return _fail(f"--poll must be >= 1 second (got {args.poll})")
    serve_evaluations(args.name, limit=args.limit, poll=args.poll)
    return 0


def _is_bad_input(exc: BaseException) -> bool:
    """Errors that mean bad input or an unusable service: exit 2 with their one-line message.

    (Imported only when an error happens, so ``submit`` stays fast.)
    """
    from flows.evaluation_jobs import JobServiceError
    from swarm_evo.config import ConfigError
    from swarm_evo.evaluation import ProblemError
    from swarm_evo.sandbox import SandboxUnavailableError

    return isinstance(exc, (JobServiceError, ConfigError, ProblemError, SandboxUnavailableError, FileNotFoundError))


def run_eval(args) -> int:
    """Run ``swarm-evo eval <sub-command>``; returns the exit code (see the module docstring)."""
    _quiet_prefect()
    handler = {"submit": _submit, "status": _status, "result": _result, "run": _run, "serve": _serve}[args.eval_command]
    try:
        return handler(args)
    except Exception as exc:
        if _is_bad_input(exc):
            return _fail(str(exc))
        raise
