"""Retry policy shared by the tasks: Prefect retries only transient errors (SPEC §6).

Failing models (issue 7), layer by layer, for every LLM call (generate, generate-debug, review,
evolve-agents, write-auxiliary-metrics):

1. litellm ``num_retries`` (``model.num_retries``, default 2): litellm re-calls at once on any
   ``openai.APIError`` (timeouts, 429, 5xx, but also 401/400) with no wait between calls
   (its default ``constant_retry``; checked by running litellm 1.106.2, also for the offline
   custom provider). It absorbs a blip; it is not a backoff.
2. Prefect task retries (:data:`LLM_RETRY`): a task whose call still failed with a transient
   error (:func:`swarm_evo.llm.errors.transient_errors`: timeout, rate limit, connection,
   500, 502, 503) runs again after about 2, 10 and 30 s (:data:`RETRY_DELAYS`, each drawn at
   random around its value and at most 1.5 times it: ``retry_jitter_factor``
   :data:`RETRY_JITTER`) so parallel steps do not hit a rate-limited API in step; other
   errors are not retried (:func:`retry_on_transient`). Tests shorten the delays with
   ``task.with_options(retry_delay_seconds=0)``.
3. A bad reply (no code block, an empty reply, no tool call, tool-call arguments that are not
   a JSON object) is not an exception to retry: the client re-asks once with a reminder
   (:data:`swarm_evo.llm.client.BAD_REPLY_REASKS`); a re-ask at temperature > 0 usually
   complies. A code reply still bad raises ``GenerationError`` (never retried by Prefect:
   the same prompt would cost the same again); a tool call still bad returns its error.
4. The optional self-fix after the static pre-validation is no reason to retry: when its call
   fails (any model error, transient ones after litellm's retries), the original program runs
   (:func:`swarm_evo.step.generation.prevalidate`), so a ``generate`` task is never retried,
   and its program paid again, for the sake of the self-fix. Every call, failed ones and those
   of a retried task attempt, counts in the node's ``llm_usage`` (ledger scopes,
   :func:`swarm_evo.llm.ledger.call_scope`).
5. What fails for good never fails the run: a step's generation becomes a dead node with
   exc_type ``GenerationError`` and the error text, counted in the budget
   (flows/_step.py, :func:`swarm_evo.step.assembly.failed_generation_node`); a debug attempt's
   generation becomes a failed attempt and the chain goes on (flows/debug_attempt.py); the
   review falls back to the deterministic facts (tasks/review.py); an agent evolution keeps
   the agent's texts and records the error (swarm_evo/step/evolve_agents.py).
"""

from __future__ import annotations

from prefect.cache_policies import NO_CACHE

from swarm_evo.llm.client import RETRY_HORIZON
from swarm_evo.llm.errors import transient_errors
from swarm_evo.sandbox import SandboxError, SandboxUnavailableError

RETRY_DELAYS = [2, 10, 30]
"""Seconds between task retries (backoff) for transient model/API errors."""

RETRY_JITTER = 0.5
"""Prefect ``retry_jitter_factor``: each delay is drawn around its value, at most 1.5 times it."""

# Near the run's deadline a transient error is not retried (swarm_evo.llm.client.RETRY_HORIZON):
# that horizon must cover the longest wait these retries can take.
assert max(RETRY_DELAYS) * (1 + RETRY_JITTER) <= RETRY_HORIZON, "RETRY_HORIZON shorter than a retry wait"


def retry_on_transient(task, task_run, state) -> bool:
    """Prefect ``retry_condition_fn``: retry when the task failed with a transient error only
    (rate limits, timeouts, connection and 5xx errors); a bad reply is not retried."""
    try:
        state.result()
    except transient_errors():
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

LLM_RETRY = dict(
    retries=len(RETRY_DELAYS),
    retry_delay_seconds=RETRY_DELAYS,
    retry_jitter_factor=RETRY_JITTER,
    retry_condition_fn=retry_on_transient,
)
"""Options of every task that calls the model: retry transient errors only, with backoff."""
