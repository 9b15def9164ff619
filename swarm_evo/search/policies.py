"""Search policies for ablations (SPEC §12): what the next step of a ``greedy`` or ``random``
run does. Pure functions of the journal and a random generator; no Prefect, no I/O.

* ``two_phase`` (the default) is the search of SPEC §6 (``flows/phase1_draft.py``,
  ``flows/phase2_evolve.py``); nothing here.
* ``greedy`` is AIDE's tree search, ``Agent.search_policy`` of WecoAI/aideml
  (``aide/agent.py``; node properties ``is_leaf``, ``debug_depth`` and ``stage_name`` in
  ``aide/journal.py``), with AIDE's defaults ``num_drafts=5``, ``debug_prob=0.5``,
  ``max_debug_depth=3``. For each step, in order:

  1. fewer than ``num_drafts`` draft nodes in the journal → **draft** (the flow runs these
     initial drafts as whole draft epochs first, :func:`drafts_due`);
  2. with probability ``debug_prob`` (one ``rng.random()`` draw): if a *buggy leaf* exists →
     **debug** one chosen uniformly (``rng.choice`` over them in step order);
  3. no valid node → **draft**;
  4. otherwise → **improve** the best valid node (:meth:`Journal.best_node`: best
     direction-aware fitness, earliest on ties).

  A *buggy leaf* (:func:`debuggable_nodes`) is a node that is buggy (``is_buggy``; dead
  nodes included, as AIDE has no inner chain and debugs every buggy node), has code (a node
  whose generation failed has none to debug), has no child (:meth:`Journal.children_of`),
  is not already being debugged by a step in flight (``exclude``) and whose
  :func:`debug_depth` is below ``max_debug_depth``, so a chain of consecutive debug nodes
  is at most ``max_debug_depth`` long ("debug depth ≤ 3", issue 6). AIDE tests
  ``debug_depth <= max_debug_depth`` and so allows chains of ``max_debug_depth + 1``.
  "Valid" is the journal's valid pool (not buggy, not dead, a metric, genes pass
  ``validate_genes``), where AIDE's ``good_nodes`` are the non-buggy ones: improve renders
  mutate.j2, which needs the sections. The exclusion exists because up to
  ``parallel_workers`` steps decide at once (AIDE runs one step at a time).
* ``random`` drafts every step: the Phase 1 draft prompt (draft.j2 with its draft history)
  ``max_steps`` times, no node ever has a parent (a random-search baseline).

Drafts are phase-1 nodes of operation ``draft``; improves are phase-2 ``mutate`` nodes
(mutate.j2 on the chosen parent with a random non-stub target section, as in SPEC §6), and
debugs are phase-2 ``debug`` nodes (debug.j2 on the leaf's code and output), see
:func:`swarm_evo.step.operations.prepare_improve` and :func:`swarm_evo.step.operations.prepare_debug_node`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Collection, Literal

from swarm_evo.population.journal import Journal
from swarm_evo.population.node import Node

POLICIES: tuple[str, ...] = ("two_phase", "greedy", "random")
"""The values of ``search.policy`` (:data:`swarm_evo.config.SearchPolicy`)."""

GREEDY_NUM_DRAFTS = 5
"""AIDE ``agent.search.num_drafts``: drafts before the greedy search starts."""

GREEDY_DEBUG_PROB = 0.5
"""AIDE ``agent.search.debug_prob``: chance that a step debugs a buggy leaf."""

GREEDY_MAX_DEBUG_DEPTH = 3
"""AIDE ``agent.search.max_debug_depth``: longest chain of consecutive debug nodes."""

ActionKind = Literal["draft", "improve", "debug"]


@dataclass(frozen=True)
class Action:
    """What one step does: ``draft`` (no parent), ``improve`` or ``debug`` ``parent_id``.

    ``debug_depth`` is the new node's debug depth (1 + the parent's) for a debug, else 0.
    """

    kind: ActionKind
    parent_id: str | None = None
    debug_depth: int = 0


def draft_count(journal: Journal) -> int:
    """Draft nodes in the journal (AIDE ``Journal.draft_nodes``: nodes without a parent)."""
    return sum(1 for n in journal.nodes if n.operation == "draft")


def debug_depth(journal: Journal, node: Node) -> int:
    """AIDE ``Node.debug_depth``: 0 for a node that is not a debug node, else 1 + its parent's
    (the length of the chain of consecutive debug nodes ending at ``node``)."""
    depth = 0
    while node.operation == "debug" and node.parent_id is not None:
        depth += 1
        try:
            node = journal.get(node.parent_id)
        except KeyError:
            break
    return depth


def debuggable_nodes(
    journal: Journal, max_debug_depth: int = GREEDY_MAX_DEBUG_DEPTH, exclude: Collection[str] = ()
) -> list[Node]:
    """Buggy leaves in step order: buggy, with code, without children, not in ``exclude``
    (being debugged by a step in flight), debug depth below ``max_debug_depth``."""
    nodes = journal.nodes
    parents = {n.parent_id for n in nodes if n.parent_id}
    parents.update(src for n in nodes for src in n.gene_sources.values())
    return [
        n
        for n in nodes
        if n.is_buggy
        and n.code.strip()
        and n.id not in parents
        and n.id not in exclude
        and debug_depth(journal, n) < max_debug_depth
    ]


def greedy_action(
    journal: Journal,
    rng: random.Random,
    num_drafts: int = GREEDY_NUM_DRAFTS,
    debug_prob: float = GREEDY_DEBUG_PROB,
    max_debug_depth: int = GREEDY_MAX_DEBUG_DEPTH,
    *,
    exclude: Collection[str] = (),
) -> Action:
    """The greedy (AIDE) policy's next action; see the module docstring for the rules.

    Args:
        journal: the run's journal.
        rng: draws once (the debug coin) when the drafting stage is over, once more
            (``choice``) when it debugs, never while drafting.
        num_drafts, debug_prob, max_debug_depth: AIDE's ``agent.search`` settings.
        exclude: ids of buggy leaves that steps in flight are debugging already.
    """
    if draft_count(journal) < num_drafts:
        return Action("draft")
    if rng.random() < debug_prob:
        leaves = debuggable_nodes(journal, max_debug_depth, exclude)
        if leaves:
            leaf = rng.choice(leaves)
            return Action("debug", leaf.id, debug_depth(journal, leaf) + 1)
    best = journal.best_node()
    if best is None:
        return Action("draft")
    return Action("improve", best.id)


def drafts_due(journal: Journal, policy: str, remaining: int) -> int:
    """How many of the next ``remaining`` steps are drafts whatever happens: for ``random``
    all of them (drafts only, SPEC §12); for ``greedy`` the initial drafts still owed,
    ``min(remaining, num_drafts − drafts)`` (≥ 0). The flow runs these as whole epochs of
    draft steps before any greedy step, so a greedy journal opens with exactly
    ``num_drafts`` drafts however many steps run at once (AIDE drafts one at a time).

    Raises:
        ValueError: ``policy`` is not ``greedy`` or ``random`` (two_phase has its own flows).
    """
    remaining = max(0, remaining)
    if policy == "random":
        return remaining
    if policy == "greedy":
        return min(remaining, max(0, GREEDY_NUM_DRAFTS - draft_count(journal)))
    raise ValueError(f"no step policy for search policy {policy!r}; expected greedy or random")
