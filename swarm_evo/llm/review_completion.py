"""The review call (SPEC §6): a forced function call where the model supports it, else a JSON
object in the reply text (issue 13); a bad reply is re-asked once, then its error is returned
and the review is decided on the deterministic facts."""

from __future__ import annotations

import json
import logging
from typing import Any, Literal, Sequence

from pydantic import BaseModel, Field

from swarm_evo.llm import import_litellm
from swarm_evo.llm.client import BAD_REPLY_REASKS, call_model, message_text
from swarm_evo.llm.endpoint import ModelEndpoint
from swarm_evo.llm.json_reply import json_instruction, json_object_in_text, parse_tool_arguments
from swarm_evo.population.node import LLMUsage

log = logging.getLogger(__name__)


_TOOL_REMINDER = (
    "\n\nYour previous reply was not usable ({problem}). Call the function `{name}` with a JSON "
    "object as its arguments."
)
_JSON_REMINDER = "\n\nYour previous reply was not usable ({problem})."


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
        info = import_litellm().get_model_info(model=endpoint.name)
    except Exception:  # litellm raises for a model it has not mapped
        return None
    value = info.get("supports_function_calling") if isinstance(info, dict) else None
    return None if value is None else bool(value)


def _rejects_tools(exc: BaseException) -> bool:
    """True when a 400 (or litellm's own UnsupportedParamsError) is about tools: the message
    names tools, tool_choice or functions (vLLM without a tool parser, Ollama's "does not
    support tools", llama.cpp without --jinja)."""
    if not isinstance(exc, import_litellm().BadRequestError):  # UnsupportedParamsError is one
        return False
    text = str(exc).lower()
    return "tool" in text or "function" in text


def _review_arguments(response, keys: Sequence[str]) -> tuple[dict | None, str | None, str | None]:
    """``(arguments, source, error)`` of a review reply: the first tool call's arguments
    (JSON, fenced or with text around it: :func:`swarm_evo.llm.json_reply.parse_tool_arguments`), else
    a JSON object in the reply text (:func:`swarm_evo.llm.json_reply.json_object_in_text`, the
    object holding most of ``keys``)."""
    message = response.choices[0].message
    calls = getattr(message, "tool_calls", None) or []
    text = message_text(message)
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
    :func:`swarm_evo.llm.json_reply.json_instruction` (keys, types, descriptions) to the prompt
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
        DeadlineReached: from :func:`~swarm_evo.llm.client.call_model`.
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
            response, call_usage = call_model(endpoint, [{"role": "user", "content": current}], ctx, **extra)
        except import_litellm().BadRequestError as exc:
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
