"""Every LLM call of a run, through litellm (SPEC §7).

Code replies are plain completions read by :mod:`swarm_evo.llm.replies` (the block holding the
section markers, else the longest that compiles; reasoning ignored; cut-off replies re-asked
shorter), the text before the program is the plan; reviews are a forced function call where the
model supports it, else a JSON object in the reply text (issue 13). Each call sets ``num_retries``
and ``timeout`` explicitly and returns its usage (tokens, cost, seconds) for the node.
The structured context (docs/CONTRACTS.md) is sent only to the offline model: some providers
have a ``metadata`` field of their own.

Failing models (issue 7; the policy is written out in tasks/_policy.py):

- transient errors (:data:`TRANSIENT_ERRORS`) are first retried by litellm itself
  (``num_retries``; checked with litellm 1.106.2: it re-calls at once, no wait, and also for a
  custom provider such as the offline model; any ``openai.APIError`` is re-called, even a 401),
  then propagate to the Prefect task, whose retries wait with a backoff;
- a bad reply (no code block, an empty or cut-off reply, no tool call and no JSON object in
  the text, tool-call arguments that are not a JSON object) is re-asked :data:`BAD_REPLY_REASKS` time(s) with a reminder; a code reply that
  is still bad raises :class:`GenerationError`, a tool call that is still bad returns its error
  (the review then decides on the deterministic facts).
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any, Literal, Sequence

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price-map download at import

import litellm  # noqa: E402

litellm.suppress_debug_info = True
from pydantic import BaseModel, ConfigDict, Field, SecretStr  # noqa: E402

from swarm_evo.node import LLMUsage  # noqa: E402

log = logging.getLogger(__name__)

OFFLINE = "offline"

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    litellm.Timeout,
    litellm.RateLimitError,
    litellm.APIConnectionError,
    litellm.ServiceUnavailableError,
    litellm.InternalServerError,
    litellm.BadGatewayError,
)
"""Errors worth retrying (Prefect task retries with a condition; SPEC §6 'transient errors'):
timeouts (408), rate limits (429), connection errors, 500, 502 and 503."""


class ModelAccessError(ValueError):
    """The model cannot be used as configured (unknown model, missing API key)."""


BAD_REPLY_REASKS = 1
"""How many times a bad reply (no code block, empty, no or invalid tool call) is asked again
before it counts as a failure. A re-ask at temperature > 0 usually gives a usable reply; one
is enough to cover a slip without doubling the cost of a model that never complies."""


class GenerationError(RuntimeError):
    """The model answered, but not with something usable (no code block, empty reply).

    ``usage`` (LLMUsage or None) holds what the failed calls cost, for the dead node.
    """

    def __init__(self, message: str, usage: LLMUsage | None = None):
        super().__init__(message)
        self.usage = usage

    def __reduce__(self):  # picklable with its usage (Prefect may persist a task's exception)
        return (type(self), (str(self), self.usage))


class ModelEndpoint(BaseModel):
    """Which model to call and how. ``api_key`` is a SecretStr: it never appears in logs or reprs.

    ``role`` names what the endpoint is for (``code``, ``review``, ``evolution``: AIDE's code
    and feedback models; :meth:`for_role`). ``deadline`` (Unix time, s) is the run's end: a
    call's timeout and retries are cut to it and no call starts after it (:func:`_call`).
    ``ledger_path`` is the run's ``llm_calls.jsonl`` (:mod:`swarm_evo.llm.ledger`);
    ``max_cost_usd`` (``model.max_cost_usd``) stops calls once the ledger's cost reaches it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = OFFLINE
    role: str = "code"
    api_base: str | None = None
    api_key: SecretStr | None = None
    temperature: float = 0.5
    max_tokens: int | None = None
    drop_params: bool = True
    timeout: float = 600.0
    num_retries: int = 2
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None
    tool_calls: str = "auto"
    deadline: float | None = None
    ledger_path: str | None = None
    max_cost_usd: float | None = None
    injected_failure_rate: float = Field(0.0, ge=0, le=1)
    """Offline model only: chance that a call fails on purpose (swarm_evo/llm/offline/failures.py)."""

    @property
    def is_offline(self) -> bool:
        """True for the built-in offline model (``offline`` or ``offline/<name>``)."""
        return self.name == OFFLINE or self.name.startswith(OFFLINE + "/")

    @property
    def litellm_model(self) -> str:
        """The model string litellm routes on."""
        return f"{OFFLINE}/swarm-evo" if self.name == OFFLINE else self.name

    @property
    def where(self) -> str:
        """The endpoint as messages name it: the api_base, or the provider's default one."""
        return self.api_base or "the provider's default endpoint"

    def for_role(self, role: str, name: str | None) -> "ModelEndpoint":
        """The same endpoint for another role (``review``, ``evolution``), calling model ``name``
        (None: this endpoint's model)."""
        return self.model_copy(update={"role": role, "name": name or self.name})

    def time_left(self) -> float | None:
        """Seconds until :attr:`deadline` (may be ≤ 0), or None without a deadline."""
        return None if self.deadline is None else self.deadline - time.time()


def endpoint_for(model, api_key: SecretStr | str | None = None) -> ModelEndpoint:
    """The code-writing endpoint for a run's ``model`` config section
    (swarm_evo.config.ModelConfig), with an optional API key (from a Prefect block; never from
    the config file). The review and evolution endpoints derive from it
    (:meth:`ModelEndpoint.for_role` with ``model.review_name`` / ``model.evolution_name``)."""
    if isinstance(api_key, str):
        api_key = SecretStr(api_key)
    return ModelEndpoint(
        name=model.name,
        api_base=model.api_base,
        api_key=api_key,
        temperature=model.temperature,
        max_tokens=model.max_tokens,
        drop_params=model.drop_params,
        timeout=model.timeout,
        num_retries=model.num_retries,
        input_cost_per_token=model.input_cost_per_token,
        output_cost_per_token=model.output_cost_per_token,
        tool_calls=model.tool_calls,
        injected_failure_rate=getattr(model, "injected_failure_rate", 0.0),
    )


class DeadlineReached(RuntimeError):
    """The run's time limit is reached: no model call starts (and a transient error close to
    the deadline is not retried). Not transient: callers end the step instead."""


class CostLimitReached(DeadlineReached):
    """The run's model calls have cost ``model.max_cost_usd``: no further call starts. Handled
    as the deadline is (the step ends; the run stops cleanly), so a run overshoots its limit by
    at most the calls already in flight (issue 13)."""


RETRY_HORIZON = 45.0
"""Seconds the Prefect task retries may wait before the next attempt (tasks/_policy.py: the
longest delay, 30 s, times the jitter 1.5). A transient error with less time than this left
before the deadline becomes :class:`DeadlineReached`, so no retry sleeps past the run's end."""


def check_model_access(endpoint: ModelEndpoint) -> None:
    """Fail before any work when the model cannot be reached as configured.

    Raises:
        ModelAccessError: litellm does not know the model's provider, or the provider needs
            an environment variable (e.g. OPENAI_API_KEY) that is unset and no api_key was
            given; the message names the variable to set.
    """
    if endpoint.is_offline:
        from swarm_evo.llm.offline import register

        register()
        return
    try:
        litellm.get_llm_provider(endpoint.name, api_base=endpoint.api_base)
    except Exception as exc:  # litellm raises BadRequestError for unknown providers
        raise ModelAccessError(
            f"unknown model '{endpoint.name}': use a litellm model name such as "
            f"'openai/gpt-4o-mini', 'anthropic/claude-3-5-sonnet-latest' or 'ollama_chat/llama3' "
            f"(a local server's URL goes in model.api_base of --config or an LLM settings block), "
            f"or 'offline' ({str(exc).splitlines()[0][:200]})"
        ) from None
    if endpoint.api_key is not None:
        return
    env = litellm.validate_environment(model=endpoint.name, api_base=endpoint.api_base)
    missing = [k for k in env.get("missing_keys", []) if not (k.endswith("API_BASE") and endpoint.api_base)]
    if missing:
        raise ModelAccessError(
            f"model '{endpoint.name}' needs {', '.join(missing)}: set "
            f"{' and '.join(missing)} in the environment, or save an LLM settings block with "
            f"api_key and pass its name (--llm-block / llm_block), or use --model offline"
        )


class ProbeResult(BaseModel):
    """The preflight call's outcome: ``usage`` (what it cost) and ``warning`` (a transient
    failure — timeout, 429, 5xx — that does not stop the run; None when the model answered)."""

    usage: LLMUsage = Field(default_factory=LLMUsage)
    warning: str | None = None
    seconds: float = 0.0
    model: str = ""
    recorded: bool = False
    """Set once a run's ledger counted this call (a cached probe is counted by one run only)."""


PROBE_PROMPT = "Reply with the single word OK."
PROBE_TIMEOUT = 30.0
"""Seconds the preflight call may take at most (the model's own timeout when shorter)."""

_PROBES: dict[tuple, ProbeResult] = {}


def probe_model(endpoint: ModelEndpoint) -> ProbeResult:
    """One small call before the first step (issue 13, fail fast), once per process and
    endpoint (the CLI's preflight and the flow share it); nothing for the offline model.

    Returns the :class:`ProbeResult`; a timeout, a rate limit or a 5xx is a warning, not a
    failure (the run's own retries deal with a slow or busy server).

    Raises:
        ModelAccessError: one line naming the model, the endpoint and the fix, when the
            endpoint is unreachable (connection refused, unknown host), refuses the key (401,
            403) or does not know the model (404, or a 400 saying so).
    """
    if endpoint.is_offline:
        return ProbeResult()
    key = (endpoint.name, endpoint.api_base, endpoint.api_key.get_secret_value() if endpoint.api_key else None)
    if key in _PROBES:
        return _PROBES[key]
    probe = endpoint.model_copy(update={
        "timeout": min(endpoint.timeout, PROBE_TIMEOUT), "num_retries": 0, "deadline": None, "ledger_path": None,
    })
    started = time.perf_counter()
    try:
        _, usage = _call(probe, [{"role": "user", "content": PROBE_PROMPT}], {"purpose": "probe"})
        result = ProbeResult(usage=usage, seconds=time.perf_counter() - started)
    except TRANSIENT_ERRORS as exc:
        if _unreachable(exc):
            raise ModelAccessError(_probe_message(endpoint, "cannot be reached", exc,
                                                  "start the server or fix model.api_base")) from None
        result = ProbeResult(seconds=time.perf_counter() - started,
                             warning=f"the preflight call failed ({type(exc).__name__}); the run goes on and retries")
    except (litellm.AuthenticationError, litellm.PermissionDeniedError) as exc:
        raise ModelAccessError(_probe_message(
            endpoint, "refused the API key", exc,
            "set the provider's API key variable (e.g. OPENAI_API_KEY) or an LLM settings block's api_key "
            "(--llm-block)")) from None
    except litellm.NotFoundError as exc:
        raise ModelAccessError(_probe_message(endpoint, "does not serve this model", exc,
                                              "use a model name the server lists (--model)")) from None
    except litellm.BadRequestError as exc:
        text = str(exc).lower()
        if "model" in text and ("not found" in text or "does not exist" in text or "unknown" in text):
            raise ModelAccessError(_probe_message(endpoint, "does not serve this model", exc,
                                                  "use a model name the server lists (--model)")) from None
        result = ProbeResult(seconds=time.perf_counter() - started,
                             warning=f"the preflight call was rejected ({str(exc).splitlines()[0][:200]})")
    result.model = endpoint.name
    _PROBES[key] = result
    return result


def _unreachable(exc: BaseException) -> bool:
    """True when the error's cause chain holds a refused connection or an unknown host (litellm
    reports an OpenAI-compatible server's refused connection as a 500 "Connection error.")."""
    import socket

    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, (ConnectionRefusedError, socket.gaierror)):
            return True
        cause = cause.__cause__ or cause.__context__
    text = str(exc).lower()
    return "connection refused" in text or "name or service not known" in text


def _probe_message(endpoint: ModelEndpoint, what: str, exc: BaseException, fix: str) -> str:
    detail = " ".join(str(exc).split())[:200]
    return f"model '{endpoint.name}' at {endpoint.where} {what} ({type(exc).__name__}: {detail}): {fix}"


def _call(endpoint: ModelEndpoint, messages: list[dict], ctx: dict | None, **extra: Any):
    """One litellm completion: ``(response, LLMUsage)``. Every call, failed ones too, is written
    to the run's ledger (``endpoint.ledger_path``) under ``ctx["purpose"]``.

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
    started = time.perf_counter()
    try:
        response = litellm.completion(**kwargs)
    except Exception as exc:
        _record(endpoint, operation, ok=False, seconds=time.perf_counter() - started,
                error=f"{type(exc).__name__}: {exc}")
        after = endpoint.time_left()
        if isinstance(exc, TRANSIENT_ERRORS) and after is not None and after < RETRY_HORIZON:
            raise DeadlineReached(
                f"{type(exc).__name__} with {max(0.0, after):.0f} s left before the time limit: not retried"
            ) from exc
        raise
    seconds = time.perf_counter() - started
    usage = getattr(response, "usage", None)
    cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
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

    cost = ledger_for(endpoint.ledger_path).totals().cost_usd
    if cost is not None and cost >= endpoint.max_cost_usd:
        raise CostLimitReached(
            f"model.max_cost_usd reached (${cost:.4f} of ${endpoint.max_cost_usd:.4f}): "
            f"no {endpoint.role} call to {endpoint.name}"
        )


def _record(endpoint: ModelEndpoint, operation: str | None, *, ok: bool, seconds: float,
            usage: LLMUsage | None = None, error: str | None = None) -> None:
    if endpoint.ledger_path is None:
        return
    from swarm_evo.llm.ledger import ledger_for

    usage = usage or LLMUsage()
    ledger_for(endpoint.ledger_path).record(
        role=endpoint.role, operation=operation, model=endpoint.name, ok=ok,
        prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
        cost_usd=usage.cost, seconds=seconds, error=error,
    )


from swarm_evo.llm.replies import (  # noqa: E402
    extract_code,  # noqa: F401  (re-exported: the first version's API)
    json_instruction,
    json_object_in_text,
    read_code_reply,
)


def _message_text(message) -> str:
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
_TOOL_REMINDER = (
    "\n\nYour previous reply was not usable ({problem}). Call the function `{name}` with a JSON "
    "object as its arguments."
)
_JSON_REMINDER = "\n\nYour previous reply was not usable ({problem})."


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
        DeadlineReached: from :func:`_call`.
        litellm exceptions: whatever litellm raises once its own ``num_retries`` are spent,
            e.g. the transient :data:`TRANSIENT_ERRORS` (the caller's Prefect task retries
            those) or ``litellm.BadRequestError``.
    """
    usage, problems, current = LLMUsage(), [], prompt
    for attempt in range(1 + BAD_REPLY_REASKS):
        response, call_usage = _call(endpoint, [{"role": "user", "content": current}], ctx)
        usage = usage.add(call_usage)
        first = response.choices[0]
        reading = read_code_reply(_message_text(first.message), getattr(first, "finish_reason", None), loci)
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


class ReviewReply(BaseModel):
    """What :func:`complete_review` got.

    Fields: ``arguments`` (the decoded object, None when no reply could be parsed),
    ``usage`` (every call), ``error`` (None, or why no reply could be parsed — the caller logs
    it as a warning), ``mode`` (``tool_call``: the last call sent ``tools``; ``json_text``: it
    asked for a JSON object in the text), ``source`` (where the arguments came from:
    ``tool_call``, ``text``, or None), ``tools_rejected`` (the provider refused the ``tools``
    parameter in this call: send no tools to this endpoint again; :func:`supports_tool_calls`
    remembers it for the process), ``problems`` (what was wrong with replies asked again).
    """

    arguments: dict | None = None
    usage: LLMUsage = Field(default_factory=LLMUsage)
    error: str | None = None
    mode: Literal["tool_call", "json_text"] = "tool_call"
    source: Literal["tool_call", "text"] | None = None
    tools_rejected: bool = False
    problems: list[str] = Field(default_factory=list)


_TOOLS_REJECTED: set[tuple[str, str | None]] = set()
"""Endpoints ``(model, api_base)`` whose provider rejected ``tools`` in this process."""

_JSON_TEXT_WARNED: set[tuple[str, str | None]] = set()
"""Endpoints whose fallback to JSON-text reviews was already logged in this process."""


def _warn_json_text_reviews(endpoint: ModelEndpoint, why: str) -> None:
    """Log, once per endpoint and process, that reviews of ``endpoint`` are read from JSON in
    the reply text instead of forced tool calls, and why (issue 13: it was silent)."""
    key = (endpoint.name, endpoint.api_base)
    if key in _JSON_TEXT_WARNED:
        return
    _JSON_TEXT_WARNED.add(key)
    log.warning(
        "%s model %s%s %s: reviews fall back to a JSON object in the reply text "
        "(set model.tool_calls to 'off' to skip the tool-call attempt, 'on' to insist on it)",
        endpoint.role, endpoint.name, f" at {endpoint.api_base}" if endpoint.api_base else "", why,
    )


def supports_tool_calls(endpoint: ModelEndpoint) -> bool | None:
    """Whether reviews to ``endpoint`` should be forced tool calls (issue 13, item 3).

    ``endpoint.tool_calls`` (``model.tool_calls``): ``on`` → True, ``off`` → False; ``auto``:
    True for the offline model, False once the provider rejected ``tools`` in this process
    (:func:`complete_review`), else what litellm's model map says
    (``litellm.get_model_info(model)["supports_function_calling"]``, checked with 1.106.2:
    True for ``openai/gpt-4o-mini``, False for ``deepseek/deepseek-reasoner``) and None when
    litellm does not know the model (``ollama_chat/…``, ``hosted_vllm/…``, an ``openai/``
    name served locally): the caller then tries tools and falls back on rejection.
    """
    setting = getattr(endpoint, "tool_calls", "auto")
    if setting == "on":
        return True
    if setting == "off":
        return False
    if endpoint.is_offline:
        return True
    if (endpoint.name, endpoint.api_base) in _TOOLS_REJECTED:
        return False
    try:
        info = litellm.get_model_info(model=endpoint.name)
    except Exception:  # litellm raises for a model it has not mapped
        return None
    value = info.get("supports_function_calling") if isinstance(info, dict) else None
    return None if value is None else bool(value)


def _rejects_tools(exc: BaseException) -> bool:
    """True when a 400 (or litellm's own UnsupportedParamsError) is about tools: the message
    names tools, tool_choice or functions (vLLM without a tool parser, Ollama's "does not
    support tools", llama.cpp without --jinja)."""
    if not isinstance(exc, litellm.BadRequestError):  # UnsupportedParamsError is one
        return False
    text = str(exc).lower()
    return "tool" in text or "function" in text


def _review_arguments(response, keys: Sequence[str]) -> tuple[dict | None, str | None, str | None]:
    """``(arguments, source, error)`` of a review reply: the first tool call's arguments
    (JSON, fenced or with text around it: :func:`swarm_evo.review.parse_tool_arguments`), else
    a JSON object in the reply text (:func:`swarm_evo.llm.replies.json_object_in_text`, the
    object holding most of ``keys``)."""
    from swarm_evo.review import parse_tool_arguments

    message = response.choices[0].message
    calls = getattr(message, "tool_calls", None) or []
    text = _message_text(message)
    problem = None
    if calls:
        raw = calls[0].function.arguments
        args = parse_tool_arguments(raw)
        if args is not None:
            return args, "tool_call", None
        try:
            json.loads(raw or "")
            problem = "tool-call arguments are not an object"
        except json.JSONDecodeError as exc:
            problem = f"tool-call arguments are not JSON ({exc})"
    from_text = json_object_in_text(text, keys)
    if from_text is not None:
        return from_text, "text", None
    if problem is not None:
        return None, None, problem
    if not text.strip():
        return None, None, "the reply has no tool call and no text"
    return None, None, f"the reply has no tool call and no JSON object in its text ({len(text)} characters)"


def complete_review(
    endpoint: ModelEndpoint,
    prompt: str,
    tool: dict,
    ctx: dict | None = None,
    *,
    use_tools: bool | None = None,
) -> ReviewReply:
    """Ask for the arguments of ``tool`` (OpenAI tool schema), as a forced tool call or as a
    JSON object in the reply text (issue 13, item 3).

    ``use_tools``: True sends ``tools`` with a forced ``tool_choice``; False appends
    :func:`swarm_evo.llm.replies.json_instruction` (keys, types, descriptions) to the prompt
    and sends no tools; None (default) decides by :func:`supports_tool_calls` (tools unless it
    says False). In both modes a tool call is taken when there is one, and otherwise a JSON
    object in the text (fenced or bare, after reasoning; :func:`_review_arguments`). When the
    provider rejects ``tools`` (``litellm.BadRequestError`` / ``UnsupportedParamsError``
    naming tools or functions) the same call is made again in JSON-text mode (not counted as a
    re-ask) and ``tools_rejected`` is set. A reply that cannot be parsed is asked again
    :data:`BAD_REPLY_REASKS` time(s) with a reminder.

    Returns:
        :class:`ReviewReply`; ``error`` is set (and ``arguments`` None) when no reply could be
        parsed: the review then decides on the deterministic facts.

    Raises:
        DeadlineReached: from :func:`_call`.
        litellm exceptions: as :func:`complete_code` (transient ones for the caller's retries),
            a BadRequestError that is not about tools included.
    """
    function = tool["function"]
    name = function["name"]
    keys = list((function.get("parameters") or {}).get("properties") or ())
    if use_tools is None:
        use_tools = supports_tool_calls(endpoint) is not False
    mode = "tool_call" if use_tools else "json_text"
    if mode == "json_text" and getattr(endpoint, "tool_calls", "auto") == "auto":
        _warn_json_text_reviews(endpoint, "does not support tool calls (litellm's model map)")
    instruction = json_instruction(tool)
    usage, errors, rejected = LLMUsage(), [], False
    current = prompt if mode == "tool_call" else prompt + instruction
    attempt = 0
    while attempt < 1 + BAD_REPLY_REASKS:
        extra: dict[str, Any] = {}
        if mode == "tool_call":
            extra = dict(tools=[tool], tool_choice={"type": "function", "function": {"name": name}})
        try:
            response, call_usage = _call(endpoint, [{"role": "user", "content": current}], ctx, **extra)
        except litellm.BadRequestError as exc:
            if mode != "tool_call" or not _rejects_tools(exc):
                raise
            _TOOLS_REJECTED.add((endpoint.name, endpoint.api_base))
            _warn_json_text_reviews(endpoint, f"rejected tool calls ({str(exc).splitlines()[0][:200]})")
            mode, rejected, current = "json_text", True, prompt + instruction
            continue
        usage = usage.add(call_usage)
        args, source, error = _review_arguments(response, keys)
        if error is None and mode == "tool_call" and source == "text":
            _warn_json_text_reviews(endpoint, "answered a forced tool call with text")
        if error is None:
            return ReviewReply(arguments=args, usage=usage, mode=mode, source=source,
                               tools_rejected=rejected, problems=errors)
        errors.append(error)
        attempt += 1
        if mode == "tool_call":
            current = prompt + _TOOL_REMINDER.format(problem=error, name=name) + instruction.replace(
                "\n\nReply with ONLY", "\n\nIf you cannot call functions, reply with ONLY", 1)
        else:
            current = prompt + _JSON_REMINDER.format(problem=error) + instruction
    return ReviewReply(usage=usage, error="; ".join(errors) + f" (after {BAD_REPLY_REASKS} re-ask)",
                       mode=mode, tools_rejected=rejected, problems=errors)
