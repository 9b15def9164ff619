"""The ranking rule: how the search orders nodes, in one place (issue 41, item 0).

Every choice the search makes between nodes goes through here: the valid pool's fitness
(:meth:`Journal.is_valid`), the best node and the hand-in order (:class:`Journal`), tournament
parents and a merge's primary parent (:mod:`swarm_evo.search.selection`), gene sources and the
fitness percentile of node pheromone (:mod:`swarm_evo.search.pheromone`), the dispatcher's
node quality (:mod:`swarm_evo.learning.quality`), the run report's improvements and new bests
(:mod:`swarm_evo.reporting.operation_stats`), the best-so-far chart
(:mod:`swarm_evo.reporting.charts`) and the Phase 1 stop rule (the phase flows).

**Fitness** (:func:`fitness`): a number where higher is better, in the metric's own units:
the node's score negated when lower is better. The score is the host's grade of the run's
hidden split (``Node.hidden_score``, issue 41) when the node has one, else the metric the
program printed (``Node.metric_value``). A run with a hidden split gives every valid node a
hidden score, so within a run every node is ranked on the same basis. None when the node has
no score, when its hidden score is not finite, or when the host could not grade its hidden rows
(``metadata["hidden_error"]``, issue 53, item 10): such a node is never ranked on its printed
metric instead.

**The printed metric's gap** (:func:`printed_gap`, :func:`printed_misleads`): how far the
program's own validation metric overstates its hidden score, fed back in the prompts that
show the node and listed in the run report.

**Rank key** (:func:`rank_key`): ``(fitness, -step)``: better fitness first, the earlier step
on ties (a node without fitness ranks below every node with one). Seed 000 compared raw
``metric_value``; direction-aware since issue 5.

**Percentiles.** Two are used, each where SPEC puts it:

* :func:`at_or_below_share` — the dispatcher's node quality (SPEC §9, "percentile rank of its
  fitness among valid nodes"): ``#{pool fitness <= f}`` (the node itself counted) / pool size.
* :func:`mid_rank` — node pheromone's ``norm`` (issue 17): (others beaten + ½·others tied) /
  others, 0.5 with no other node.

**Phase 1 stop rule** (:func:`phase1_complete`, seed 000 decision A as issue 52 changed it):
no new draft starts once the valid pool holds ``search.phase1_target_nodes``; drafts still
running then go on and count (there is no epoch barrier to wait for).
"""

from __future__ import annotations

import bisect
import math
from typing import Iterable, Sequence

from swarm_evo.population.node import Node

NEUTRAL = 0.5
""":func:`mid_rank` of a node with no other node to compare with (or when all tie)."""
MISLEAD_SHARE = 0.05
""":func:`printed_misleads`: the printed metric overstates the hidden score by more than this
share of the larger of the two (in absolute value)."""


def fitness(node: Node) -> float | None:
    """The direction-aware fitness the search ranks ``node`` by (higher is better): the hidden
    score when the node has one, else the printed metric; None when the node has neither. See
    the module docstring."""
    if node.metadata.get("hidden_error"):  # the host could not grade its hidden rows: no score to rank
        return None
    hidden = node.hidden_fitness
    if hidden is not None:
        return hidden if math.isfinite(hidden) else None
    return node.printed_fitness


def printed_gap(node: Node) -> float | None:
    """``printed fitness − hidden fitness`` (direction-aware, the metric's units): positive when
    the program's own validation said better than the held-out rows; None without both."""
    if node.printed_fitness is None or node.hidden_fitness is None:
        return None
    return node.printed_fitness - node.hidden_fitness


def printed_misleads(node: Node) -> bool:
    """The printed metric overstates the hidden score by more than :data:`MISLEAD_SHARE` of the
    larger of the two: the program's validation leaks or its metric is wrong."""
    gap = printed_gap(node)
    if gap is None:
        return False
    return gap > MISLEAD_SHARE * max(abs(node.metric_value), abs(node.hidden_score), 1e-12)  # type: ignore[arg-type]


def score(node: Node) -> float | None:
    """:func:`fitness` in the metric's own direction and units (what charts and tables show)."""
    value = fitness(node)
    return None if value is None else to_metric(value, node.lower_is_better)


def to_metric(value: float, lower_is_better: bool) -> float:
    """A fitness back in the metric's own direction (negated again when lower is better)."""
    return -value if lower_is_better else value


def rank_key(node: Node) -> tuple[float, int]:
    """``(fitness, -step)``: sort descending (or take ``max``) for best first, earliest on ties;
    a node without fitness gets ``-inf``."""
    value = fitness(node)
    return (value if value is not None else -math.inf, -(node.step or 0))


def best(nodes: Iterable[Node]) -> Node | None:
    """The node of ``nodes`` with the highest :func:`rank_key`, or None when there is none."""
    return max(nodes, key=rank_key, default=None)


def ranked(nodes: Iterable[Node]) -> list[Node]:
    """``nodes`` best first (:func:`rank_key`, descending)."""
    return sorted(nodes, key=rank_key, reverse=True)


def gain(child: Node, parent: Node) -> float:
    """``fitness(child) − fitness(parent)``: positive = better, in the metric's units.

    Raises:
        TypeError: either node has no fitness.
    """
    return fitness(child) - fitness(parent)  # type: ignore[operator]


def new_bests(nodes: Iterable[Node]) -> list[Node]:
    """The nodes of ``nodes`` (valid ones, in step order) that raised the best fitness so far:
    the first, then every node strictly above every earlier one (ties do not count)."""
    top: float | None = None
    out: list[Node] = []
    for node in nodes:
        value = fitness(node)
        if value is not None and (top is None or value > top):
            top = value
            out.append(node)
    return out


def best_so_far(nodes: Sequence[Node], valid: Sequence[bool]) -> list[tuple[int, float | None]]:
    """``(step, best fitness among the valid nodes up to that step)`` for each of ``nodes`` (step
    order; ``valid[i]`` says whether ``nodes[i]`` is in the valid pool); None before the first
    valid node. A node without a step gets its 1-based position."""
    top: float | None = None
    out: list[tuple[int, float | None]] = []
    for i, (node, ok) in enumerate(zip(nodes, valid), start=1):
        value = fitness(node)
        if ok and value is not None and (top is None or value > top):
            top = value
        out.append((node.step or i, top))
    return out


def at_or_below_share(value: float, others: Iterable[float]) -> float:
    """``(1 + #{others <= value}) / (#others + 1)``: the share of a pool (``others`` plus the node
    itself) at or below ``value``, in (0, 1]; 1.0 for the best or a lone node (SPEC §9)."""
    rest = list(others)
    return (1 + sum(1 for f in rest if f <= value)) / (len(rest) + 1)


def mid_rank(value: float, pool: Sequence[float], includes_self: bool) -> float:
    """Mid-rank percentile of ``value`` among the *other* values of ``pool`` (sorted ascending;
    ``includes_self``: ``value`` is one of them, the node's own): (below + ½·equal) / others,
    :data:`NEUTRAL` with no other value."""
    below = bisect.bisect_left(pool, value)
    equal = bisect.bisect_right(pool, value) - below
    if includes_self:
        equal -= 1
    others = len(pool) - (1 if includes_self else 0)
    if others <= 0:
        return NEUTRAL
    return (below + 0.5 * equal) / others


def phase1_complete(valid_nodes: int, target: int) -> bool:
    """The Phase 1 stop rule (seed 000 decision A): the valid pool holds at least ``target``
    (``search.phase1_target_nodes``) nodes. Checked before every draft starts (issue 52)."""
    return valid_nodes >= target
