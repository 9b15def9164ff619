"""The evaluation agent's step: describe a program output for the LLM that writes the
dynamic ``auxiliary_metrics.py`` (seed 002 "Agent Prompt 的通用化", SPEC §11).

The prompt (``prompt_templates/auxiliary_metrics.j2``) gets the problem description and the
*structure* of one real program output (keys, types, shapes, a few example values), never the
whole output. The file the model writes is then tried on that output in the sandbox; a file
that fails is kept and reported, and every later evaluation reports its failure without ever
failing the primary evaluation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

EXAMPLE_ITEMS = 4
"""How many leading values of an array or list the description shows."""

EXAMPLE_CHARS = 200
"""Characters of a text value the description shows (longer texts end with "…"); the prompt
bounds the whole structure too (``limits.items``, issue 31)."""


def _example(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        flat = value.reshape(-1)[:EXAMPLE_ITEMS]
        return [round(float(v), 6) if np.issubdtype(value.dtype, np.floating) else v.item() for v in flat]
    if isinstance(value, (list, tuple)):
        return [_example(v) for v in list(value)[:EXAMPLE_ITEMS]]
    if isinstance(value, (np.floating, float)):
        return round(float(value), 6)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, dict):
        return {str(k): _example(v) for k, v in list(value.items())[:EXAMPLE_ITEMS]}
    if isinstance(value, str) and len(value) > EXAMPLE_CHARS:
        return value[: EXAMPLE_CHARS - 1] + "…"
    return value if isinstance(value, (int, str, bool)) or value is None else type(value).__name__


def describe_value(value: Any) -> dict[str, Any]:
    """``{"type", "shape", "dtype", "example"}`` of one value (shape/dtype None for non-arrays)."""
    if isinstance(value, np.ndarray):
        return {"type": "numpy.ndarray", "shape": list(value.shape), "dtype": str(value.dtype),
                "example": _example(value)}
    if isinstance(value, (list, tuple)):
        return {"type": type(value).__name__, "shape": [len(value)], "dtype": None, "example": _example(value)}
    return {"type": type(value).__name__, "shape": None, "dtype": None, "example": _example(value)}


def describe_output(output: Any) -> dict[str, dict[str, Any]]:
    """The structure of a program output as the auxiliary-metrics prompt shows it:
    ``{key: describe_value(value)}`` for a dict output, ``{"output": ...}`` otherwise, and
    ``{}`` for None (no output to describe)."""
    if output is None:
        return {}
    if isinstance(output, dict):
        return {str(k): describe_value(v) for k, v in output.items()}
    return {"output": describe_value(output)}
