"""Checks before a run spends anything: the model is known and has its API key
(:func:`check_model_access`), and it answers (:func:`probe_model`, one short call, cached per
endpoint)."""

from __future__ import annotations

import time

from pydantic import BaseModel, Field

from swarm_evo.llm.client import call_model
from swarm_evo.llm.endpoint import ModelEndpoint
from swarm_evo.llm import import_litellm
from swarm_evo.llm.errors import ModelAccessError, transient_errors
from swarm_evo.population.node import LLMUsage


def check_model_access(endpoint: ModelEndpoint) -> None:
    """Fail before any work when the model cannot be reached as configured.

    Raises:
        ModelAccessError: litellm does not know the model's provider, or the provider needs
            an environment variable (e.g. OPENAI_API_KEY) that is unset and no api_key was
            given; the message names the variable to set.
        ConfigError: ``max_cost_usd`` is set but the endpoint's calls have no price (litellm's
            cost map lacks the model and no custom price is given): the limit could never be
            enforced; the message names ``model.input_cost_per_token`` /
            ``output_cost_per_token`` (issue 31).
    """
    if endpoint.is_offline:
        from swarm_evo.llm.offline import register

        register()
        return
    litellm = import_litellm()
    try:
        litellm.get_llm_provider(endpoint.name, api_base=endpoint.api_base)
    except Exception as exc:  # litellm raises BadRequestError for unknown providers
        raise ModelAccessError(
            f"unknown model '{endpoint.name}': use a litellm model name such as "
            f"'openai/gpt-4o-mini', 'anthropic/claude-3-5-sonnet-latest' or 'ollama_chat/llama3' "
            f"(a local server's URL goes in model.api_base of --config or an LLM settings block), "
            f"or 'offline' ({str(exc).splitlines()[0][:200]})"
        ) from None
    if endpoint.max_cost_usd is not None and not endpoint.price_known:
        from swarm_evo.config import ConfigError

        raise ConfigError(
            f"model.max_cost_usd is {endpoint.max_cost_usd:g} but litellm has no price for the {endpoint.role} "
            f"model '{endpoint.name}', so the limit could not be enforced: set model.input_cost_per_token and "
            f"model.output_cost_per_token (USD per token, e.g. 0 for a free local model), or remove model.max_cost_usd"
        )
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
    litellm = import_litellm()
    started = time.perf_counter()
    try:
        _, usage = call_model(probe, [{"role": "user", "content": PROBE_PROMPT}], {"purpose": "probe"})
        result = ProbeResult(usage=usage, seconds=time.perf_counter() - started)
    except transient_errors() as exc:
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
