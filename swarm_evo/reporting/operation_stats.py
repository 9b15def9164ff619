"""Where improvements come from (issue 17 item 2): per operation, how often a child beats the
node it was made from and by how much, which operations produced each new best, and the
operations on the path from a draft to the best node.

A view of the journal (SPEC §5), no Prefect: ``run_report.json``
(:func:`swarm_evo.reporting.run_report.build_run_report`), the final report
(:func:`swarm_evo.reporting.report.run_summary`) and the best-fitness chart
(:func:`swarm_evo.reporting.charts.best_fitness_chart`) share it.

**Fitness** is :func:`swarm_evo.population.ranking.fitness`: the node's hidden-split score in
a run that selects on its hidden split (``hidden_score``, issue 41), else its validation metric
(``metric_value``, parsed from the program's output, or the problem's score), negated when
lower is better — the value the search itself ranks by (``Journal.best_node``, the valid
pool, ``selection.tournament_select``, the gene pools). So every gain here is in the metric's
own units and positive means better, whatever the metric's direction.

**The rule** (one node, :func:`reference_parent`):

* Only *valid* nodes (:meth:`swarm_evo.population.journal.Journal.is_valid`: not buggy, not dead, a
  fitness, genes pass) have a fitness to compare; a buggy or dead child is not an
  improvement (its failure shows in the run report's ``buggy_rate`` / ``dead_rate``).
* The *reference parent* of a node is the node whose fitness it must beat, by its operation's
  ``report.reference`` (:mod:`swarm_evo.operators`):

  - ``none`` (``draft``): none — a draft is written from the task alone. Drafts are counted
    (``children``, ``valid``, ``new_best``) but never compared: their ``improvement_rate``
    and ``mean_gain`` are None.
  - ``gene_sources`` (``merge``): the best valid node among its gene sources
    (``metadata.gene_sources``, the node each locus came from; the primary parent
    ``parent_id`` is one of them). A merge improves only when it beats *every* node it took
    genes from.
  - ``parent`` (``mutate``, greedy's ``debug``): the node ``parent_id``.

  A reference parent that is not valid — a greedy ``debug`` node repairs a *buggy* leaf, a
  parent missing from the journal — gives no fitness to beat: that child is not compared
  (it is counted in ``children`` / ``valid`` but not in ``compared``). A debug node that
  fixes a buggy node is therefore not an "improvement"; whether it became the best shows in
  ``new_best``.
* ``improved``: compared child with ``child.printed_fitness > parent fitness`` (strictly; a tie is no
  improvement). ``gain`` = ``child.printed_fitness − parent fitness``.
"""

from __future__ import annotations

import statistics
from typing import Any

from swarm_evo.operators import registry
from swarm_evo.population import ranking
from swarm_evo.population.journal import Journal
from swarm_evo.population.node import Node

IMPROVEMENT_KEYS = ("children", "valid", "compared", "improved", "improvement_rate", "mean_gain", "new_best")
"""Keys of :func:`improvement_stats`, in display order."""

BASIS = ("fitness = the score the run selects on (the hidden-split score where the run has one, else the "
         "validation metric), direction-aware (gain > 0 is better, in the metric's units); "
         "parent = parent_id, for a merge the best valid gene source; drafts and children of a "
         "non-valid parent (e.g. a debug of a buggy node) are not compared")
"""One sentence for readers of ``run_report.json`` (key ``improvement_basis``)."""


def _valid_or_none(journal: Journal, node_id: str | None) -> Node | None:
    """The journal node ``node_id`` when it exists and is valid, else None."""
    if node_id is None:
        return None
    try:
        node = journal.get(node_id)
    except KeyError:
        return None
    return node if journal.is_valid(node) else None


def reference_parent(journal: Journal, node: Node) -> Node | None:
    """The valid node whose fitness ``node`` must beat (see the module's rule), or None: for a
    draft, and when the parent (every gene source, for a merge) is missing or not valid.
    Merge ties on fitness go to the earlier step."""
    reference = registry.report_style(node.operation).reference
    if reference == "none":
        return None
    if reference == "gene_sources":
        ids = list(dict.fromkeys([*node.gene_sources.values(), *([node.parent_id] if node.parent_id else [])]))
        sources = [n for n in (_valid_or_none(journal, i) for i in ids) if n is not None]
        return ranking.best(sources)
    return _valid_or_none(journal, node.parent_id)


def node_gain(journal: Journal, node: Node) -> float | None:
    """``node.printed_fitness − reference parent's fitness`` for a valid node with a reference parent,
    else None (a draft, a non-valid node, a non-valid parent). Positive = better."""
    parent = reference_parent(journal, node)
    if parent is None or not journal.is_valid(node):
        return None
    return ranking.gain(node, parent)


def new_best_nodes(journal: Journal) -> list[Node]:
    """The valid nodes that raised the best fitness so far, in step order: the first valid
    node, then every valid node whose fitness is strictly above every earlier valid node's
    (so the last one is :meth:`Journal.best_node`)."""
    return ranking.new_bests(journal.valid_pool())


def operations_of(journal: Journal) -> tuple[str, ...]:
    """The operations every table lists, used or not (:func:`swarm_evo.operators.registry.listed_operations`:
    draft, merge, mutate), then every other ``node.operation`` of the journal (greedy's ``debug``)
    in order of first appearance."""
    seen = dict.fromkeys(registry.listed_operations())
    for node in journal.nodes:
        seen.setdefault(node.operation)
    return tuple(seen)


def improvement_stats(journal: Journal, operation: str) -> dict[str, Any]:
    """Improvement numbers of one operation's nodes (the rule: module docstring).

    Returns ``{children, valid, compared, improved, improvement_rate, mean_gain, new_best}``:

    * ``children`` — nodes with ``node.operation == operation``;
    * ``valid`` — those in the valid pool;
    * ``compared`` — valid ones with a reference parent (0 for drafts);
    * ``improved`` — compared ones whose fitness is strictly above the reference parent's;
    * ``improvement_rate`` — ``improved / compared`` in [0, 1]; None when ``compared`` is 0
      (always for drafts);
    * ``mean_gain`` — mean of ``child.printed_fitness − parent fitness`` over the compared children, in
      the metric's units, positive = better whatever the direction (worse children pull it
      down); None when ``compared`` is 0;
    * ``new_best`` — this operation's nodes among :func:`new_best_nodes`.
    """
    nodes = [n for n in journal.nodes if n.operation == operation]
    valid = [n for n in nodes if journal.is_valid(n)]
    gains = [g for g in (node_gain(journal, n) for n in valid) if g is not None]
    improved = sum(1 for g in gains if g > 0)
    return {
        "children": len(nodes),
        "valid": len(valid),
        "compared": len(gains),
        "improved": improved,
        "improvement_rate": improved / len(gains) if gains else None,
        "mean_gain": statistics.fmean(gains) if gains else None,
        "new_best": sum(1 for n in new_best_nodes(journal) if n.operation == operation),
    }


def printed_gain(journal: Journal, node: Node) -> float | None:
    """For a node :func:`node_gain` compares: how much its *printed* metric beat the same
    reference parent's (direction-aware, the metric's units; positive = better), None when
    either has no printed metric or the node is not compared. In a run that selects on its
    hidden split the two gains can disagree (a merge worse on the hidden rows whose printed
    metric rose): the final report shows both (issue 54, item 1)."""
    parent = reference_parent(journal, node)
    if parent is None or not journal.is_valid(node) or node.printed_fitness is None or parent.printed_fitness is None:
        return None
    return node.printed_fitness - parent.printed_fitness


def printed_gains_by_operation(journal: Journal) -> dict[str, float | None]:
    """``{operation: mean printed_gain over its compared children}`` (None when none has one),
    for every operation of :func:`operations_of`."""
    out: dict[str, float | None] = {}
    for op in operations_of(journal):
        gains = [g for g in (printed_gain(journal, n) for n in journal.nodes if n.operation == op) if g is not None]
        out[op] = statistics.fmean(gains) if gains else None
    return out


def improvements_by_operation(journal: Journal) -> dict[str, dict[str, Any]]:
    """``{operation: improvement_stats(...)}`` for every operation of :func:`operations_of`."""
    return {op: improvement_stats(journal, op) for op in operations_of(journal)}


def best_lineage(journal: Journal) -> dict[str, Any] | None:
    """The path from a draft to the best node (:meth:`Journal.best_node`), following
    ``parent_id`` — the edge the evolution tree draws: for a merge its primary parent, the
    program the merge was written on; its other gene sources are listed in the entry.

    Returns None without a valid node, else::

        {"operations": ["draft", "mutate", "merge", ...],     # root first, best node last
         "nodes": [{"node_id", "step", "operation",
                    "score",         # ranking.score: what the run selects on
                    "metric",        # plain metric_value (printed)
                    "hidden_score",  # the hidden-split score, None without one
                    "gain",          # node_gain: over the reference parent, None if not compared
                    "gene_sources"}  # merges only: the distinct source node ids
                   , ...],
         "complete": bool}           # the path starts at a node without parent (a draft);
                                     # False when a parent is missing from the journal
    """
    best = journal.best_node()
    if best is None:
        return None
    path: list[Node] = [best]
    seen = {best.id}
    complete = True
    while path[-1].parent_id is not None:
        try:
            parent = journal.get(path[-1].parent_id)
        except KeyError:
            complete = False
            break
        if parent.id in seen:  # a journal never has cycles; do not loop if one does
            complete = False
            break
        seen.add(parent.id)
        path.append(parent)
    path.reverse()
    entries = []
    for node in path:
        entry: dict[str, Any] = {"node_id": node.id, "step": node.step, "operation": node.operation,
                                 "score": ranking.score(node), "metric": node.metric_value,
                                 "hidden_score": node.hidden_score, "gain": node_gain(journal, node)}
        if registry.report_style(node.operation).reference == "gene_sources":
            entry["gene_sources"] = list(dict.fromkeys(node.gene_sources.values()))
        entries.append(entry)
    return {"operations": [n.operation for n in path], "nodes": entries, "complete": complete}


def improvement_rows(improvements: dict[str, dict[str, Any]], digits: int = 4) -> list[dict[str, Any]]:
    """Table rows (Prefect table artifact): ``{"operation": op, **stats}`` per operation of
    ``improvements`` (:func:`improvements_by_operation`), floats rounded to ``digits``."""
    return [{"operation": op, **{k: round(v, digits) if isinstance(v, float) else v
                                 for k, v in ((k, stats.get(k)) for k in IMPROVEMENT_KEYS)}}
            for op, stats in improvements.items()]


def lineage_text(lineage: dict[str, Any] | None) -> str:
    """``draft (step 2) → mutate (step 7) → merge (step 9)``; ``—`` without a lineage; a
    leading ``… → `` when the path does not reach a node without parent."""
    if not lineage:
        return "—"
    text = " → ".join(f"{e['operation']} (step {e['step']})" for e in lineage["nodes"])
    return text if lineage.get("complete", True) else f"… → {text}"


def improvement_line(improvements: dict[str, dict[str, Any]], lineage: dict[str, Any] | None) -> str:
    """One line for the CLI: ``improved over parent: mutate 2/5 (mean gain +0.0123), merge 0/3
    (mean gain -0.004); best lineage: draft → mutate → mutate`` (operations never compared
    are left out)."""
    parts = [f"{op} {s['improved']}/{s['compared']} (mean gain {s['mean_gain']:+.4g})"
             for op, s in improvements.items() if s.get("compared")]
    ops = " → ".join(lineage["operations"]) if lineage else "—"
    return f"improved over parent: {', '.join(parts) or 'no child compared'}; best lineage: {ops}"
