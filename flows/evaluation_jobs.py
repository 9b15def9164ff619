"""The Eval Service's job API, a client of a Prefect server (``PREFECT_API_URL`` names it; SPEC
§11, §12): submitting an evaluation creates a flow run of the ``evaluate-program`` deployment
(:mod:`flows.evaluate_program`; job id = flow run id), a job's status is that run's state, and
its result is the flow's persisted return value. ``swarm-evo eval submit|status|result|run
--deployment`` call :func:`submit_evaluation`, :func:`evaluation_status`,
:func:`evaluation_result` and :func:`wait_for_evaluation`.

This module imports only Prefect, so ``swarm-evo eval submit`` returns fast."""

from __future__ import annotations

import time
from typing import Any
from uuid import UUID

from flows.evaluate_program import DEFAULT_DEPLOYMENT


# Prefect state types -> job status (names like Late, AwaitingRetry, Retrying are state *names*
# of the SCHEDULED / RUNNING types).
_JOB_STATUS = {
    "SCHEDULED": "pending",
    "PENDING": "pending",
    "PAUSED": "pending",
    "RUNNING": "running",
    "CANCELLING": "running",
    "COMPLETED": "completed",
    "FAILED": "failed",
    "CRASHED": "failed",
    "CANCELLED": "failed",
}
FINISHED = ("completed", "failed")


class JobServiceError(RuntimeError):
    """The job service cannot do what was asked; the message names the cause and the fix."""


class DeploymentNotFoundError(JobServiceError):
    """No deployment of that name on the Prefect server (nothing serves evaluations there)."""


class JobNotFoundError(JobServiceError):
    """The job id is not a flow run id of the Prefect server."""


class JobFailedError(JobServiceError):
    """The evaluation job ended Failed/Crashed/Cancelled; the message is its state message."""


class JobNotFinishedError(JobServiceError):
    """The job is still pending or running, so it has no result yet."""


def api_url() -> str | None:
    """The Prefect API the job functions talk to (PREFECT_API_URL or the profile), or None."""
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    return str(url) if url else None


def _job_uuid(job_id: str) -> UUID:
    try:
        return UUID(str(job_id))
    except ValueError:
        raise JobNotFoundError(f"job id {job_id!r} is not a flow run id (a UUID printed by `swarm-evo eval submit`)") from None


def _api_error(exc: BaseException) -> JobServiceError:
    """A JobServiceError for an HTTP error of the Prefect client (refused request or no answer)."""
    import httpx

    if isinstance(exc, httpx.HTTPStatusError):
        try:
            detail = exc.response.json().get("detail")
        except ValueError:
            detail = None
        detail = detail or exc.response.text[:300]
        return JobServiceError(f"the Prefect API at {api_url()} refused the request ({exc.response.status_code}: {detail})")
    return JobServiceError(
        f"the Prefect API at {api_url()} does not answer ({type(exc).__name__}: {exc}): start it "
        "(`prefect server start`) or set PREFECT_API_URL to the server's /api URL"
    )


def submit_evaluation(parameters: dict[str, Any], deployment: str = DEFAULT_DEPLOYMENT) -> str:
    """Create a flow run of ``deployment`` with ``parameters``; return its id (the job id) at once.

    ``parameters`` are :func:`evaluate_program`'s (e.g. ``{"problem": "circle-packing",
    "program_code": "...", "results_dir": "/abs/dir"}``); the run starts when the serving
    process or worker polls (``swarm-evo eval serve`` polls every 2 s by default).

    Raises:
        DeploymentNotFoundError: no such deployment on the server.
        JobServiceError: the API does not answer.
    """
    import httpx
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound

    try:
        run = run_deployment(deployment, parameters=parameters, timeout=0, as_subflow=False)
    except ObjectNotFound:
        raise DeploymentNotFoundError(
            f"deployment '{deployment}' not found on {api_url()}: start `swarm-evo eval serve` "
            f"(or `prefect deploy -n {deployment}` and a worker on its pool) against this server"
        ) from None
    except (httpx.HTTPError, OSError) as exc:
        raise _api_error(exc) from None
    return str(run.id)


def _read_flow_run(job_id: str):
    import httpx
    from prefect import get_client
    from prefect.exceptions import ObjectNotFound

    uuid = _job_uuid(job_id)
    try:
        with get_client(sync_client=True) as client:
            return client.read_flow_run(uuid)
    except ObjectNotFound:
        raise JobNotFoundError(f"job {job_id} not found on {api_url()} (check PREFECT_API_URL)") from None
    except (httpx.HTTPError, OSError) as exc:
        raise _api_error(exc) from None


def _status_of(run) -> dict[str, Any]:
    state = run.state
    state_type = state.type.value if state is not None else "PENDING"
    return {
        "job_id": str(run.id),
        "status": _JOB_STATUS.get(state_type, "pending"),
        "state": state.name if state is not None else "Pending",
        "message": state.message if state is not None else None,
    }


def evaluation_status(job_id: str) -> dict[str, Any]:
    """``{"job_id", "status", "state", "message"}`` of an evaluation job.

    ``status`` is ``pending`` (Scheduled, Late, Pending, Paused, AwaitingRetry), ``running``
    (Running, Retrying, Cancelling), ``completed`` or ``failed`` (Failed, Crashed, Cancelled);
    ``state`` is the Prefect state name and ``message`` its message (the error of a failed job).

    Raises:
        JobNotFoundError: not a flow run id of the server.
        JobServiceError: the API does not answer.
    """
    return _status_of(_read_flow_run(job_id))


def evaluation_result(job_id: str) -> dict[str, Any]:
    """The EvaluationResult JSON dict of a completed job (the flow's persisted return value).

    Raises:
        JobFailedError: the job failed; the message is the flow run's state message (e.g.
            ``Flow run encountered an exception: EvaluatorError: ...``).
        JobNotFinishedError: the job is still pending or running.
        JobNotFoundError: not a flow run id of the server.
        JobServiceError: the result cannot be read (result storage not shared with this
            machine) or the API does not answer.
    """
    run = _read_flow_run(job_id)
    status = _status_of(run)
    if status["status"] == "failed":
        raise JobFailedError(status["message"] or f"job {job_id} ended {status['state']}")
    if status["status"] != "completed":
        raise JobNotFinishedError(f"job {job_id} is {status['status']} ({status['state']}): no result yet")
    from prefect.exceptions import MissingResult

    try:
        result = run.state.result()
    except (OSError, ValueError, MissingResult) as exc:
        raise JobServiceError(
            f"the result of job {job_id} cannot be read here ({type(exc).__name__}: {exc}): the serving side "
            "stores results locally; use shared result storage (PREFECT_RESULTS_DEFAULT_STORAGE_BLOCK) or read "
            "metrics.json in the job's results directory"
        ) from None
    if not isinstance(result, dict):
        raise JobServiceError(f"job {job_id} returned {type(result).__name__}, not an evaluation result")
    return result


def wait_for_evaluation(job_id: str, timeout: float | None = None, poll: float = 1.0) -> dict[str, Any]:
    """Poll :func:`evaluation_status` every ``poll`` seconds until the job is completed or failed.

    Returns the final status dict. ``timeout`` (seconds, None = no limit) bounds the wait.

    Raises:
        TimeoutError: the job is still pending/running after ``timeout`` seconds.
        JobNotFoundError, JobServiceError: as :func:`evaluation_status`.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        status = evaluation_status(job_id)
        if status["status"] in FINISHED:
            return status
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"job {job_id} still {status['status']} ({status['state']}) after {timeout} s")
        time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic())))
