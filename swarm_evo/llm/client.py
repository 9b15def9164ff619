"""Every LLM call of a run goes through :func:`call_model` here, to litellm (SPEC §7); code
replies are asked for by :func:`complete_code`, reviews by
:func:`swarm_evo.llm.review_completion.complete_review`.

Code replies are plain completions read by :mod:`swarm_evo.llm.replies` (the block holding the
section markers, else the longest that compiles; reasoning ignored; cut-off replies re-asked
shorter), the text before the program is the plan; reviews are a forced function call where the
model supports it, else a JSON object in the reply text (issue 13). Each call sets ``num_retries``
and ``timeout`` explicitly and returns its usage (tokens, cost, seconds) for the node.
The structured context (docs/CONTRACTS.md) is sent only to the offline model: some providers
have a ``metadata`` field of their own.

Failing models (issue 7; the policy is written out in tasks/_policy.py):

- transient errors (:func:`~swarm_evo.llm.errors.transient_errors`) are first retried by litellm itself
  (``num_retries``; checked with litellm 1.106.2: it re-calls at once, no wait, and also for a
  custom provider such as the offline model), then propagate to the Prefect task, whose retries
  wait with a backoff. Left to itself litellm re-calls any ``openai.APIError``, a 400 or a 401
  too; :data:`RETRY_POLICY` keeps its retries for what can pass on a second try (a 400 "tools
  are not supported" re-sent at once doubled every rejected review call);
- a bad reply (no code block, an empty or cut-off reply, no tool call and no JSON object in
  the text, tool-call arguments that are not a JSON object) is re-asked :data:`BAD_REPLY_REASKS` time(s) with a reminder; a code reply that
  is still bad raises :class:`~swarm_evo.llm.errors.GenerationError`, a tool call that is still bad returns its error
  (the review then decides on the deterministic facts).
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from pydantic import BaseModel, Field

from swarm_evo.llm import import_litellm
from swarm_evo.llm.endpoint import ModelEndpoint
from swarm_evo.llm.errors import CostLimitReached, DeadlineReached, GenerationError, transient_errors
from swarm_evo.llm.replies import read_code_reply
from swarm_evo.population.node import LLMUsage

if TYPE_CHECKING:
    from litellm import RetryPolicy

log = logging.getLogger(__name__)


BAD_REPLY_REASKS = 1
"""How many times a bad reply (no code block, empty, no or invalid tool call) is asked again
before it counts as a failure. A re-ask at temperature > 0 usually gives a usable reply; one
is enough to cover a slip without doubling the cost of a model that never complies."""


RETRY_HORIZON = 45.0
"""Seconds the Prefect task retries may wait before the next attempt (tasks/_policy.py: the
longest delay, 30 s, times the jitter 1.5). A transient error with less time than this left
before the deadline becomes :class:`DeadlineReached`, so no retry sleeps past the run's end."""


def retry_policy(num_retries: int) -> RetryPolicy:
    """litellm's per-exception retries for one call: ``num_retries`` for timeouts, rate limits,
    5xx answers and connection errors (``DefaultRetries``), none for answers that say the request
    itself is wrong — 400 (unsupported ``tools``, context window exceeded), 401, 404, content
    policy — which the same request at once cannot change (litellm's ``RetryPolicy``, read by
    ``litellm.completion``'s wrapper in 1.106.2: ``utils.get_num_retries_from_retry_policy``)."""
    return import_litellm().RetryPolicy(DefaultRetries=num_retries, BadRequestErrorRetries=0, AuthenticationErrorRetries=0,
                       NotFoundErrorRetries=0, ContentPolicyViolationErrorRetries=0)


_CALL_SLOTS: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_CALL_SLOTS_LOCK = threading.Lock()


@contextmanager
def call_slot(endpoint: ModelEndpoint) -> Iterator[None]:
    """Hold one of the model calls a run may make at once (``endpoint.max_concurrent_calls``,
    shared by every endpoint writing to the same ledger: the run's code, review and evolution
    calls; issue 52) for the ``with`` block; no limit when it is None."""
    limit = endpoint.max_concurrent_calls
    if limit is None:
        yield
        return
    key = (endpoint.ledger_path or endpoint.name, limit)
    with _CALL_SLOTS_LOCK:
        slots = _CALL_SLOTS.setdefault(key, threading.BoundedSemaphore(limit))
    with slots:
        yield


def call_model(endpoint: ModelEndpoint, messages: list[dict], ctx: dict | None, **extra: Any):
    """One litellm completion: ``(response, LLMUsage)``. Every call, failed ones too, is written
    to the run's ledger (``endpoint.ledger_path``) under ``ctx["purpose"]`` and the caller's
    :func:`swarm_evo.llm.ledger.call_scope`. The usage's ``cost`` (USD) is litellm's
    ``response_cost`` at the endpoint's price (:mod:`swarm_evo.llm.endpoint`), 0 for the
    offline model, None when the model has no price.

    The timeout is ``min(endpoint.timeout, time left)`` and litellm's ``num_retries`` are cut
    so that the retries fit the time left (issue 13: a run ends within its time limit plus one
    model timeout).

    Raises:
        DeadlineReached: the deadline has passed (nothing is sent), or a transient error came
            within :data:`RETRY_HORIZON` of it.
        CostLimitReached: the ledger's cost reached ``endpoint.max_cost_usd`` (nothing is sent).
        litellm exceptions: whatever litellm raises once its own retries are spent.
    """
    _check_cost(endpoint)
    timeout, num_retries = endpoint.timeout, endpoint.num_retries
    left = endpoint.time_left()
    if left is not None:
        if left <= 0:
            raise DeadlineReached(f"the run's time limit is reached: no {endpoint.role} call to {endpoint.name}")
        timeout = max(1.0, min(timeout, left))
        # litellm 1.106.2 with openai/ models makes up to 2n+1 attempts for num_retries=n (its own
        # retries around the OpenAI client's), 1 s apart: keep them all within the time left.
        num_retries = max(0, min(num_retries, int((left - timeout) // (2 * timeout + 1))))
    kwargs: dict[str, Any] = dict(
        model=endpoint.litellm_model,
        messages=messages,
        temperature=endpoint.temperature,
        timeout=timeout,
        num_retries=num_retries,
        retry_policy=retry_policy(num_retries),
        **extra,
    )
    if endpoint.max_tokens is not None:
        kwargs["max_tokens"] = endpoint.max_tokens
    if endpoint.drop_params:
        kwargs["drop_params"] = True
    if endpoint.input_cost_per_token is not None:
        kwargs["input_cost_per_token"] = endpoint.input_cost_per_token
        kwargs["output_cost_per_token"] = endpoint.output_cost_per_token
    if endpoint.api_base:
        kwargs["api_base"] = endpoint.api_base
    if endpoint.api_key is not None:
        kwargs["api_key"] = endpoint.api_key.get_secret_value()
    if endpoint.is_offline:
        from swarm_evo.llm.offline import register

        register()
        ctx = dict(ctx or {})
        if endpoint.injected_failure_rate:
            ctx["injected_failure_rate"] = endpoint.injected_failure_rate
        kwargs["metadata"] = {"swarm_evo": ctx}
    operation = (ctx or {}).get("purpose")
    with call_slot(endpoint):  # the run's own limit on model calls at once (model.max_concurrent_calls)
        started = time.perf_counter()
        try:
            response = import_litellm().completion(**kwargs)
        except Exception as exc:
            _record(endpoint, operation, ok=False, seconds=time.perf_counter() - started,
                    error=f"{type(exc).__name__}: {exc}")
            after = endpoint.time_left()
            if isinstance(exc, transient_errors()) and after is not None and after < RETRY_HORIZON:
                raise DeadlineReached(
                    f"{type(exc).__name__} with {max(0.0, after):.0f} s left before the time limit: not retried"
                ) from exc
            raise
        seconds = time.perf_counter() - started
    usage = getattr(response, "usage", None)
    cost = 0.0 if endpoint.is_offline else (getattr(response, "_hidden_params", None) or {}).get("response_cost")
    call_usage = LLMUsage(
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cost=float(cost) if cost is not None else None,
        calls=1,
        seconds=seconds,
    )
    _record(endpoint, operation, ok=True, seconds=seconds, usage=call_usage)
    return response, call_usage


def _check_cost(endpoint: ModelEndpoint) -> None:
    """Raise :class:`CostLimitReached` when the run's ledger has reached ``max_cost_usd``."""
    if endpoint.max_cost_usd is None or endpoint.ledger_path is None:
        return
    from swarm_evo.llm.ledger import ledger_for

    cost = ledger_for(endpoint.ledger_path).totals().known_cost_usd  # the priced calls: a floor when some are not
    if cost >= endpoint.max_cost_usd:
        raise CostLimitReached(
            f"model.max_cost_usd reached (${cost:.4f} of ${endpoint.max_cost_usd:.4f}): "
            f"no {endpoint.role} call to {endpoint.name}"
        )


def _record(endpoint: ModelEndpoint, operation: str | None, *, ok: bool, seconds: float,
            usage: LLMUsage | None = None, error: str | None = None) -> None:
    if endpoint.ledger_path is None:
        return
    from swarm_evo.llm.ledger import current_scope, ledger_for

    usage = usage or LLMUsage()
    ledger_for(endpoint.ledger_path).record(
        role=endpoint.role, operation=operation, model=endpoint.name, ok=ok,
        prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
        cost_usd=usage.cost, seconds=seconds, error=error, scope=current_scope(),
    )




def message_text(message) -> str:
    """A reply message's text: ``content`` as a string (a list of content parts is joined).
    ``reasoning_content`` is never read (issue 13: reasoning is not the answer)."""
    content = getattr(message, "content", None)
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return content or ""


class CodeReply(BaseModel):
    """A parsed code reply: the plan (text before the code), the program, and the usage of the
    call(s) it took (two when the first reply was re-asked). ``rule`` says why this block was
    chosen (:class:`swarm_evo.llm.replies.ProgramChoice`); ``problems`` lists what was wrong
    with the replies asked again (and with the last one when it was taken anyway)."""

    plan: str
    code: str
    usage: LLMUsage
    rule: str = "markers"
    problems: list[str] = Field(default_factory=list)


_CODE_REMINDER = (
    "\n\nYour previous reply {problem}. Reply with a short plan, then the complete program in "
    "one fenced ```python code block."
)
_CUT_OFF_REMINDER = (
    "\n\nYour previous reply was cut off ({why}, after {chars} characters). Reply again with a "
    "much shorter plan (2-3 sentences) and the complete program in one fenced ```python code "
    "block; keep the code compact: no long comments, no repeated code."
)


def complete_code(
    endpoint: ModelEndpoint, prompt: str, ctx: dict | None = None, *, loci: Sequence[str] | None = None
) -> CodeReply:
    """Ask for a program: one user message ``prompt``; the program is chosen from the reply by
    :func:`swarm_evo.llm.replies.choose_program` (the block with the most markers of ``loci``,
    else the longest that compiles, else the longest; reasoning ignored), the plan is the text
    before it.

    A reply without a program (or an empty one) is asked again :data:`BAD_REPLY_REASKS`
    time(s), the prompt followed by a reminder; a cut-off reply (``finish_reason == "length"``
    or an unclosed fence, :func:`swarm_evo.llm.replies.cut_off_reason`) whose program is not
    complete is asked again with "shorter" guidance. The last reply is taken when it holds a
    program, unless that block is followed by a cut-off one (the program it was writing is
    lost). ``ctx`` (offline model) is the same each time.

    Raises:
        GenerationError: still no usable program after the re-ask; the message names what was
            wrong with each reply (e.g. "was cut off (the output limit was reached; …)"),
            ``usage`` holds the calls' cost.
        DeadlineReached: from :func:`call_model`.
        litellm exceptions: whatever litellm raises once its own ``num_retries`` are spent,
            e.g. the transient :func:`transient_errors` (the caller's Prefect task retries
            those) or ``litellm.BadRequestError``.
    """
    usage, problems, current = LLMUsage(), [], prompt
    for attempt in range(1 + BAD_REPLY_REASKS):
        response, call_usage = call_model(endpoint, [{"role": "user", "content": current}], ctx)
        usage = usage.add(call_usage)
        first = response.choices[0]
        reading = read_code_reply(message_text(first.message), getattr(first, "finish_reason", None), loci)
        choice = reading.choice
        last = attempt == BAD_REPLY_REASKS
        if reading.usable or (last and choice is not None and not (choice.followed_by_cut and not choice.complete)):
            taken = problems + ([reading.problem] if reading.problem else [])
            return CodeReply(plan=choice.plan, code=choice.code, usage=usage, rule=choice.rule, problems=taken)
        problems.append(reading.problem or "had no usable program")
        if reading.cut_off is not None:
            current = prompt + _CUT_OFF_REMINDER.format(why=reading.cut_off, chars=reading.chars)
        else:
            current = prompt + _CODE_REMINDER.format(problem=problems[-1])
    raise GenerationError(
        f"no usable program in {len(problems)} replies: " + "; ".join(f"the reply {p}" for p in problems),
        usage=usage,
    )
