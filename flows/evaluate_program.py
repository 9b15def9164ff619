"""evaluate_program: the Eval Service as a Prefect flow and deployment (SPEC §11, §12).

Prefect's API is the job service (no second web server): the job API
(:mod:`flows.evaluation_jobs`) submits an evaluation as a flow run of the ``evaluate-program``
deployment (job id = flow run id); the flow's persisted return value is the job's result — the
EvaluationResult as a JSON dict, which the flow also writes as ``RESULTS_DIR/metrics.json`` and
``correct.json``.

Serve the deployment with ``swarm-evo eval serve`` (:func:`serve_evaluations`, Prefect's own
runner: the flow runs in a subprocess of the serving process) or deploy it to the process work
pool (``prefect.yaml``) and start a worker.

Results are stored by Prefect's result storage (default: local files under the serving
process's ``PREFECT_HOME/storage``, recorded by absolute path): a client on another machine
reads them only when the serving side uses shared result storage
(``PREFECT_RESULTS_DEFAULT_STORAGE_BLOCK``); ``RESULTS_DIR`` holds the same data as files.

This module imports only Prefect at import time: the domain code (sandbox, problems, the
evaluation core) is imported inside the task, so ``swarm-evo eval submit`` returns fast.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from flows._heartbeat_guard import heartbeats_guarded
from flows._process_heap import heap_settled


FLOW_NAME = "evaluate-program"
DEFAULT_DEPLOYMENT = f"{FLOW_NAME}/default"
PROGRAM_FILE = "program.py"
"""Name of the evaluated program inside the results directory (a copy, or the submitted code)."""
AUXILIARY_FILE = "dynamic_auxiliary_metrics.py"
"""Name of the submitted dynamic auxiliary metrics file inside the results directory."""
RESULTS_ROOT = Path("runs") / "eval"


# ---------------------------------------------------------------------------------------------
# The flow


def default_results_dir(problem_name: str, job_id: str | None = None, root: Path = RESULTS_ROOT) -> Path:
    """``runs/eval/<problem>-<UTC YYYYmmdd-HHMMSS>[-<first 8 chars of the job id>]``.

    The job id suffix keeps two evaluations started in the same second apart.
    """
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", problem_name).strip("-") or "problem"
    suffix = f"-{str(job_id)[:8]}" if job_id else ""
    return root / f"{name}-{stamp}{suffix}"


def _stage_file(results_dir: Path, name: str, path: str | None, code: str | None, what: str) -> Path | None:
    """Put the program (or auxiliary file) given by path or by code at ``results_dir/name``.

    Raises:
        ValueError: both a path and code were given.
        FileNotFoundError: the path is not a file.
    """
    if path is not None and code is not None:
        raise ValueError(f"give either {what}_path or {what}_code, not both")
    target = results_dir / name
    if code is not None:
        target.write_text(code, encoding="utf-8")
        return target
    if path is None:
        return None
    source = Path(path).expanduser()
    if not source.is_file():
        raise FileNotFoundError(f"{what} file {source} not found (the path is read on the machine that evaluates)")
    if source.resolve() != target.resolve():
        target.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    return target


def _jsonable(value: Any) -> Any:
    """A JSON round trip that turns numpy scalars/arrays into numbers/lists (NaN kept)."""

    def default(obj: Any) -> Any:
        if hasattr(obj, "tolist"):
            return obj.tolist()
        if isinstance(obj, (set, tuple)):
            return list(obj)
        return repr(obj)

    return json.loads(json.dumps(value, default=default))


@task(name="evaluate", retries=0, persist_result=False, cache_policy=NO_CACHE)
def run_evaluation(
    problem: Any,
    program_path: str,
    results_dir: str,
    *,
    executor: str,
    image: str | None,
    timeout: float | None,
    num_runs: int | None,
    auxiliary_path: str | None,
    auxiliary_timeout: float,
) -> dict:
    """Evaluate one program with the core Eval Service; the EvaluationResult as a JSON dict.

    No retries and no cache: the evaluation itself is the unit of work (a program that
    crashes is a result, not a transient error; count-primes draws fresh held-out inputs).

    Raises:
        EvaluatorError: the evaluator itself failed (not the program).
        ConfigError: bad executor or image.
        SandboxUnavailableError: the Docker backend has no daemon or no image.
    """
    from swarm_evo.config import load_config
    from swarm_evo.evaluation import evaluate_program as evaluate_core
    from swarm_evo.sandbox.factory import make_sandbox

    config = load_config(None).with_overrides({"sandbox.backend": executor, "sandbox.image": image})
    sandbox = make_sandbox(config)
    result = evaluate_core(
        problem,
        Path(program_path),
        Path(results_dir),
        sandbox=sandbox,
        timeout=timeout,
        num_runs=num_runs,
        auxiliary_path=Path(auxiliary_path) if auxiliary_path else None,
        auxiliary_timeout=auxiliary_timeout,
    )
    return _jsonable(result.model_dump())


def _cell(value: Any) -> str:
    if isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, (dict, list)):
        text = json.dumps(value)
    else:
        text = str(value)
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= 120 else text[:117] + "..."


def result_markdown(problem_name: str, results_dir: str, result: dict) -> str:
    """The evaluation as a markdown report: score, correctness, error, metric tables."""
    lines = [
        f"# Evaluation: {problem_name}",
        "",
        f"- combined_score: **{_cell(result.get('combined_score'))}**",
        f"- correct: **{result.get('correct')}**",
        f"- runs: {result.get('num_valid_runs')}/{result.get('num_runs')} valid, "
        f"mean execution time {_cell(result.get('execution_time'))} s",
        f"- results: `{results_dir}`",
    ]
    if result.get("error"):
        lines += ["", "## Error", "", "```", str(result["error"])[-2000:], "```"]
    public = result.get("public_metrics") or {}
    if public:
        lines += ["", "## Public metrics", "", "| metric | value |", "|---|---|"]
        lines += [f"| {_cell(k)} | {_cell(v)} |" for k, v in public.items()]
    aux = result.get("auxiliary_metrics") or {}
    definitions = result.get("auxiliary_definitions") or {}
    if aux:
        lines += ["", "## Auxiliary metrics", "", "| metric | value | interpretation | unit | source | description |",
                  "|---|---|---|---|---|---|"]
        for name, value in aux.items():
            d = definitions.get(name) or {}
            lines.append(
                f"| {_cell(name)} | {_cell(value)} | {_cell(d.get('interpretation', ''))} | {_cell(d.get('unit', ''))} "
                f"| {_cell(d.get('source', ''))} | {_cell(d.get('description', ''))} |"
            )
    for source, message in (result.get("auxiliary_errors") or {}).items():
        lines += ["", f"{source} failed (the primary evaluation stands): `{_cell(message)}`"]
    return "\n".join(lines) + "\n"


def artifact_key(problem_name: str) -> str:
    """``evaluation-<problem>`` in Prefect's key alphabet (lowercase letters, digits, dashes)."""
    name = re.sub(r"[^a-z0-9-]+", "-", problem_name.lower()).strip("-") or "problem"
    return f"evaluation-{name}"[:100]


@flow(name=FLOW_NAME, persist_result=True, result_serializer="json", log_prints=True)
@heartbeats_guarded  # never declared dead while alive (flows/_heartbeat_guard.py)
@heap_settled  # in its own flow-run process: the import-time heap frozen (flows/_process_heap.py)
def evaluate_program(
    problem: str,
    program_path: str | None = None,
    program_code: str | None = None,
    results_dir: str | None = None,
    num_runs: int | None = None,
    timeout: float | None = None,
    auxiliary_metrics_path: str | None = None,
    auxiliary_metrics_code: str | None = None,
    auxiliary_timeout: float = 10.0,
    data_dir: str | None = None,
    executor: str = "local",
    image: str | None = None,
    instance: str | None = None,
) -> dict:
    """Evaluate one program on one problem (the Eval Service job; SPEC §11, seed 002).

    Args:
        problem: a built-in problem name (``circle-packing``, ``tsp``, ``count-primes``) or a
            problem folder path (problem.yaml, evaluate.py, ...) on the evaluating machine.
        program_path: the program file on the evaluating machine; or
        program_code: the program's text (exactly one of the two). The program is evaluated
            from ``RESULTS_DIR/program.py`` either way, so the results directory is complete
            and a worker on another machine can evaluate a submitted program.
        results_dir: where metrics.json, correct.json, extra.* and the run folders go
            (default ``runs/eval/<problem>-<UTC stamp>-<job id prefix>`` under the working
            directory of the flow run).
        num_runs, timeout: runs and seconds per run (default: the problem's problem.yaml).
        auxiliary_metrics_path / auxiliary_metrics_code: an optional dynamic
            ``auxiliary_metrics.py`` (``evaluate_auxiliary_metrics(program_output)``,
            ``METRIC_DEFINITIONS``), by path or text; its failure never fails the evaluation.
        auxiliary_timeout: seconds for each auxiliary metrics file.
        data_dir: where problem data files are looked up (see swarm_evo.evaluation).
        instance: the instance of a problem with ``instances`` in problem.yaml (tsp: a TSPLIB
            name such as ``kroA100``, looked up as ``tsp/<instance>.tsp`` in the data
            directories; None = the problem's default, berlin52); an error for other problems.
        executor: sandbox backend (:mod:`swarm_evo.sandbox.backends`: ``local``, ``docker``); image: the
            Docker sandbox image.
            (Plain ``str``, checked in the body: a ``Literal`` annotation breaks parameter
            validation in runs served by ``flow.serve``, whose subprocess gets the flow function
            by value through cloudpickle, without this module's ``Literal`` import.)

    Returns:
        The EvaluationResult as a JSON dict (``combined_score``, ``correct``, ``error``,
        ``public_metrics``, ``private_metrics``, ``auxiliary_*``, ``execution_time``,
        ``num_runs``, ``num_valid_runs``, ``runs``, ``timestamp``), persisted as JSON so
        :func:`evaluation_result` fetches it through the API. A program that crashes or
        fails validation is a Completed run with ``correct`` False.

    Raises (the flow run ends Failed with the error in its state message):
        ProblemError: unknown problem / bad problem folder / missing data file / unknown instance
            (naming the directories searched and the instances found) or an instance given to
            a problem without instances.
        ValueError: neither or both of program_path and program_code; an unknown executor.
        ConfigError: a bad image name.
        SandboxUnavailableError: executor docker without a daemon or the image.
        FileNotFoundError: program_path or auxiliary_metrics_path is not a file.
        EvaluatorError: the problem's evaluator itself failed.
    """
    from prefect.runtime import flow_run

    from swarm_evo.evaluation import load_problem
    from swarm_evo.sandbox import backends

    logger = get_run_logger()
    if (program_path is None) == (program_code is None):
        raise ValueError("give exactly one of program_path and program_code")
    if executor not in backends.NAMES:
        raise ValueError(f"executor must be {' or '.join(map(repr, backends.NAMES))} (got {executor!r})")
    loaded = load_problem(problem, Path(data_dir) if data_dir else None, instance)
    out = Path(results_dir) if results_dir else default_results_dir(loaded.label, flow_run.get_id())
    out = out.expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    program = _stage_file(out, PROGRAM_FILE, program_path, program_code, "program")
    auxiliary = _stage_file(out, AUXILIARY_FILE, auxiliary_metrics_path, auxiliary_metrics_code, "auxiliary_metrics")
    logger.info("evaluating %s on %s (%s sandbox) into %s", program, loaded.name, executor, out)
    result = run_evaluation(
        loaded,
        str(program),
        str(out),
        executor=executor,
        image=image,
        timeout=timeout,
        num_runs=num_runs,
        auxiliary_path=str(auxiliary) if auxiliary else None,
        auxiliary_timeout=auxiliary_timeout,
    )
    create_markdown_artifact(
        markdown=result_markdown(loaded.name, str(out), result),
        key=artifact_key(loaded.name),
        description=f"Evaluation of {program} on {loaded.name}",
    )
    logger.info(
        "combined_score %s, correct %s%s", result["combined_score"], result["correct"],
        f", error: {result['error']}" if result.get("error") else "",
    )
    return result


def serve_evaluations(name: str = "default", *, limit: int | None = None, poll: float = 2.0) -> None:
    """Serve the deployment ``evaluate-program/<name>`` with Prefect's runner (blocks).

    ``poll`` seconds between the runner's checks for new jobs (Prefect's default is 10 s);
    ``limit`` caps the evaluations running at once. The module entrypoint lets the served runs
    import this module whatever the working directory.
    """
    from prefect.settings import PREFECT_RUNNER_POLL_FREQUENCY, temporary_settings
    from prefect.types.entrypoint import EntrypointType

    with temporary_settings({PREFECT_RUNNER_POLL_FREQUENCY: poll}):
        evaluate_program.serve(name=name, limit=limit, entrypoint_type=EntrypointType.MODULE_PATH,
                               tags=["swarm-evo", "eval"])
