"""Pheromone: node and gene desirability for merge gene selection (SPEC §8, seed 000 §7).

Formulas (SPEC §8, which fixes the upstream Swarm-Ev2 ``gene_registry`` / ``pheromone``):

* node pheromone
  ``0.5·norm + 0.3·success_ratio + 0.2·exp(−0.05·(current_step − node.step))`` where
  ``norm`` is the node's direction-aware fitness as a *mid-rank percentile* over the valid
  pool — (other pool nodes it beats + ½·those it ties) / other pool nodes, 0.5 when it has
  none or all tie — and ``success_ratio`` is alive children / children (0.5 with no
  children). SPEC §8 and upstream min–max normalise; issue 17 replaced that because one weak
  valid node squeezes every good node into ``norm`` ≈ 1 (circle packing, 30 steps, seed 0:
  drafts at 0.98–1.5 and the rest at 2.57–2.63 gave the five best nodes norms within 0.02,
  so recency and the success ratio decided and the run's best node was never a merge gene
  source in 8 merges). The rank keeps the weight of fitness (0.5) where SPEC §8 puts it. Children are the node's mutates and merges (``parent_id``) *and* merges whose
  ``metadata.gene_sources`` use the node (:meth:`Journal.children_of`); a child is alive when
  it is neither dead nor buggy.
* gene pheromone: mean node pheromone of the valid nodes that carry the gene (same
  :func:`~swarm_evo.population.genes.gene_id` at that locus) times
  ``exp(−0.03·(current_step − last_seen_step))``, ``last_seen_step`` = newest carrier's step.
* quality = ``0.3·gene_pheromone + 0.7·node_pheromone(source)``, where the source is the gene's
  best carrier (highest node pheromone; ties → better fitness → earlier step).

Upstream bugs this module avoids (each has a test in ``tests/test_pheromone.py``):

1. *Step read before assignment*: upstream computed recency from ``node.step`` before the
   journal had assigned it. Here only journal nodes are scored; a node whose ``step`` is None
   raises ``ValueError`` instead of being silently scored with a wrong age.
2. *Success counts never incremented*: upstream's per-node success/attempt counters stayed at
   their initial values. Here the success ratio is derived from the journal itself (children
   and their outcomes) each time, so there is no counter to forget.
3. *Metric direction ignored*: upstream normalised the raw metric, so for lower-is-better
   competitions the worst node got the most pheromone. Here the selection fitness (the printed metric negated when
   lower is better, or the hidden score: :func:`swarm_evo.population.ranking.fitness`) is ranked.
4. *Computed once at review time*: upstream stored a pheromone on the node when it was
   reviewed, so it never saw later children, later nodes or the passing of steps. Here nothing
   is cached on nodes (Node has no pheromone field); every selection recomputes from the
   journal at the current step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import fmean
from typing import Iterable, Sequence

from swarm_evo.population.genes import LOCI, gene_id
from swarm_evo.population import ranking
from swarm_evo.population.journal import Journal
from swarm_evo.population.node import Node

W_FITNESS = 0.5
"""Weight of the normalised fitness in node pheromone (SPEC §8)."""
W_SUCCESS = 0.3
"""Weight of the children success ratio in node pheromone (SPEC §8)."""
W_RECENCY = 0.2
"""Weight of the recency term in node pheromone (SPEC §8)."""
NODE_DECAY = 0.05
"""Recency decay rate per step of node pheromone: ``exp(−0.05·age)`` (SPEC §8)."""
GENE_DECAY = 0.03
"""Decay rate per step of gene pheromone since it was last seen: ``exp(−0.03·age)`` (SPEC §8)."""
Q_GENE = 0.3
"""Weight of gene pheromone in quality (SPEC §8)."""
Q_NODE = 0.7
"""Weight of the source node's pheromone in quality (SPEC §8)."""
NEUTRAL = ranking.NEUTRAL
"""Value of ``norm`` when the pool's fitness range is 0, and of ``success_ratio`` with no children."""


def _age(current_step: int, step: int | None, what: str) -> int:
    if step is None:
        raise ValueError(
            f"{what} has no step: pheromone is only defined for nodes appended to the journal"
        )
    return max(0, current_step - step)


def _is_alive(node: Node) -> bool:
    return not node.dead and not node.is_buggy


class _Context:
    """One snapshot of the journal: the valid pool's fitness range and every node's children."""

    def __init__(self, journal: Journal, current_step: int) -> None:
        self.journal = journal
        self.current_step = current_step
        self.nodes = journal.nodes
        self.pool = [n for n in self.nodes if journal.is_valid(n)]
        self.pool_ids = {n.id for n in self.pool}
        self.fits = sorted(f for f in (ranking.fitness(n) for n in self.pool) if f is not None)
        # children per node id: same relation as Journal.children_of, counted once per child
        self.children: dict[str, list[Node]] = {}
        for child in self.nodes:
            parents = set(child.gene_sources.values())
            if child.parent_id is not None:
                parents.add(child.parent_id)
            for pid in parents:
                self.children.setdefault(pid, []).append(child)

    def norm(self, node: Node) -> float:
        """Mid-rank percentile of the node's fitness among the *other* valid nodes (module
        docstring): 1 beats all, 0 beats none, ties count half; 0.5 with no other valid
        node; 0 without a fitness."""
        fit = ranking.fitness(node)
        if fit is None:
            return 0.0
        return ranking.mid_rank(fit, self.fits, includes_self=node.id in self.pool_ids)

    def success_ratio(self, node: Node) -> float:
        kids = self.children.get(node.id, [])
        if not kids:
            return NEUTRAL
        return sum(1 for k in kids if _is_alive(k)) / len(kids)

    def recency(self, node: Node) -> float:
        return math.exp(-NODE_DECAY * _age(self.current_step, node.step, f"node {node.id}"))

    def pheromone(self, node: Node) -> float:
        return (
            W_FITNESS * self.norm(node)
            + W_SUCCESS * self.success_ratio(node)
            + W_RECENCY * self.recency(node)
        )


def success_ratio(node: Node, journal: Journal) -> float:
    """Alive children / children of ``node`` in ``journal`` (0.5 with no children)."""
    return _Context(journal, 0).success_ratio(node)


def node_pheromone(node: Node, journal: Journal, current_step: int) -> float:
    """Node pheromone at ``current_step`` (SPEC §8), in [0, 1].

    ``0.5·norm + 0.3·success_ratio + 0.2·exp(−0.05·(current_step − node.step))``. ``norm`` is
    the direction-aware fitness's mid-rank percentile among the journal's other valid nodes
    (module docstring; 0.5 when there are none or all tie, 0 without a metric). The age is
    clamped at 0 when ``current_step`` is not after ``node.step``.

    Raises:
        ValueError: ``node.step`` is None (the node was never appended to a journal).
    """
    return _Context(journal, current_step).pheromone(node)


def node_pheromones(
    journal: Journal, current_step: int, nodes: Iterable[Node] | None = None
) -> dict[str, float]:
    """``{node_id: node_pheromone}`` for ``nodes`` (default: the valid pool), one journal pass."""
    ctx = _Context(journal, current_step)
    return {n.id: ctx.pheromone(n) for n in (ctx.pool if nodes is None else nodes)}


@dataclass(frozen=True)
class GeneCandidate:
    """One distinct gene at one locus, as the gene registry sees it at selection time.

    Attributes:
        locus: the locus name.
        gene_id: :func:`swarm_evo.population.genes.gene_id` of the gene text.
        code: the raw gene text as the source node carries it.
        source_node_id: the best carrier (highest node pheromone; ties → better fitness →
            earlier step).
        gene_pheromone: mean carrier pheromone × ``exp(−0.03·(current_step − last_seen_step))``.
        node_pheromone: the source node's pheromone.
        quality: ``0.3·gene_pheromone + 0.7·node_pheromone``.
        carrier_ids: ids of every valid node carrying the gene, in step order.
        last_seen_step: the newest carrier's step.
    """

    locus: str
    gene_id: str
    code: str
    source_node_id: str
    gene_pheromone: float
    node_pheromone: float
    quality: float
    carrier_ids: tuple[str, ...] = ()
    last_seen_step: int = 0


def gene_pheromone(carrier_pheromones: Sequence[float], last_seen_step: int, current_step: int) -> float:
    """Gene pheromone (SPEC §8): mean of the carriers' node pheromones × exp(−0.03·age)."""
    if not carrier_pheromones:
        return 0.0
    return fmean(carrier_pheromones) * math.exp(
        -GENE_DECAY * _age(current_step, last_seen_step, "gene")
    )


def quality(gene_ph: float, node_ph: float) -> float:
    """Quality of a gene candidate (SPEC §8): ``0.3·gene + 0.7·node``."""
    return Q_GENE * gene_ph + Q_NODE * node_ph


def build_gene_pools(
    journal: Journal, current_step: int, loci: Sequence[str] = LOCI, exclude_source: str | None = None
) -> dict[str, list[GeneCandidate]]:
    """The gene registry at ``current_step``: ``{locus: [GeneCandidate, ...]}``, best first.

    Built from the valid pool only, from scratch on every call (nothing is cached). Genes are
    grouped by gene_id per locus; each list is sorted by quality (descending), then the
    source's fitness (descending), the source's step, and gene_id, so the order is
    deterministic. A locus no valid node carries maps to an empty list.

    ``exclude_source``: the genes as *other* nodes offer them (the merge's degenerate check,
    seed 000 G: "the best gene from another node"): the source is the best carrier other
    than that node, and a gene only that node carries is left out. A gene the node shares
    with others stays (its gene pheromone still counts every carrier): it *is* available from
    another node, and dropping it — upstream's reading, whose registry keeps one source per
    gene — made every degenerate merge give up the genes the best nodes agree on (issue 17).
    """
    ctx = _Context(journal, current_step)
    ph = {n.id: ctx.pheromone(n) for n in ctx.pool}
    pools: dict[str, list[GeneCandidate]] = {}
    for locus in loci:
        groups: dict[str, list[Node]] = {}
        for n in ctx.pool:
            if locus in n.genes:
                groups.setdefault(gene_id(n.genes[locus]), []).append(n)
        cands: list[GeneCandidate] = []
        for gid, carriers in groups.items():
            offering = [c for c in carriers if c.id != exclude_source]
            if not offering:
                continue
            source = max(
                offering,
                key=lambda c: (ph[c.id], *ranking.rank_key(c)),
            )
            last_seen = max(c.step or 0 for c in carriers)
            g_ph = gene_pheromone([ph[c.id] for c in carriers], last_seen, current_step)
            cands.append(
                GeneCandidate(
                    locus=locus,
                    gene_id=gid,
                    code=source.genes[locus],
                    source_node_id=source.id,
                    gene_pheromone=g_ph,
                    node_pheromone=ph[source.id],
                    quality=quality(g_ph, ph[source.id]),
                    carrier_ids=tuple(c.id for c in carriers),
                    last_seen_step=last_seen,
                )
            )
        rank = {n.id: ranking.rank_key(n) for n in ctx.pool}  # (fitness, -step)
        cands.sort(
            key=lambda c: (-c.quality, -rank[c.source_node_id][0], -rank[c.source_node_id][1], c.gene_id)
        )
        pools[locus] = cands
    return pools
