"""The litellm custom provider ``offline``: answers ``completion(model="offline/<name>")`` in-process.

The core passes the structured context as ``metadata={"swarm_evo": CTX}``; litellm hands it to
the provider as ``kwargs["litellm_params"]["metadata"]["swarm_evo"]`` (checked with litellm
1.106.2). Review calls come back as one ``submit_review`` tool call with JSON-string arguments.
Usage is estimated at 4 characters per token so callers can record tokens.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import json  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402

from swarm_evo.llm import import_litellm  # noqa: E402

litellm = import_litellm()
CustomLLM = litellm.CustomLLM

from . import failures  # noqa: E402
from .respond import Reply, respond  # noqa: E402

PROVIDER = "offline"


def estimate_tokens(text: str) -> int:
    """Rough token count: one token per 4 characters, at least 1 for non-empty text."""
    return (len(text) + 3) // 4 if text else 0


def _message_text(messages: list) -> str:
    parts = []
    for m in messages or []:
        content = m.get("content") if isinstance(m, dict) else getattr(m, "content", None)
        if isinstance(content, list):
            content = " ".join(str(c.get("text", "")) if isinstance(c, dict) else str(c) for c in content)
        if content:
            parts.append(str(content))
    return "\n".join(parts)


def extract_ctx(kwargs: dict) -> dict | None:
    """The swarm_evo CTX from a CustomLLM call's kwargs (``litellm_params.metadata.swarm_evo``)."""
    for holder in (kwargs.get("litellm_params") or {}, kwargs.get("optional_params") or {}, kwargs):
        meta = holder.get("metadata") if isinstance(holder, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("swarm_evo"), dict):
            return meta["swarm_evo"]
    return None


def build_response(model: str, reply: Reply, prompt_text: str) -> litellm.ModelResponse:
    """A litellm ModelResponse carrying the reply text or the tool call, with usage."""
    if reply.tool_name is not None:
        args = reply.tool_arguments_text
        if args is None:
            args = json.dumps(reply.tool_arguments or {})
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{uuid.uuid5(uuid.NAMESPACE_OID, args).hex[:24]}", "type": "function",
            "function": {"name": reply.tool_name, "arguments": args}}]}
        finish, completion_text = "tool_calls", args
    else:
        message = {"role": "assistant", "content": reply.content or ""}
        finish, completion_text = "stop", reply.content or ""
    prompt_tokens = estimate_tokens(prompt_text)
    completion_tokens = estimate_tokens(completion_text)
    return litellm.ModelResponse(
        model=f"{PROVIDER}/{model}",
        created=int(time.time()),
        choices=[{"index": 0, "message": message, "finish_reason": finish}],
        usage={"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
               "total_tokens": prompt_tokens + completion_tokens},
    )


class OfflineLLM(CustomLLM):
    """litellm CustomLLM that writes scikit-learn programs and reviews from the CTX."""

    def completion(self, model: str, messages: list, *args, **kwargs) -> litellm.ModelResponse:
        """Answer synchronously; without a CTX it returns a short note (no network, no key).
        A CTX with ``injected_failure_rate`` may fail on purpose (:mod:`.failures`: raises a
        transient litellm exception or returns a bad reply)."""
        ctx = extract_ctx(kwargs)
        prompt_text = _message_text(messages)
        if ctx is None:
            reply = Reply(content="The offline model needs structured context "
                                  "(metadata={'swarm_evo': CTX}); no program was written.")
        else:
            tools = (kwargs.get("optional_params") or {}).get("tools")
            reply = failures.inject(ctx, model, tools) or respond(ctx, prompt_text)
        return build_response(model, reply, prompt_text)

    async def acompletion(self, model: str, messages: list, *args, **kwargs) -> litellm.ModelResponse:
        """Async variant: the same deterministic, in-process answer."""
        return self.completion(model, messages, *args, **kwargs)


_HANDLER: OfflineLLM | None = None


def register() -> OfflineLLM:
    """Add the ``offline`` provider to ``litellm.custom_provider_map`` (idempotent)."""
    global _HANDLER
    for item in litellm.custom_provider_map:
        if item.get("provider") == PROVIDER and isinstance(item.get("custom_handler"), OfflineLLM):
            _HANDLER = item["custom_handler"]
            return _HANDLER
    _HANDLER = _HANDLER or OfflineLLM()
    litellm.custom_provider_map = [i for i in litellm.custom_provider_map if i.get("provider") != PROVIDER]
    litellm.custom_provider_map.append({"provider": PROVIDER, "custom_handler": _HANDLER})
    return _HANDLER
