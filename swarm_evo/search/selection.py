"""Selection for phase 2: gene plans for merges, tournament parents and targets for mutates.

SPEC §6 and seed 000 decisions G, H, L, M:

* merge (G, L): per locus the top-1 gene by quality (:mod:`swarm_evo.search.pheromone`) over all
  valid nodes; *degenerate check*: when every locus comes from one node, each locus is replaced
  by the best gene from another node where one exists (kept where none exists) — a gene that
  another valid node carries counts, even when the registry names the dominant node as its
  source (issue 17); *novelty guard*
  (SPEC addition): when the plan's key (gene ids in loci order) was merged before, the locus
  with the smallest quality margin (current choice − runner-up) is swapped for its runner-up,
  then the next smallest, never undoing a swap, until the plan is new or no swap is left. The
  primary parent contributes most loci; ties → better direction-aware fitness → earlier step
  (the seed compared raw ``metric_value``, wrong for lower-is-better competitions).
* mutate (H, M): parent by tournament (k=3) over the whole valid pool, best by fitness; target
  locus at random among the parent's non-stub genes (a stub has < 20 code characters once
  comments and whitespace are removed, :func:`swarm_evo.population.genes.is_stub`).
* ``draft_history``: seed 000 ``build_draft_history`` for the draft prompt.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from swarm_evo.population.hidden_display import shown_hidden
from swarm_evo.population.genes import DEFAULT_STUB_THRESHOLD, LOCI, gene_id, non_stub_loci
from swarm_evo.population import ranking
from swarm_evo.population.journal import Journal
from swarm_evo.population.node import Node
from swarm_evo.search.pheromone import GeneCandidate, build_gene_pools


@dataclass
class GenePlan:
    """A merge's gene plan: ``{locus: GeneCandidate}`` plus which selection rules fired.

    Attributes:
        genes: the chosen gene per locus (a locus no valid node carries is absent).
        loci: the loci order used by :meth:`key`.
        degenerate_replaced: loci replaced by the degenerate check, in loci order.
        dominant_node_id: the node all top-1 genes came from when the degenerate check fired.
        degenerate_restored: the locus given back to the dominant node so the plan is not a
            copy of one other node (see :func:`select_gene_plan`), or None.
        novelty_swaps: ``[{locus, from_gene_id, to_gene_id, margin}]`` in swap order.
        novelty_exhausted: the plan is still a repeat after every possible swap.
    """

    genes: dict[str, GeneCandidate]
    loci: tuple[str, ...] = LOCI
    degenerate_replaced: list[str] = field(default_factory=list)
    dominant_node_id: str | None = None
    degenerate_restored: str | None = None
    novelty_swaps: list[dict[str, Any]] = field(default_factory=list)
    novelty_exhausted: bool = False

    def __getitem__(self, locus: str) -> GeneCandidate:
        return self.genes[locus]

    def sources(self) -> dict[str, str]:
        """``{locus: source node id}``, for ``node.metadata["gene_sources"]`` (decision L)."""
        return {locus: self.genes[locus].source_node_id for locus in self.loci if locus in self.genes}

    def key(self) -> tuple[str | None, ...]:
        """The plan's identity: gene ids in loci order (None for an absent locus)."""
        return tuple(self.genes[l].gene_id if l in self.genes else None for l in self.loci)

    def to_context(self) -> dict[str, dict[str, str]]:
        """``{locus: {source_node_id, code}}``, the merge prompt's gene plan (docs/CONTRACTS.md)."""
        return {
            locus: {"source_node_id": c.source_node_id, "code": c.code}
            for locus, c in self.genes.items()
        }

    def metadata(self) -> dict[str, Any]:
        """JSON summary for ``node.metadata["gene_plan"]``; :func:`previous_plan_keys` reads ``key``."""
        return {
            "key": list(self.key()),
            "genes": {
                locus: {
                    "gene_id": c.gene_id,
                    "source_node_id": c.source_node_id,
                    "quality": round(c.quality, 6),
                    "gene_pheromone": round(c.gene_pheromone, 6),
                    "node_pheromone": round(c.node_pheromone, 6),
                }
                for locus, c in self.genes.items()
            },
            "degenerate_replaced": list(self.degenerate_replaced),
            "dominant_node_id": self.dominant_node_id,
            "degenerate_restored": self.degenerate_restored,
            "novelty_swaps": [dict(s) for s in self.novelty_swaps],
            "novelty_exhausted": self.novelty_exhausted,
        }


def previous_plan_keys(journal: Journal, loci: Sequence[str] = LOCI) -> set[tuple[str | None, ...]]:
    """Keys of the gene plans of every merge node in the journal (for the novelty guard).

    Reads ``metadata["gene_plan"]["key"]`` when present (stored by :meth:`GenePlan.metadata`);
    otherwise derives the key from ``metadata["gene_sources"]``: the gene id each source node
    carries at the locus (nodes never change after append, so this is the planned gene).
    """
    keys: set[tuple[str | None, ...]] = set()
    for n in journal.nodes:
        if n.operation != "merge":
            continue
        gp = n.metadata.get("gene_plan")
        stored = gp.get("key") if isinstance(gp, dict) else None
        if stored is not None and len(stored) == len(loci):
            keys.add(tuple(stored))
            continue
        sources = n.gene_sources
        if not sources:
            continue
        key: list[str | None] = []
        for locus in loci:
            sid = sources.get(locus)
            try:
                src = journal.get(sid) if sid is not None else None
            except KeyError:
                src = None
            key.append(gene_id(src.genes[locus]) if src is not None and locus in src.genes else None)
        keys.add(tuple(key))
    return keys


def genome_keys(journal: Journal, loci: Sequence[str] = LOCI) -> set[tuple[str | None, ...]]:
    """The genome of every node in the journal as a plan key (gene ids in loci order, None for
    an absent locus), for the novelty guard: a merge plan equal to an existing node's genome
    would rebuild that node (e.g. a mutate child plus its parent's original gene is the
    parent; seen in a 30-step run, issue 16), so it counts as already tried."""
    return {tuple(gene_id(n.genes[l]) if l in n.genes else None for l in loci) for n in journal.nodes if n.genes}


def _is_degenerate(genes: dict[str, GeneCandidate]) -> bool:
    return len(genes) > 1 and len({c.source_node_id for c in genes.values()}) == 1


def select_gene_plan(
    journal: Journal,
    current_step: int,
    previous_plans: Iterable[tuple] = (),
    loci: Sequence[str] = LOCI,
    mix_after_degenerate: bool = True,
) -> GenePlan | None:
    """The merge gene plan at ``current_step`` (decision G + novelty guard), or None.

    None when the valid pool has fewer than 2 nodes (the caller mutates instead, SPEC §6).

    1. Top-1 gene by quality per locus over the whole valid pool.
    2. Degenerate check: when all loci come from one node, each locus takes the best gene from
       another node where one exists (recorded in ``degenerate_replaced``). A gene counts as
       "from another node" when another valid node *carries* it, whichever carrier the
       registry names as its source (``build_gene_pools(exclude_source=...)``): a gene the
       dominant node shares stays, sourced from its best other carrier (issue 17: keying
       on the registry's one source dropped every shared gene, so in a 30-step a280 run no
       degenerate merge kept more than one of the best node's 3 genes and six of eight took
       a perturbation 0.06 worse than the one five nodes shared).
       With ``mix_after_degenerate`` (an addition to seed 000): when the replacements all
       come from one other node — the plan would copy that node, which is what happens
       whenever the nodes share no genes — the replaced locus where the dominant node's gene
       leads by most quality goes back to the dominant node (``degenerate_restored``), so the
       merge combines two nodes.
    3. Novelty guard: while ``plan.key()`` is in ``previous_plans``, swap the not yet swapped
       locus with the smallest margin (current choice's quality − runner-up's) for its
       runner-up; ties → loci order. At a degenerate-replaced locus the runner-up is the next
       gene not from the dominant node, and a swap that would make every locus come from one
       node again is skipped. If the plan is still a repeat, one degenerate-replaced locus goes
       back to the dominant node's gene when that makes it new (issue 16: a replacement can
       rebuild another node exactly). When no swap is left the (still repeated) plan is
       returned with ``novelty_exhausted = True``.
    """
    loci = tuple(loci)
    if len(journal.valid_pool()) < 2:
        return None
    pools = build_gene_pools(journal, current_step, loci)
    # eligible candidates per locus; the current choice is always eligible[locus][0]
    eligible: dict[str, list[GeneCandidate]] = {l: list(pools[l]) for l in loci if pools[l]}
    plan = GenePlan(genes={l: c[0] for l, c in eligible.items()}, loci=loci)

    if _is_degenerate(plan.genes):
        dominant = next(iter(plan.genes.values())).source_node_id
        plan.dominant_node_id = dominant
        alternatives = build_gene_pools(journal, current_step, loci, exclude_source=dominant)
        for locus in loci:
            if locus not in eligible:
                continue
            others = alternatives[locus]
            if others:
                eligible[locus] = others
                plan.genes[locus] = others[0]
                plan.degenerate_replaced.append(locus)
        if mix_after_degenerate and _is_degenerate(plan.genes) and plan.degenerate_replaced:
            # every replacement came from one other node: the plan is a copy of that node.
            # Give back to the dominant node the locus where its gene leads most.
            gain = {l: pools[l][0].quality - plan.genes[l].quality for l in plan.degenerate_replaced}
            locus = max(plan.degenerate_replaced, key=lambda l: (gain[l], -loci.index(l)))
            plan.genes[locus] = pools[locus][0]
            eligible[locus] = list(pools[locus])
            plan.degenerate_replaced.remove(locus)
            plan.degenerate_restored = locus

    seen = {tuple(p) for p in previous_plans}
    if plan.key() in seen:
        swappable = [
            (eligible[l][0].quality - eligible[l][1].quality, i, l)
            for i, l in enumerate(loci)
            if l in eligible and len(eligible[l]) > 1
        ]
        for margin, _, locus in sorted(swappable):
            runner_up = eligible[locus][1]
            trial = dict(plan.genes)
            trial[locus] = runner_up
            if _is_degenerate(trial) and not _is_degenerate(plan.genes):
                continue
            plan.novelty_swaps.append(
                {
                    "locus": locus,
                    "from_gene_id": plan.genes[locus].gene_id,
                    "to_gene_id": runner_up.gene_id,
                    "margin": round(margin, 6),
                }
            )
            plan.genes = trial
            if plan.key() not in seen:
                break
        if plan.key() in seen:
            # A degenerate-replaced locus has no runner-up outside the dominant node, and its
            # replacement can rebuild the other node exactly (issue 16): give one such locus
            # back to the dominant node's gene when that makes the plan new.
            for locus in list(plan.degenerate_replaced):
                trial = dict(plan.genes)
                trial[locus] = pools[locus][0]
                if _is_degenerate(trial) or tuple(trial[l].gene_id if l in trial else None for l in loci) in seen:
                    continue
                plan.novelty_swaps.append({"locus": locus, "from_gene_id": plan.genes[locus].gene_id,
                                           "to_gene_id": trial[locus].gene_id, "margin": None})
                plan.genes = trial
                plan.degenerate_replaced.remove(locus)
                break
        plan.novelty_exhausted = plan.key() in seen
    return plan


def primary_parent(plan: GenePlan, journal: Journal) -> Node:
    """The node contributing most loci to ``plan``; ties → better fitness → earlier step.

    Raises:
        ValueError: the plan has no genes.
    """
    counts = Counter(plan.sources().values())
    if not counts:
        raise ValueError("gene plan is empty")
    nodes = [journal.get(nid) for nid in counts]
    return max(nodes, key=lambda n: (counts[n.id], *ranking.rank_key(n)))


def tournament_select(pool: Sequence[Node], k: int, rng: random.Random) -> Node:
    """Tournament (decision H/M): sample ``min(k, len(pool))`` nodes without replacement from the
    whole pool and return the one with the best direction-aware fitness (ties → earlier step).

    Raises:
        ValueError: the pool is empty or ``k < 1``.
    """
    if not pool:
        raise ValueError("tournament on an empty pool")
    if k < 1:
        raise ValueError(f"tournament size must be >= 1, got {k}")
    contestants = rng.sample(list(pool), min(k, len(pool)))
    return ranking.best(contestants)


def select_mutation_target(
    node: Node,
    rng: random.Random,
    loci: Sequence[str] = LOCI,
    stub_threshold: int = DEFAULT_STUB_THRESHOLD,
) -> str:
    """The locus to mutate: random among the node's non-stub genes, else random among ``loci``."""
    candidates = non_stub_loci(node.genes, loci, stub_threshold)
    return rng.choice(candidates if candidates else list(loci))


def choose_phase2_operation(
    journal: Journal, rng: random.Random, shares: float | Mapping[str, float] = 0.5
) -> str:
    """The Phase 2 operation (SPEC §6 C): each operation of ``shares`` with its probability, in
    its order (``{"merge": 0.5}``: a merge with probability 0.5; a float is merge's share), else
    ``mutate``; ``mutate`` when < 2 valid nodes. The shares come from the search configuration's
    ``<operation>_probability`` keys (:func:`swarm_evo.step.operations.phase2_shares`), so a new
    Phase 2 operation is chosen here without a change.

    One ``rng.random()`` is drawn on every call, so the random stream does not depend on the
    pool size.
    """
    draw = rng.random()
    if len(journal.valid_pool()) < 2:
        return "mutate"
    edge = 0.0
    for operation, share in ({"merge": shares} if isinstance(shares, (int, float)) else shares).items():
        edge += share
        if draw < edge:
            return operation
    return "mutate"


def draft_history(journal: Journal, include_failed: bool = False) -> list[dict[str, Any]]:
    """``[{step, approach_tag, metric, approach}]`` of earlier nodes, for the draft prompt; in a
    run with a hidden split a valid node also has ``held_out`` (its hidden score as prompts show
    it, rounded to what the split can tell apart: :func:`swarm_evo.population.hidden_display.shown_hidden`,
    issue 53 item 8) and ``leaks`` (:func:`swarm_evo.population.ranking.printed_misleads`).

    Seed 000 ``build_draft_history``; ``metric`` is None for a buggy or dead node (the draft
    prompt shows it as "failed"). ``approach`` is what the prompt shows: the approach tag, or,
    when the tag is missing or ``"unknown"`` (a review that could not be parsed), the plan's
    first sentence (:func:`swarm_evo.learning.evolution_log.node_summary`, ≤ 160 characters).

    By default (the offline model's context) only non-dead nodes with an approach tag are
    listed. With ``include_failed`` (the prompt; issue 13: "failed" must appear) dead nodes
    are listed too, and nodes without a tag are listed by their plan; nodes with neither a
    tag nor a plan (a generation that failed before any program) are left out.
    """
    from swarm_evo.learning.evolution_log import node_summary

    out: list[dict[str, Any]] = []
    for n in journal.nodes:
        tag = (n.approach_tag or "").strip()
        if not include_failed:
            if not tag or n.dead:
                continue
        approach = node_summary(n).rstrip(". ")
        if include_failed and not approach:
            continue
        item = {
            "step": n.step,
            "approach_tag": n.approach_tag,
            "metric": None if (n.is_buggy or n.dead) else n.metric_value,
            "approach": approach or tag,
        }
        if n.hidden_score is not None and not (n.is_buggy or n.dead):  # issue 41: the host's score beside it
            item.update(held_out=shown_hidden(n), leaks=ranking.printed_misleads(n))
        out.append(item)
    return out
