"""Every LLM call of a run, through litellm (SPEC §7).

Code replies are plain completions whose first fenced python block is the program and whose
text before it is the plan; reviews are a forced function call. Each call sets ``num_retries``
and ``timeout`` explicitly and returns its usage (tokens, cost, seconds) for the node.
The structured context (docs/CONTRACTS.md) is sent only to the offline model: some providers
have a ``metadata`` field of their own.

Failing models (issue 7; the policy is written out in tasks/_policy.py):

- transient errors (:data:`TRANSIENT_ERRORS`) are first retried by litellm itself
  (``num_retries``; checked with litellm 1.106.2: it re-calls at once, no wait, and also for a
  custom provider such as the offline model; any ``openai.APIError`` is re-called, even a 401),
  then propagate to the Prefect task, whose retries wait with a backoff;
- a bad reply (no code block, an empty reply, no tool call, tool-call arguments that are not a
  JSON object) is re-asked :data:`BAD_REPLY_REASKS` time(s) with a reminder; a code reply that
  is still bad raises :class:`GenerationError`, a tool call that is still bad returns its error
  (the review then decides on the deterministic facts).
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price-map download at import

import litellm  # noqa: E402

litellm.suppress_debug_info = True
from pydantic import BaseModel, ConfigDict, Field, SecretStr  # noqa: E402

from swarm_evo.node import LLMUsage  # noqa: E402

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
    ``ledger_path`` is the run's ``llm_calls.jsonl`` (:mod:`swarm_evo.llm.ledger`).
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
        litellm exceptions: whatever litellm raises once its own retries are spent.
    """
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


_FENCE_LINE = re.compile(r"^\s*```+\s*([A-Za-z0-9_+-]*)\s*$")


def _fenced_blocks(text: str) -> list[tuple[str, int, str]]:
    """``(language, start offset, body)`` of each fenced block, scanning line by line."""
    blocks, offset, open_at, lang, body = [], 0, None, "", []
    for line in text.splitlines(keepends=True):
        m = _FENCE_LINE.match(line)
        if open_at is None and m:
            open_at, lang, body = offset, m.group(1).lower(), []
        elif open_at is not None and m and not m.group(1):
            blocks.append((lang, open_at, "".join(body)))
            open_at = None
        elif open_at is not None:
            body.append(line)
        offset += len(line)
    return blocks


def extract_code(text: str) -> tuple[str, str] | None:
    """Split a reply into ``(plan, code)``: code is the first fenced python block (a bare
    fence when there is no python one), plan the text before it. None when there is no block."""
    blocks = [b for b in _fenced_blocks(text or "") if b[2].strip()]
    python = [b for b in blocks if b[0] in ("python", "py", "python3")]
    bare = [b for b in blocks if not b[0]]
    chosen = (python or bare or [None])[0]
    if chosen is None:
        return None
    _, start, body = chosen
    return text[:start].strip(), body.rstrip("\n") + "\n"


class CodeReply(BaseModel):
    """A parsed code reply: the plan (text before the code), the program, and the usage of the
    call(s) it took (two when the first reply was re-asked)."""

    plan: str
    code: str
    usage: LLMUsage


_CODE_REMINDER = (
    "\n\nYour previous reply {problem}. Reply with a short plan, then the complete program in "
    "one fenced ```python code block."
)
_TOOL_REMINDER = (
    "\n\nYour previous reply was not usable ({problem}). Call the function `{name}` with a JSON "
    "object as its arguments."
)


def _code_problem(text: str) -> str:
    return "was empty" if not text.strip() else f"had no fenced code block ({len(text)} characters)"


def complete_code(endpoint: ModelEndpoint, prompt: str, ctx: dict | None = None) -> CodeReply:
    """Ask for a program: one user message ``prompt``; the reply's first fenced python block is
    the code, the text before it the plan (:func:`extract_code`).

    A reply without a code block (or an empty one) is asked again :data:`BAD_REPLY_REASKS`
    time(s), the prompt followed by a reminder; ``ctx`` (offline model) is the same each time.

    Raises:
        GenerationError: still no code block after the re-ask; the message names what was
            wrong with each reply, ``usage`` holds the calls' cost.
        litellm exceptions: whatever litellm raises once its own ``num_retries`` are spent,
            e.g. the transient :data:`TRANSIENT_ERRORS` (the caller's Prefect task retries
            those) or ``litellm.BadRequestError``.
    """
    usage, problems, current = LLMUsage(), [], prompt
    for _ in range(1 + BAD_REPLY_REASKS):
        response, call_usage = _call(endpoint, [{"role": "user", "content": current}], ctx)
        usage = usage.add(call_usage)
        text = response.choices[0].message.content or ""
        parsed = extract_code(text)
        if parsed is not None:
            plan, code = parsed
            return CodeReply(plan=plan, code=code, usage=usage)
        problems.append(_code_problem(text))
        current = prompt + _CODE_REMINDER.format(problem=problems[-1])
    raise GenerationError(
        f"no usable program in {len(problems)} replies: " + "; ".join(f"the reply {p}" for p in problems),
        usage=usage,
    )


def _tool_arguments(response) -> tuple[dict | None, str | None]:
    calls = getattr(response.choices[0].message, "tool_calls", None) or []
    if not calls:
        content = response.choices[0].message.content or ""
        return None, "the reply has no tool call" + ("" if content.strip() else " and no text")
    try:
        args = json.loads(calls[0].function.arguments or "")
    except json.JSONDecodeError as exc:
        return None, f"tool-call arguments are not JSON ({exc})"
    if not isinstance(args, dict):
        return None, "tool-call arguments are not an object"
    return args, None


def complete_review(
    endpoint: ModelEndpoint, prompt: str, tool: dict, ctx: dict | None = None
) -> tuple[dict | None, LLMUsage, str | None]:
    """Forced function call of ``tool`` (OpenAI tool schema). Returns ``(arguments, usage, error)``:
    the decoded arguments and None, or None and an error text when the reply has no parsable
    tool call (no tool call, arguments not JSON, not an object) even after
    :data:`BAD_REPLY_REASKS` re-ask(s); usage covers every call.

    Raises:
        litellm exceptions: as :func:`complete_code` (transient ones for the caller's retries).
    """
    name = tool["function"]["name"]
    usage, errors, current = LLMUsage(), [], prompt
    for _ in range(1 + BAD_REPLY_REASKS):
        response, call_usage = _call(
            endpoint,
            [{"role": "user", "content": current}],
            ctx,
            tools=[tool],
            tool_choice={"type": "function", "function": {"name": name}},
        )
        usage = usage.add(call_usage)
        args, error = _tool_arguments(response)
        if error is None:
            return args, usage, None
        errors.append(error)
        current = prompt + _TOOL_REMINDER.format(problem=error, name=name)
    return None, usage, "; ".join(errors) + f" (after {BAD_REPLY_REASKS} re-ask)"
