"""The stand-in server's "voice": how an :class:`~llm_server.brain.Answer` is worded.

:func:`shape_reply` turns the brain's answer into the reply a real model gives, in the shape
the scenario's schedule picks for it (see :mod:`llm_server.scenarios`): reasoning blocks,
other fences, a snippet before the program, the program without markers, prose after it, a
reply cut off at the output limit, a quoted faulty line before a debug fix, and reviews as
tool calls (arguments plain, wrapped in ```json, with a string metric) or as JSON in the text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .brain import Answer, strip_markers

THINK = (
    "<think>\nThe user wants a complete program. Let me look at the data first: the target is a\n"
    "boolean, ids are strings. I could start with something like\n```python\nprint('baseline')\n```\n"
    "but a proper cross-validated model is better. Keep the section markers.\n</think>\n\n"
)
REASONING = ("The task is a tabular classification. I will reuse a cross-validated scikit-learn "
             "pipeline, keep the seven sections, and print the metric last.")
SNIPPET = (
    "The core of the approach is the model:\n\n```python\nmodel = build_model()\nmodel.fit(X, y)\n```\n\n"
    "Here is the complete program:\n\n"
)
PROSE_AFTER = (
    "\n\nThis should give a solid baseline. Next steps could be tuning the learning rate, adding "
    "interaction features, or ensembling several models. Let me know if you want me to try any of these!\n"
)


@dataclass
class ShapedReply:
    """A reply as the server sends it: ``content`` (None for a pure tool call), an optional
    ``reasoning`` field (``reasoning_content`` / Ollama ``thinking``), ``tool_calls``
    (``[{"name", "arguments": str}]``), ``finish_reason`` (stop, length, tool_calls) and the
    ``shape`` name for the request log."""

    content: str | None
    finish_reason: str = "stop"
    reasoning: str | None = None
    tool_calls: list[dict] = field(default_factory=list)
    shape: str = "tidy"

    def completion_text(self) -> str:
        """Everything the model generated (content, reasoning, tool arguments): what
        ``completion_tokens`` counts."""
        parts = [self.content or "", self.reasoning or ""]
        parts += [c["name"] + c["arguments"] for c in self.tool_calls]
        return "".join(parts)


def _program(plan: str, code: str, fence: str = "python") -> str:
    return f"{plan}\n\n```{fence}\n{code.rstrip()}\n```\n"


def shape_code(answer: Answer, shape: str, remember=None) -> ShapedReply:
    """A code answer (draft, mutate, merge, fix) in ``shape``. ``remember(variant, canonical)``
    is told about a marker-less variant so a later self-fix can restore the markers."""
    plan, code = answer.plan or "Here is the program.", answer.code
    if shape == "think":
        return ShapedReply(THINK + _program(plan, code), shape=shape)
    if shape == "reasoning":
        return ShapedReply(_program(plan, code), reasoning=REASONING, shape=shape)
    if shape == "py_fence":
        return ShapedReply(_program(plan, code, "py"), shape=shape)
    if shape == "bare_fence":
        return ShapedReply(_program(plan, code, ""), shape=shape)
    if shape == "snippet_first":
        return ShapedReply(plan + "\n\n" + SNIPPET + f"```python\n{code.rstrip()}\n```\n", shape=shape)
    if shape == "no_markers":
        variant = strip_markers(code)
        if remember is not None:
            remember(variant, code)
        return ShapedReply(_program(plan, variant), shape=shape)
    if shape == "prose_after":
        return ShapedReply(_program(plan, code) + PROSE_AFTER, shape=shape)
    if shape == "cut_off":
        full = _program(plan, code)
        cut = full[: int(len(full) * 0.6)]
        cut = cut[: cut.rfind("\n") + 1] if "\n" in cut else cut
        return ShapedReply(cut, finish_reason="length", shape=shape)
    return ShapedReply(_program(plan, code), shape="tidy")


def shape_debug(answer: Answer, shape: str) -> ShapedReply:
    """A debug answer in ``shape`` (``quoted_line``: the faulty line in its own python block,
    then the fixed program; ``think``: a reasoning block first)."""
    if shape == "quoted_line" and answer.quoted_line:
        text = (f"The error comes from this line:\n\n```python\n{answer.quoted_line}\n```\n\n"
                f"{answer.plan}\n\nHere is the fixed program:\n\n```python\n{answer.code.rstrip()}\n```\n")
        return ShapedReply(text, shape=shape)
    if shape == "think":
        return ShapedReply(THINK + _program(answer.plan, answer.code), shape=shape)
    return ShapedReply(_program(answer.plan, answer.code), shape="tidy")


def shape_tool(answer: Answer, shape: str, tools_usable: bool) -> ShapedReply:
    """A review (or another tool answer) in ``shape``. Without usable tools (none sent, or the
    server does not support them) a tool-call shape becomes ``json_fenced``."""
    args = dict(answer.arguments)
    name = answer.tool_name or "submit_review"
    if shape == "string_metric" and isinstance(args.get("metric"), (int, float)):
        args["metric"] = str(args["metric"])
    tool_shapes = ("tool_call", "tool_json_fenced", "string_metric")
    if shape in tool_shapes and not tools_usable:
        shape = "json_fenced" if shape != "string_metric" else "string_metric_text"
    text = json.dumps(args, indent=2)
    if shape in ("tool_call", "string_metric"):
        return ShapedReply(None, "tool_calls", tool_calls=[{"name": name, "arguments": json.dumps(args)}], shape=shape)
    if shape == "tool_json_fenced":
        return ShapedReply(None, "tool_calls", tool_calls=[{"name": name, "arguments": f"```json\n{text}\n```"}],
                           shape=shape)
    if shape == "json_bare":
        return ShapedReply(f"Here is my review of the run.\n\n{text}\n\nOverall the run looks as described.",
                           shape=shape)
    if shape == "think_json":
        return ShapedReply("<think>\nCheck the last line of the output for the metric.\n</think>\n\n"
                           f"```json\n{text}\n```\n", shape=shape)
    return ShapedReply(f"```json\n{text}\n```\n", shape=shape)
