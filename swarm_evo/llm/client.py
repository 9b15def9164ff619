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
    """Which model to call and how. ``api_key`` is a SecretStr: it never appears in logs or reprs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = OFFLINE
    api_base: str | None = None
    api_key: SecretStr | None = None
    temperature: float = 0.5
    timeout: float = 600.0
    num_retries: int = 2
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


def endpoint_for(model, api_key: SecretStr | str | None = None) -> ModelEndpoint:
    """The endpoint for a run's ``model`` config section (swarm_evo.config.ModelConfig),
    with an optional API key (from a Prefect block; never from the config file)."""
    if isinstance(api_key, str):
        api_key = SecretStr(api_key)
    return ModelEndpoint(
        name=model.name,
        api_base=model.api_base,
        api_key=api_key,
        temperature=model.temperature,
        timeout=model.timeout,
        num_retries=model.num_retries,
        injected_failure_rate=getattr(model, "injected_failure_rate", 0.0),
    )


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
            f"'openai/gpt-4o-mini', 'anthropic/claude-3-5-sonnet-latest' or 'ollama/llama3' "
            f"(with --api-base), or 'offline' ({str(exc).splitlines()[0][:200]})"
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


def _call(endpoint: ModelEndpoint, messages: list[dict], ctx: dict | None, **extra: Any):
    kwargs: dict[str, Any] = dict(
        model=endpoint.litellm_model,
        messages=messages,
        temperature=endpoint.temperature,
        timeout=endpoint.timeout,
        num_retries=endpoint.num_retries,
        **extra,
    )
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
    started = time.perf_counter()
    response = litellm.completion(**kwargs)
    seconds = time.perf_counter() - started
    usage = getattr(response, "usage", None)
    cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
    return response, LLMUsage(
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cost=float(cost) if cost is not None else None,
        calls=1,
        seconds=seconds,
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
