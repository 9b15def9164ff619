"""Before the first step of a problem run (SPEC §11): the initial program's evaluation (the
final report's baseline) and the evaluation agent's auxiliary metrics file (seed 002)."""

from __future__ import annotations

import json
from typing import Any

from swarm_evo.evaluation import load_program_output, run_auxiliary
from swarm_evo.evaluation.auxiliary_writer import describe_output
from swarm_evo.population.journal import atomic_write_text
from swarm_evo.llm.client import complete_code
from swarm_evo.llm.errors import transient_errors
from swarm_evo.run.model_context import exec_timeout, offline_context
from swarm_evo.objective.problem import AUXILIARY_TIMEOUT, INITIAL_DIR, INITIAL_METRICS, RESULTS_DIR
from swarm_evo.prompting.prompts import render
from swarm_evo.run.session import RunSession
from swarm_evo.prompting.text_bounds import prompt_limits

AUXILIARY_RECORD = "auxiliary_metrics.json"


def evaluate_initial_program(session: RunSession) -> dict[str, Any]:
    """Problems: evaluate the problem's initial program once, before any step (the baseline
    of the final report): ``RUN_DIR/initial/`` and ``RUN_DIR/initial_metrics.json``. A run
    directory that already has it (a continued run) keeps it. Returns its metrics.json."""
    path = session.run_dir / INITIAL_METRICS
    if not path.exists():
        session.objective.evaluate_initial(session.sandbox, session.run_dir, exec_timeout(session))
    return json.loads(path.read_text(encoding="utf-8"))


def write_auxiliary_metrics(session: RunSession) -> dict[str, Any]:
    """Problems: the evaluation agent writes ``RUN_DIR/auxiliary_metrics.py`` (seed 002).

    The model gets the problem and the structure of the initial program's output
    (:func:`swarm_evo.evaluation.auxiliary_writer.describe_output`); its file is tried on that
    output in the sandbox. Every later evaluation runs it with its own timeout; a broken file
    is reported there and never fails an evaluation. The record (plan, trial metrics or
    error) goes to ``RUN_DIR/auxiliary_metrics.json``; an existing file is kept.

    A model that fails for good with anything but a transient error (GenerationError: no
    code after the re-ask; e.g. litellm.BadRequestError) gives a record with ``written``
    false and the error; the run goes on without dynamic auxiliary metrics.

    Raises:
        litellm exceptions: transient model errors (``transient_errors()``; the Prefect task
            retries them, the caller goes on without the file when they persist).
    """
    objective = session.objective
    record_path = session.run_dir / AUXILIARY_RECORD
    if objective.auxiliary_path.exists() and record_path.exists():
        return json.loads(record_path.read_text(encoding="utf-8"))
    initial_results = session.run_dir / INITIAL_DIR / RESULTS_DIR
    sample = describe_output(load_program_output(initial_results))
    prompt = render("auxiliary_metrics.j2", objective=objective.prompt_view(), sample_output=sample,
                    timeout=AUXILIARY_TIMEOUT, limits=prompt_limits(session.config.model))
    atomic_write_text(session.run_dir / "prompt-auxiliary_metrics.md", prompt)
    ctx = offline_context(session, "auxiliary_metrics", "auxiliary_metrics")
    ctx["sample_output"] = sample
    record: dict[str, Any] = {"file": str(objective.auxiliary_path), "sample_output": sample}
    try:
        reply = complete_code(session.endpoint, prompt, ctx)
    except transient_errors():
        raise
    except Exception as exc:  # GenerationError, or a model error that a retry would not cure
        record.update(written=False, error=f"{type(exc).__name__}: {exc}"[:2000])
    else:
        atomic_write_text(objective.auxiliary_path, reply.code)
        metrics, _, error = run_auxiliary(session.sandbox, objective.auxiliary_path, initial_results,
                                          source="auxiliary_dynamic", timeout=AUXILIARY_TIMEOUT)
        record.update(written=True, plan=reply.plan, usage=reply.usage.model_dump(),
                      trial={"metrics": metrics, "error": error})
    atomic_write_text(record_path, json.dumps(record, indent=2, default=str))
    return record
