"""Pheromone (SPEC §8): node pheromone, gene pools, and the upstream bugs that must not recur.

Formulas under test:
  node  = 0.5·norm + 0.3·success_ratio + 0.2·exp(−0.05·(current_step − node.step))
          norm = mid-rank percentile of the fitness among the other valid nodes (issue 17)
  gene  = mean(carrier node pheromone) · exp(−0.03·(current_step − last_seen_step))
  quality = 0.3·gene + 0.7·node(source)
"""

from __future__ import annotations

import math

import pytest

from swarm_evo.population import genes as G
from swarm_evo.population.journal import Journal
from swarm_evo.population.node import Node
from swarm_evo.search.pheromone import (
    GeneCandidate,
    build_gene_pools,
    node_pheromone,
    node_pheromones,
    success_ratio,
)

LOCI3 = ("DATA", "MODEL", "LOSS")


def program(tag: str, **overrides: str) -> str:
    """A 3-locus program whose genes are unique to ``tag`` unless overridden."""
    body = {l: f"{l.lower()}_{tag} = build_{l.lower()}(seed=1234)\n" for l in LOCI3}
    body.update(overrides)
    return "import numpy as np\n" + "".join(f"# [SECTION: {l}]\n{body[l]}" for l in LOCI3)


def node(tag="a", metric=0.5, lower_is_better=False, is_buggy=False, dead=False, **kw) -> Node:
    code = kw.pop("code", None) or program(tag, **kw.pop("genes", {}))
    return Node(
        operation=kw.pop("operation", "draft"),
        phase=kw.pop("phase", 1),
        code=code,
        genes=G.parse_genes(code),
        metric_value=None if is_buggy and metric == 0.5 else metric,
        lower_is_better=lower_is_better,
        is_buggy=is_buggy,
        dead=dead,
        **kw,
    )


def journal() -> Journal:
    return Journal(loci=LOCI3)


def recency(age: int) -> float:
    return math.exp(-0.05 * age)


def test_formula_by_hand():
    j = journal()
    a = j.append(node("a", metric=0.2))
    b = j.append(node("b", metric=0.6))
    c = j.append(node("c", metric=1.0))
    # a has 2 children: one alive mutate, one dead mutate
    j.append(node("m1", metric=0.3, operation="mutate", phase=2, parent_id=a.id))
    j.append(node("m2", is_buggy=True, dead=True, operation="mutate", phase=2, parent_id=a.id))
    step = 6
    # valid pool fitness: a 0.2, b 0.6, c 1.0, m1 0.3 -> a beats 0 of 3 others, b 2 (a, m1), c 3
    assert node_pheromone(a, j, step) == pytest.approx(0.5 * 0.0 + 0.3 * 0.5 + 0.2 * recency(5))
    assert node_pheromone(b, j, step) == pytest.approx(0.5 * 2 / 3 + 0.3 * 0.5 + 0.2 * recency(4))
    assert node_pheromone(c, j, step) == pytest.approx(0.5 * 1.0 + 0.3 * 0.5 + 0.2 * recency(3))
    # node_pheromones covers the valid pool with the same values
    ph = node_pheromones(j, step)
    assert set(ph) == {n.id for n in j.valid_pool()}
    assert ph[b.id] == pytest.approx(node_pheromone(b, j, step))


def test_zero_range_gives_neutral_norm():
    j = journal()
    a = j.append(node("a", metric=0.4))
    j.append(node("b", metric=0.4))
    assert node_pheromone(a, j, 3) == pytest.approx(0.5 * 0.5 + 0.3 * 0.5 + 0.2 * recency(2))


def test_norm_is_a_rank_so_one_weak_node_does_not_flatten_the_good_ones():
    """Issue 17: with min–max, one valid node far below the rest put every good node at
    norm ≈ 1, and recency picked the merge sources (circle packing: the run's best node was
    never a gene source). The rank keeps the fitness order worth its 0.5 weight."""
    j = journal()
    best = j.append(node("best", metric=2.6285))
    j.append(node("weak", metric=0.98))
    j.append(node("mid", metric=2.6138))
    newer = j.append(node("newer", metric=2.6273))
    # others of best: weak, mid, newer -> beats 3 of 3; newer beats weak and mid -> 2/3
    assert node_pheromone(best, j, 5) == pytest.approx(0.5 * 1.0 + 0.15 + 0.2 * recency(4))
    assert node_pheromone(newer, j, 5) == pytest.approx(0.5 * 2 / 3 + 0.15 + 0.2 * recency(1))
    # min–max gave newer a norm of 0.9993 and so the higher pheromone (recency 0.2 vs 0.15)
    assert node_pheromone(best, j, 5) > node_pheromone(newer, j, 5)
    # ties count half: two equal nodes among others
    j.append(node("twin", metric=2.6285))
    assert node_pheromone(best, j, 6) == pytest.approx(0.5 * 3.5 / 4 + 0.15 + 0.2 * recency(5))


# ---------------------------------------------------------------- upstream bug: direction
def test_lower_is_better_ranks_lower_metric_higher():
    j = journal()
    good = j.append(node("good", metric=0.10, lower_is_better=True))
    bad = j.append(node("bad", metric=0.90, lower_is_better=True))
    # same step age would favour `bad` (newer) if direction were ignored; check norm dominates
    assert node_pheromone(good, j, 3) > node_pheromone(bad, j, 3)
    assert node_pheromone(good, j, 3) == pytest.approx(0.5 * 1 + 0.15 + 0.2 * recency(2))
    assert node_pheromone(bad, j, 3) == pytest.approx(0.5 * 0 + 0.15 + 0.2 * recency(1))
    # and the mirror competition (higher is better) ranks the other way
    j2 = journal()
    hi = j2.append(node("hi", metric=0.90))
    lo = j2.append(node("lo", metric=0.10))
    assert node_pheromone(hi, j2, 3) > node_pheromone(lo, j2, 3)


# ---------------------------------------------------------------- upstream bug: success counts
def test_children_that_die_lower_pheromone():
    j = journal()
    doomed = j.append(node("d", metric=0.5))
    lucky = j.append(node("l", metric=0.5))
    for i in range(2):
        j.append(node(f"dd{i}", is_buggy=True, dead=True, operation="mutate", phase=2, parent_id=doomed.id))
        j.append(node(f"ll{i}", metric=0.5, operation="mutate", phase=2, parent_id=lucky.id))
    assert success_ratio(doomed, j) == 0.0
    assert success_ratio(lucky, j) == 1.0
    # lucky is one step newer; the gap is the success term, far beyond the recency difference
    assert node_pheromone(lucky, j, 10) - node_pheromone(doomed, j, 10) == pytest.approx(
        0.3 + 0.2 * (recency(8) - recency(9))
    )


def test_buggy_but_not_dead_child_is_not_alive():
    j = journal()
    p = j.append(node("p"))
    j.append(node("c", is_buggy=True, operation="mutate", phase=2, parent_id=p.id))
    assert success_ratio(p, j) == 0.0


def test_merges_using_genes_count_as_children_once():
    j = journal()
    a = j.append(node("a"))
    b = j.append(node("b"))
    assert success_ratio(b, j) == 0.5  # no children
    j.append(node("m", operation="merge", phase=2, parent_id=a.id,
                  metadata={"gene_sources": {"DATA": a.id, "MODEL": b.id, "LOSS": a.id}}))
    j.append(node("m2", is_buggy=True, dead=True, operation="merge", phase=2, parent_id=a.id,
                  metadata={"gene_sources": {"DATA": a.id, "MODEL": a.id, "LOSS": b.id}}))
    assert success_ratio(b, j) == 0.5  # 1 alive of 2 merges using b's genes
    assert success_ratio(a, j) == 0.5  # parent and gene source of the same merge: counted once


# ---------------------------------------------------------------- upstream bug: step before assignment
def test_unappended_node_is_refused():
    j = journal()
    j.append(node("a"))
    stray = node("b")
    assert stray.step is None
    with pytest.raises(ValueError, match="no step"):
        node_pheromone(stray, j, 5)
    j.append(stray)
    assert stray.step == 2
    node_pheromone(stray, j, 5)  # now fine


# ---------------------------------------------------------------- recency
def test_recency_decays_with_current_step():
    j = journal()
    a = j.append(node("a", metric=0.3))
    j.append(node("b", metric=0.7))
    values = [node_pheromone(a, j, s) for s in (2, 10, 50)]
    assert values[0] > values[1] > values[2]
    assert values[0] - values[2] == pytest.approx(0.2 * (recency(1) - recency(49)))


def test_newer_node_outranks_older_equal_node():
    j = journal()
    old = j.append(node("old", metric=0.5))
    new = j.append(node("new", metric=0.5))
    assert node_pheromone(new, j, 5) > node_pheromone(old, j, 5)


# ---------------------------------------------------------------- upstream bug: computed once
def test_values_change_as_journal_grows_and_nothing_is_cached():
    j = journal()
    a = j.append(node("a", metric=0.5))
    b = j.append(node("b", metric=0.8))
    first = node_pheromone(a, j, 3)
    j.append(node("kid", is_buggy=True, dead=True, operation="mutate", phase=2, parent_id=a.id))
    second = node_pheromone(a, j, 4)
    assert second < first
    j.append(node("better", metric=2.0))  # widens the fitness range: b's norm drops
    assert node_pheromone(b, j, 5) < node_pheromone(b, j, 4)
    assert not any("pheromone" in f for f in Node.model_fields)
    assert "pheromone" not in a.model_dump()


# ---------------------------------------------------------------- gene pools
def test_gene_pheromone_is_mean_of_carriers_with_decay():
    shared = "loss_fn = make_loss('huber', delta=1.0)\n"
    j = journal()
    a = j.append(node("a", metric=0.2, genes={"LOSS": shared}))
    b = j.append(node("b", metric=0.9))
    c = j.append(node("c", metric=0.6, genes={"LOSS": shared}))
    j.append(node("x", is_buggy=True, genes={"LOSS": shared}))  # invalid carrier: ignored
    step = 8
    ph = node_pheromones(j, step)
    pools = build_gene_pools(j, step, LOCI3)
    loss = {cand.gene_id: cand for cand in pools["LOSS"]}
    cand = loss[G.gene_id(shared)]
    assert isinstance(cand, GeneCandidate)
    assert cand.carrier_ids == (a.id, c.id)
    assert cand.last_seen_step == 3
    expected_gene = (ph[a.id] + ph[c.id]) / 2 * math.exp(-0.03 * (step - 3))
    assert cand.gene_pheromone == pytest.approx(expected_gene)
    # source = best carrier by node pheromone (c: higher fitness, newer)
    assert cand.source_node_id == c.id
    assert cand.node_pheromone == pytest.approx(ph[c.id])
    assert cand.quality == pytest.approx(0.3 * expected_gene + 0.7 * ph[c.id])
    assert cand.code == shared
    # b's own LOSS gene: single carrier
    b_cand = loss[G.gene_id(b.genes["LOSS"])]
    assert b_cand.gene_pheromone == pytest.approx(ph[b.id] * math.exp(-0.03 * (step - 2)))
    # only valid carriers: two distinct LOSS genes
    assert len(pools["LOSS"]) == 2


def test_gene_pheromone_decays_since_last_seen():
    j = journal()
    a = j.append(node("a", metric=0.5))
    j.append(node("b", metric=0.5))
    gid = G.gene_id(a.genes["MODEL"])

    def gene_ph(step):
        return next(c for c in build_gene_pools(j, step, LOCI3)["MODEL"] if c.gene_id == gid)

    early, late = gene_ph(3), gene_ph(30)
    assert late.gene_pheromone < early.gene_pheromone
    # a re-appearing carrier refreshes last_seen_step
    j.append(node("a2", metric=0.5, code=a.code))
    assert gene_ph(30).last_seen_step == 3


def test_pools_sorted_by_quality_and_source_fitness_breaks_ties():
    j = journal()
    for tag, m in (("a", 0.1), ("b", 0.9), ("c", 0.5)):
        j.append(node(tag, metric=m))
    pools = build_gene_pools(j, 4, LOCI3)
    for locus in LOCI3:
        qs = [c.quality for c in pools[locus]]
        assert qs == sorted(qs, reverse=True)
        assert pools[locus][0].source_node_id == j.nodes[1].id  # b, best fitness


def test_empty_pool_and_missing_locus():
    j = journal()
    j.append(node("a", is_buggy=True))
    assert build_gene_pools(j, 2, LOCI3) == {l: [] for l in LOCI3}
    j.append(node("b"))
    assert build_gene_pools(j, 3, ("DATA", "NOPE"))["NOPE"] == []
