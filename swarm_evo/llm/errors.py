"""How a model call can fail: the transient errors worth a retry, a model that cannot be used as
configured, a reply without anything usable, and the run's time or cost limit reached."""

from __future__ import annotations

import sys

from swarm_evo.population.node import LLMUsage


def transient_errors() -> tuple[type[BaseException], ...]:
    """The errors worth retrying (Prefect task retries with a condition; SPEC §6 'transient
    errors'): litellm's ``Timeout`` (408), ``RateLimitError`` (429), ``APIConnectionError``,
    ``InternalServerError`` (500), ``BadGatewayError`` (502) and ``ServiceUnavailableError`` (503).

    ``()`` while this process has not imported litellm: no model call has been made, so none of
    them can have been raised, and ``except transient_errors():`` or ``isinstance(exc,
    transient_errors())`` never import litellm (:func:`swarm_evo.llm.import_litellm`)."""
    litellm = sys.modules.get("litellm")
    if litellm is None:
        return ()
    return (litellm.Timeout, litellm.RateLimitError, litellm.APIConnectionError,
            litellm.ServiceUnavailableError, litellm.InternalServerError, litellm.BadGatewayError)


class ModelAccessError(ValueError):
    """The model cannot be used as configured (unknown model, missing API key)."""


class GenerationError(RuntimeError):
    """The model answered, but not with something usable (no code block, empty reply).

    ``usage`` (LLMUsage or None) holds what the failed calls cost, for the dead node.
    """

    def __init__(self, message: str, usage: LLMUsage | None = None):
        super().__init__(message)
        self.usage = usage

    def __reduce__(self):  # picklable with its usage (Prefect may persist a task's exception)
        return (type(self), (str(self), self.usage))


class DeadlineReached(RuntimeError):
    """The run's time limit is reached: no model call starts (and a transient error close to
    the deadline is not retried). Not transient: callers end the step instead, with no node
    and the slot given back, never a dead node; a transient error near the deadline also
    stops the run (no new step starts, not a failure: flows/_step.py)."""


class CostLimitReached(DeadlineReached):
    """The run's model calls have cost ``model.max_cost_usd``: no further call starts. Handled
    as the deadline is (the step ends; the run stops cleanly), so a run overshoots its limit by
    at most the calls already in flight (issue 13)."""
