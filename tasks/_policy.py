"""Retry policy shared by the tasks: Prefect retries only transient errors (SPEC §6)."""

from __future__ import annotations

from prefect.cache_policies import NO_CACHE

from swarm_evo.llm.client import TRANSIENT_ERRORS
from swarm_evo.sandbox import SandboxError, SandboxUnavailableError

RETRY_DELAYS = [2, 10, 30]
"""Seconds between task retries (backoff) for transient model/API errors."""


def retry_on_transient(task, task_run, state) -> bool:
    """Prefect ``retry_condition_fn``: retry when the task failed with a transient error only
    (rate limits, timeouts, connection and 5xx errors); a bad reply is not retried."""
    try:
        state.result()
    except TRANSIENT_ERRORS:
        return True
    except BaseException:
        return False
    return False


SANDBOX_RETRY_DELAYS = [5, 30]
"""Seconds between retries of an execution whose sandbox (not program) failed."""


def retry_on_sandbox_failure(task, task_run, state) -> bool:
    """Prefect ``retry_condition_fn``: retry a transient sandbox failure (a Docker API error);
    not an unavailable backend (missing image, no GPU runtime) and never a program failure,
    which is reported in the result rather than raised."""
    try:
        state.result()
    except SandboxUnavailableError:
        return False
    except SandboxError:
        return True
    except BaseException:
        return False
    return False


TASK_DEFAULTS = dict(cache_policy=NO_CACHE)
"""Step tasks work on shared run state: never cache them."""
