"""The hidden score a prompt shows (issue 53, item 8): rounded to what the split can tell apart.

The host measures, once per split, the bootstrap standard error of the competition's grader on
the hidden rows (:func:`swarm_evo.competition.hidden_resolution.score_resolution`, the split's
``resolution``). Prompts show a node's hidden score rounded to :func:`display_step` of it, so a
model cannot flip chosen rows and read the change; the journal keeps the exact value
(``Node.hidden_score``) and every ranking uses it.

* :func:`display_step` — the largest 1, 2 or 5 × 10^k not above the resolution;
  :func:`shown_score` rounds a score to it (0.81234 with a resolution of 0.0123 → 0.81).
* :func:`shown_fields` — what a node's metadata keeps for the prompts (``hidden_shown``,
  ``hidden_step``); :func:`shown_hidden` reads it back, the exact score for a node that has
  none (a journal from before issue 53, or a split without a resolution).
"""

from __future__ import annotations

import math
from typing import Any


def display_step(resolution: float) -> float:
    """The largest 1, 2 or 5 × 10^k that is at most ``resolution`` (0.0123 → 0.01, 0.03 → 0.02)."""
    exponent = math.floor(math.log10(resolution))
    for mantissa in (5, 2, 1):
        step = mantissa * 10.0 ** exponent
        if step <= resolution * (1 + 1e-9):
            return float(f"{step:.12g}")
    return float(f"{10.0 ** exponent:.12g}")


def shown_score(value: float, resolution: float | None) -> float:
    """``value`` rounded to :func:`display_step` of ``resolution`` (the exact value without one)."""
    if resolution is None or not math.isfinite(value):
        return value
    step = display_step(resolution)
    decimals = max(0, -math.floor(math.log10(step)))
    return round(round(value / step) * step, decimals)


def shown_fields(score: float | None, resolution: float | None) -> dict[str, Any]:
    """A node's metadata for the prompts: ``{"hidden_shown": rounded score, "hidden_step": step}``,
    or ``{}`` without a score or a resolution."""
    if score is None or resolution is None:
        return {}
    return {"hidden_shown": shown_score(score, resolution), "hidden_step": display_step(resolution)}


def shown_hidden(node: Any) -> float | None:
    """The hidden score a prompt shows for ``node`` (a :class:`~swarm_evo.population.node.Node`):
    its ``metadata["hidden_shown"]``, else its exact ``hidden_score`` (None without one)."""
    if node.hidden_score is None:
        return None
    return node.metadata.get("hidden_shown", node.hidden_score)
