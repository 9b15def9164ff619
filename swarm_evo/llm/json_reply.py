"""Reading a JSON object out of a reply's text, for reviews from models without tool calls
(issue 13): fenced or bare objects, trailing commas forgiven, the object holding most of the
expected keys; and the instruction that asks for such an object. Pure functions, no litellm calls."""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from swarm_evo.llm.replies import fenced_blocks, reply_sources


JSON_SCAN_CHARS = 100_000
"""How much of a reply :func:`json_object_in_text` reads (a review is a few KB)."""

_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _loads_object(text: str) -> dict | None:
    for candidate in (text, _TRAILING_COMMA.sub(r"\1", text)):
        try:
            value = json.loads(candidate)
        except (json.JSONDecodeError, ValueError, RecursionError):
            continue
        return value if isinstance(value, dict) else None
    return None


def _objects_in(text: str, nested: bool = True) -> list[dict]:
    """Every top-level JSON object found by scanning ``text`` for ``{`` (raw_decode), each
    followed by the objects nested in it when ``nested``."""
    decoder = json.JSONDecoder()
    found: list[dict] = []
    i = text.find("{")
    while i != -1:
        try:
            value, end = decoder.raw_decode(text, i)
        except (json.JSONDecodeError, ValueError, RecursionError):
            value, end = None, -1
            brace = _matching_brace(text, i)
            if brace != -1:
                value = _loads_object(text[i: brace + 1])
                end = brace + 1 if value is not None else -1
        if isinstance(value, dict):
            found.append(value)
            if nested:
                found.extend(_nested_objects(value))
            i = text.find("{", end)
        else:
            i = text.find("{", i + 1)
    return found


def _nested_objects(value: Any, depth: int = 0) -> list[dict]:
    """Objects nested in a decoded object (``{"review": {...}}``, ``{"name": ..., "arguments":
    "{...}"}`` as a model imitating a tool call writes it), depth first, to three levels."""
    found: list[dict] = []
    if depth >= 3 or not isinstance(value, dict):
        return found
    for item in value.values():
        if isinstance(item, str) and item.strip().startswith("{"):
            item = _loads_object(item.strip())
        if isinstance(item, dict):
            found.append(item)
            found.extend(_nested_objects(item, depth + 1))
    return found


def _matching_brace(text: str, start: int) -> int:
    depth, in_string, escaped = 0, False, False
    for j in range(start, len(text)):
        ch = text[j]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return j
    return -1


def json_object_in_text(text: str | None, keys: Sequence[str] | None = None) -> dict | None:
    """The JSON object a reply holds in its text, or None.

    Reasoning is removed first (:func:`strip_reasoning`). The object is looked for in fenced
    blocks (```` ```json ```` or any language) and anywhere in the text (bare JSON, prose
    before or after it); a trailing comma before ``}``/``]`` is tolerated. With ``keys``, only
    objects holding at least one of them count, nested ones too (``{"review": {...}}``, or a
    tool call imitated in text), and the one with the most wins (ties: the later one, a
    corrected object after a first try); without ``keys``, the whole text when it is one
    object, else the last top-level object. Only objects count (a list is not a review). At
    most :data:`JSON_SCAN_CHARS` of the text are read.
    """
    text = (text or "")[:JSON_SCAN_CHARS]
    wanted = set(keys or ())
    for source in reply_sources(text):
        if wanted:
            candidates: list[dict] = []
            for block in fenced_blocks(source):
                value = _loads_object(block.body.strip())
                if value is not None:
                    candidates += [value, *_nested_objects(value)]
            candidates = [c for c in candidates + _objects_in(source) if wanted & set(c)]
            if candidates:
                return max(enumerate(candidates), key=lambda c: (len(wanted & set(c[1])), c[0]))[1]
            continue
        whole = _loads_object(source.strip())
        if whole is not None:
            return whole
        top = [b for b in (_loads_object(b.body.strip()) for b in fenced_blocks(source)) if b is not None]
        top = top or _top_objects(source)
        if top:
            return top[-1]
    return None


def _top_objects(text: str) -> list[dict]:
    """The top-level objects of :func:`_objects_in` (nested ones left out)."""
    return _objects_in(text, nested=False)


def json_instruction(tool: dict) -> str:
    """The instruction that asks for a tool's arguments as a JSON object in the reply text
    (reviews from models without tool calls; issue 13, item 3), built from the OpenAI tool
    schema ``tool["function"]["parameters"]``: one line per key with its type, whether it is
    required and its description."""
    function = tool.get("function", tool)
    params = function.get("parameters") or {}
    required = set(params.get("required") or ())
    lines = []
    for name, spec in (params.get("properties") or {}).items():
        kind = spec.get("type", "any")
        kind = " or ".join(kind) if isinstance(kind, list) else str(kind)
        need = "required" if name in required else "optional"
        desc = " ".join(str(spec.get("description", "")).split())
        lines.append(f'- "{name}" ({kind}, {need}){": " + desc if desc else ""}')
    keys = ", ".join(f'"{k}"' for k in (params.get("properties") or {}))
    return (
        f"\n\nReply with ONLY a JSON object with these keys: {keys} (the arguments of "
        f"`{function.get('name', 'the function')}`; no other text, no code fence needed):\n"
        + "\n".join(lines)
    )


def parse_tool_arguments(
    arguments: str | dict[str, Any] | None, keys: Sequence[str] | None = None
) -> dict[str, Any] | None:
    """The arguments of a tool call (``submit_review``, ``submit_agent_texts``) as a dict, or
    None when garbled.

    Accepts the raw JSON string of ``tool_calls[0].function.arguments`` or an already
    decoded dict. Models served without a tool parser wrap it (issue 13): a fenced ```json
    block, text or ``<think>`` reasoning around the object, a trailing comma are tolerated
    (:func:`json_object_in_text`; with ``keys``, the object holding most
    of them). A JSON list or scalar is None.
    """
    if arguments is None:
        return None
    if isinstance(arguments, dict):
        return arguments
    text = str(arguments).strip()
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, ValueError, RecursionError):
        return json_object_in_text(text, keys)
    return value if isinstance(value, dict) else None
