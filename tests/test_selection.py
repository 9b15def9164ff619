"""Selection (SPEC §6, seed 000 decisions G, H, L, M): gene plans, primary parent,
tournament, mutation target, phase-2 operation choice, draft history."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from factories import make_node

from swarm_evo.population import genes as G
from swarm_evo.population.journal import Journal
from swarm_evo.population.node import Node
from swarm_evo.search.pheromone import GeneCandidate, build_gene_pools
from swarm_evo.search.selection import (
    GenePlan,
    choose_phase2_operation,
    draft_history,
    previous_plan_keys,
    primary_parent,
    select_gene_plan,
    select_mutation_target,
    tournament_select,
)

LOCI3 = ("DATA", "MODEL", "LOSS")
STUB = "# Not applicable — handled by the model.\n"


def program(tag: str, loci=LOCI3, **overrides: str) -> str:
    body = {l: f"{l.lower()}_{tag} = build_{l.lower()}(seed=1234)\n" for l in loci}
    body.update(overrides)
    return "import numpy as np\n" + "".join(f"# [SECTION: {l}]\n{body[l]}" for l in loci)


def node(tag="a", metric=0.5, lower_is_better=False, is_buggy=False, dead=False, loci=LOCI3, **kw) -> Node:
    code = program(tag, loci, **kw.pop("genes", {}))
    return make_node(metric, lower_is_better, is_buggy, dead, code=code, **kw)


def journal(*specs) -> Journal:
    j = Journal(loci=LOCI3)
    for tag, metric, extra in specs:
        j.append(node(tag, metric, **extra))
    return j


def cand(locus, nid, q=0.5) -> GeneCandidate:
    return GeneCandidate(locus=locus, gene_id=f"{locus}-{nid}"[:12], code="x", source_node_id=nid,
                         gene_pheromone=q, node_pheromone=q, quality=q)


# ---------------------------------------------------------------- gene plan
def test_no_plan_with_fewer_than_two_valid_nodes():
    j = journal(("a", 0.5, {}), ("b", None, {"is_buggy": True}), ("c", 0.5, {"dead": True}))
    assert select_gene_plan(j, 4, loci=LOCI3) is None


def test_degenerate_plan_is_replaced_from_other_nodes():
    j = journal(("a", 0.9, {}), ("b", 0.5, {}), ("c", 0.1, {}))
    a, b, c = j.nodes
    pools = build_gene_pools(j, 4, LOCI3)
    assert {pools[l][0].source_node_id for l in LOCI3} == {a.id}  # top-1 all from a
    plan = select_gene_plan(j, 4, loci=LOCI3, mix_after_degenerate=False)
    assert plan.dominant_node_id == a.id
    assert plan.degenerate_replaced == list(LOCI3)
    assert plan.sources() == {l: b.id for l in LOCI3}  # best gene from another node


def test_degenerate_replacement_that_copies_one_node_gives_one_locus_back():
    j = journal(("a", 0.9, {}), ("b", 0.5, {}), ("c", 0.1, {}))
    a, b, _ = j.nodes
    plan = select_gene_plan(j, 4, loci=LOCI3)
    assert plan.degenerate_restored in LOCI3
    assert Counter(plan.sources().values()) == Counter({b.id: 2, a.id: 1})
    assert plan.sources()[plan.degenerate_restored] == a.id
    assert primary_parent(plan, j) is b


def test_degenerate_check_keeps_a_gene_another_node_carries():
    """Seed 000 G replaces each locus of a degenerate plan with "the best gene from another
    node". A gene the dominant node shares *is* available from another node: it stays,
    sourced from that carrier (issue 17). Keyed on the registry's single source (the best
    carrier, here the dominant), the shared LOSS was dropped for c's worse one."""
    shared = "loss = HuberLoss(delta=1.0, reduction='mean')\n"
    j = journal(("a", 0.9, {"genes": {"LOSS": shared}}), ("b", 0.5, {"genes": {"LOSS": shared}}),
                ("c", 0.1, {}))
    a, b, c = j.nodes
    assert build_gene_pools(j, 4, LOCI3)["LOSS"][0].source_node_id == a.id
    plan = select_gene_plan(j, 4, loci=LOCI3, mix_after_degenerate=False)
    assert plan.dominant_node_id == a.id
    assert plan.degenerate_replaced == list(LOCI3)
    assert plan["LOSS"].gene_id == G.gene_id(shared)
    assert plan.sources() == {"DATA": b.id, "MODEL": b.id, "LOSS": b.id}
    # with the default mixing the copy of b gives the locus a leads most back to a
    mixed = select_gene_plan(j, 4, loci=LOCI3)
    assert mixed.degenerate_restored == "DATA"
    assert mixed.sources() == {"DATA": a.id, "MODEL": b.id, "LOSS": b.id}
    assert mixed["LOSS"].gene_id == G.gene_id(shared)


def _margins(plan: GenePlan, j: Journal, step: int) -> dict[str, float]:
    """Quality margin (choice − runner-up) per swappable locus, as SPEC §6 defines it."""
    pools = build_gene_pools(j, step, LOCI3)
    out = {}
    for l in LOCI3:
        elig = pools[l]
        if l in plan.degenerate_replaced:
            elig = build_gene_pools(j, step, LOCI3, exclude_source=plan.dominant_node_id)[l]
        if len(elig) > 1:
            out[l] = elig[0].quality - elig[1].quality
    return out


def _novelty_journal() -> Journal:
    shared_model = "model = Ridge(alpha=3.0, fit_intercept=True)\n"
    return journal(
        ("a", 0.9, {}),
        ("b", 0.6, {}),
        ("c", 0.4, {"genes": {"MODEL": shared_model}}),
        ("d", 0.1, {"genes": {"MODEL": shared_model}}),
    )


def test_novelty_guard_swaps_smallest_margin_locus():
    j = _novelty_journal()
    first = select_gene_plan(j, 5, loci=LOCI3, mix_after_degenerate=False)
    assert first.novelty_swaps == []
    again = select_gene_plan(j, 5, loci=LOCI3, mix_after_degenerate=False)
    assert again.key() == first.key()  # deterministic
    second = select_gene_plan(j, 5, [first.key()], loci=LOCI3, mix_after_degenerate=False)
    assert second.key() != first.key()
    margins = _margins(first, j, 5)
    smallest = min(margins, key=lambda l: (margins[l], LOCI3.index(l)))
    changed = [l for i, l in enumerate(LOCI3) if first.key()[i] != second.key()[i]]
    assert changed == [smallest]
    assert second.novelty_swaps == [
        {"locus": smallest, "from_gene_id": first[smallest].gene_id,
         "to_gene_id": second[smallest].gene_id, "margin": pytest.approx(margins[smallest], abs=1e-6)}
    ]
    assert not second.novelty_exhausted


def test_novelty_guard_keeps_swapping_then_exhausts_gracefully():
    j = _novelty_journal()
    p1 = select_gene_plan(j, 5, loci=LOCI3, mix_after_degenerate=False)
    p2 = select_gene_plan(j, 5, [p1.key()], loci=LOCI3, mix_after_degenerate=False)
    p3 = select_gene_plan(j, 5, [p1.key(), p2.key()], loci=LOCI3, mix_after_degenerate=False)
    assert p3.key() not in {p1.key(), p2.key()}
    assert len(p3.novelty_swaps) == 2
    # the first swap is kept (never undone), the second adds the next-smallest margin locus
    assert p3.novelty_swaps[0]["locus"] == p2.novelty_swaps[0]["locus"]
    swapped = [s["locus"] for s in p3.novelty_swaps]
    assert len(set(swapped)) == 2
    seen = [p1.key(), p2.key(), p3.key()]
    # no runner-up swap is left; a degenerate-replaced locus goes back to the dominant node
    # when that is new (issue 16), recorded as a swap without margin
    p4 = select_gene_plan(j, 5, seen, loci=LOCI3, mix_after_degenerate=False)
    assert p4.key() not in seen and not p4.novelty_exhausted
    assert [s["locus"] for s in p4.novelty_swaps[:2]] == swapped and p4.novelty_swaps[-1]["margin"] is None
    seen.append(p4.key())
    for _ in range(8):  # each further plan is new until none is left, then exhausted
        last = select_gene_plan(j, 5, seen, loci=LOCI3, mix_after_degenerate=False)
        assert len({last.sources()[l] for l in LOCI3}) > 1  # never a copy of a single node
        if last.novelty_exhausted:
            break
        assert last.key() not in seen
        seen.append(last.key())
    assert last.novelty_exhausted and last.key() in seen


def test_novelty_swap_never_recreates_a_single_node_copy():
    j = journal(("a", 0.9, {}), ("b", 0.5, {}), ("c", 0.1, {}))
    p1 = select_gene_plan(j, 4, loci=LOCI3)
    p2 = select_gene_plan(j, 4, [p1.key()], loci=LOCI3)
    assert p2.key() != p1.key()
    assert len(set(p2.sources().values())) > 1
    assert p1.degenerate_restored not in [s["locus"] for s in p2.novelty_swaps]


def test_previous_plan_keys_from_metadata_and_gene_sources():
    j = journal(("a", 0.9, {}), ("b", 0.5, {}), ("c", 0.1, {}))
    a, b, c = j.nodes
    plan = select_gene_plan(j, 4, loci=LOCI3)
    j.append(node("m1", 0.8, operation="merge", phase=2, parent_id=b.id,
                  metadata={"gene_sources": plan.sources(), "gene_plan": plan.metadata()}))
    old_style = {"DATA": c.id, "MODEL": a.id, "LOSS": b.id}
    j.append(node("m2", 0.8, operation="merge", phase=2, parent_id=a.id,
                  metadata={"gene_sources": old_style}))
    keys = previous_plan_keys(j, LOCI3)
    assert plan.key() in keys
    assert (G.gene_id(c.genes["DATA"]), G.gene_id(a.genes["MODEL"]), G.gene_id(b.genes["LOSS"])) in keys
    assert len(keys) == 2


def test_gene_plan_helpers():
    j = journal(("a", 0.9, {}), ("b", 0.5, {}))
    plan = select_gene_plan(j, 3, loci=LOCI3)
    assert set(plan.sources()) == set(LOCI3)
    assert len(plan.key()) == 3 and all(len(g) == 12 for g in plan.key())
    ctx = plan.to_context()
    assert ctx["DATA"] == {"source_node_id": plan["DATA"].source_node_id, "code": plan["DATA"].code}
    meta = json.loads(json.dumps(plan.metadata()))
    assert tuple(meta["key"]) == plan.key()
    assert meta["degenerate_replaced"] == plan.degenerate_replaced


# ---------------------------------------------------------------- primary parent
def test_primary_parent_most_loci_wins():
    j = journal(("a", 0.9, {}), ("b", 0.1, {}))
    a, b = j.nodes
    plan = GenePlan({"DATA": cand("DATA", b.id), "MODEL": cand("MODEL", b.id), "LOSS": cand("LOSS", a.id)}, loci=LOCI3)
    assert primary_parent(plan, j) is b  # count beats fitness


def test_primary_parent_tie_goes_to_better_direction_aware_fitness():
    j = Journal(loci=LOCI3)
    big = j.append(node("big", 0.9, lower_is_better=True))
    small = j.append(node("small", 0.2, lower_is_better=True))
    plan = GenePlan({"DATA": cand("DATA", big.id), "MODEL": cand("MODEL", small.id)}, loci=("DATA", "MODEL"))
    assert primary_parent(plan, j) is small  # lower metric is better here
    j2 = Journal(loci=LOCI3)
    big2 = j2.append(node("big", 0.9))
    small2 = j2.append(node("small", 0.2))
    plan2 = GenePlan({"DATA": cand("DATA", big2.id), "MODEL": cand("MODEL", small2.id)}, loci=("DATA", "MODEL"))
    assert primary_parent(plan2, j2) is big2


def test_primary_parent_tie_on_fitness_goes_to_earliest_step():
    j = journal(("a", 0.5, {}), ("b", 0.5, {}))
    a, b = j.nodes
    plan = GenePlan({"DATA": cand("DATA", b.id), "MODEL": cand("MODEL", a.id)}, loci=("DATA", "MODEL"))
    assert primary_parent(plan, j) is a
    with pytest.raises(ValueError):
        primary_parent(GenePlan({}), j)


# ---------------------------------------------------------------- tournament
def test_tournament_full_size_always_returns_best():
    j = journal(*[(t, m, {}) for t, m in (("a", 0.3), ("b", 0.8), ("c", 0.5), ("d", 0.1))])
    rng = random.Random(0)
    pool = j.valid_pool()
    assert all(tournament_select(pool, len(pool), rng) is pool[1] for _ in range(50))
    assert tournament_select(pool, 99, rng) is pool[1]  # k > len is clamped


def test_tournament_respects_direction():
    j = Journal(loci=LOCI3)
    for t, m in (("a", 0.3), ("b", 0.8), ("c", 0.05)):
        j.append(node(t, m, lower_is_better=True))
    pool = j.valid_pool()
    assert tournament_select(pool, 3, random.Random(1)) is pool[2]


def test_tournament_k1_is_roughly_uniform_and_k3_biased():
    j = journal(*[(t, m, {}) for t, m in (("a", 0.1), ("b", 0.2), ("c", 0.3), ("d", 0.4), ("e", 0.5))])
    pool = j.valid_pool()
    rng = random.Random(42)
    counts = Counter(tournament_select(pool, 1, rng).id for _ in range(5000))
    assert len(counts) == 5 and all(800 < v < 1200 for v in counts.values())
    counts3 = Counter(tournament_select(pool, 3, rng).id for _ in range(5000))
    # best is chosen with p = 1 - C(4,3)/C(5,3) = 0.6; the two worst never win
    assert 2800 < counts3[pool[4].id] < 3200
    assert counts3[pool[0].id] == counts3[pool[1].id] == 0


def test_tournament_errors():
    with pytest.raises(ValueError):
        tournament_select([], 3, random.Random(0))
    with pytest.raises(ValueError):
        tournament_select([node()], 0, random.Random(0))


# ---------------------------------------------------------------- mutation target
def test_mutation_target_is_never_a_stub():
    code = program("a", G.LOCI, LOSS=STUB, OPTIMIZER=STUB, INITIALIZATION="# nothing\npass\n")
    n = Node(operation="draft", phase=1, code=code, genes=G.parse_genes(code), metric_value=1.0, is_buggy=False)
    rng = random.Random(3)
    picks = Counter(select_mutation_target(n, rng) for _ in range(2000))
    assert set(picks) == {"DATA", "MODEL", "REGULARIZATION", "TRAINING_TRICKS"}


def test_mutation_target_falls_back_to_all_loci():
    code = "".join(f"# [SECTION: {l}]\n{STUB}" for l in G.LOCI)
    n = Node(operation="draft", phase=1, code=code, genes=G.parse_genes(code))
    picks = {select_mutation_target(n, random.Random(i)) for i in range(300)}
    assert picks == set(G.LOCI)


# ---------------------------------------------------------------- phase-2 operation
def test_phase2_operation_probability_and_small_pool():
    j = journal(("a", 0.5, {}))
    rng = random.Random(0)
    assert all(choose_phase2_operation(j, rng, 1.0) == "mutate" for _ in range(50))
    j.append(node("b", 0.6))
    assert all(choose_phase2_operation(j, rng, 1.0) == "merge" for _ in range(50))
    assert all(choose_phase2_operation(j, rng, 0.0) == "mutate" for _ in range(50))
    ops = Counter(choose_phase2_operation(j, rng, 0.5) for _ in range(4000))
    assert 1800 < ops["merge"] < 2200


# ---------------------------------------------------------------- draft history
def test_draft_history():
    j = Journal(loci=LOCI3)
    j.append(node("a", 0.81, approach_tag="LightGBM + 5-fold CV"))
    j.append(node("b", None, is_buggy=True, approach_tag="CatBoost"))
    j.append(node("c", None, is_buggy=True, dead=True, approach_tag="MLP"))
    j.append(node("d", 0.7))  # no tag
    j.append(node("e", 0.75, is_buggy=True, approach_tag="kNN"))  # buggy with a number: failed
    assert draft_history(j) == [
        {"step": 1, "approach_tag": "LightGBM + 5-fold CV", "metric": 0.81, "approach": "LightGBM + 5-fold CV"},
        {"step": 2, "approach_tag": "CatBoost", "metric": None, "approach": "CatBoost"},
        {"step": 5, "approach_tag": "kNN", "metric": None, "approach": "kNN"},
    ]
    # the prompt's history (issue 13): dead nodes too, and untagged ("unknown") nodes by their plan
    j.append(node("f", None, is_buggy=True, approach_tag="unknown", plan="Blend two linear models. Then tune."))
    j.append(node("g", None, is_buggy=True, dead=True))  # no tag, no plan: nothing to show
    assert [(h["step"], h["approach"], h["metric"]) for h in draft_history(j, include_failed=True)] == [
        (1, "LightGBM + 5-fold CV", 0.81), (2, "CatBoost", None), (3, "MLP", None),
        (5, "kNN", None), (6, "Blend two linear models", None),
    ]


# ---------------------------------------------------------------- issue 16: no merge rebuilds a node
def _genome_journal() -> Journal:
    """A pool whose best-gene plan is node c's genome exactly (found by a search over small
    random pools: c = a's DATA and MODEL with d's LOSS, the way a mutate child looks)."""
    def genes(d, m, l):
        return {"genes": {"DATA": f"data_{d} = build_data(seed=1234)\n", "MODEL": f"model_{m} = build_model(seed=1234)\n",
                          "LOSS": f"loss_{l} = build_loss(seed=1234)\n"}}

    return journal(("a", 0.2, genes("y", "z", "x")), ("b", 0.64, genes("y", "y", "x")),
                   ("c", 0.19, genes("x", "z", "x")), ("d", 0.56, genes("y", "y", "y")))


def test_plan_equal_to_an_existing_genome_is_swapped_away():
    from swarm_evo.search.selection import genome_keys

    j = _genome_journal()
    genomes = genome_keys(j, LOCI3)
    assert len(genomes) == 4
    assert select_gene_plan(j, 5, loci=LOCI3).key() in genomes  # without the genomes: a copy of a node
    plan = select_gene_plan(j, 5, genomes, loci=LOCI3)
    assert plan.key() not in genomes and plan.novelty_swaps and not plan.novelty_exhausted


def test_session_novelty_input_holds_every_genome_and_a_hopeless_merge_mutates(tmp_path, monkeypatch, data_dir):
    from swarm_evo.config import RunConfig
    from swarm_evo.llm.endpoint import endpoint_for
    from swarm_evo.run.session import open_session
    from swarm_evo.search.selection import genome_keys
    from swarm_evo.step import operations

    config = RunConfig().with_overrides({"search.max_steps": 9})
    session = open_session(competition_id="spaceship-titanic", data_dir=data_dir, run_dir=tmp_path / "run",
                           config=config, endpoint=endpoint_for(config.model))
    parent = make_node(0.9, code=program_full("p"))
    child = make_node(0.8, code=program_full("p", MODEL="model_q = build_model(seed=1234)\n"),
                      operation="mutate", phase=2, parent_id=parent.id)
    for n in (parent, child):
        session.journal.append(n)
    assert genome_keys(session.journal, session.loci) <= session.merged_plan_keys()
    # only two nodes differing at one locus: every plan is one of them, so the step mutates
    monkeypatch.setattr(operations, "choose_phase2_operation", lambda journal, rng, p: "merge")
    request = operations.prepare_phase2(session, 3)
    assert request.operation == "mutate" and not session.plans_in_flight


def program_full(tag: str, **overrides: str) -> str:
    body = {l: f"{l.lower()}_{tag} = build_{l.lower()}(seed=1234)\n" for l in G.LOCI}
    body.update(overrides)
    return "import numpy as np\n" + "".join(f"# [SECTION: {l}]\n{body[l]}" for l in G.LOCI)


def test_phase2_shares_come_from_the_registry_and_the_search_keys():
    """A Phase 2 operation with a ``search.<name>_probability`` key is drawn with that share, in
    the registry's order, the rest mutating (issue 55: a new operation is no change here)."""
    from types import SimpleNamespace

    from swarm_evo.config import SearchConfig
    from swarm_evo.step.operations import phase2_shares

    assert phase2_shares(SearchConfig(merge_probability=0.3)) == {"merge": 0.3}
    shares = phase2_shares(SimpleNamespace(merge_probability=0.25, mutate_probability=0.5))
    assert shares == {"merge": 0.25, "mutate": 0.5}
    j = journal(("a", 0.5, {}))
    j.append(node("b", 0.6))
    rng = random.Random(0)
    ops = Counter(choose_phase2_operation(j, rng, {"merge": 0.25, "crossover": 0.5}) for _ in range(4000))
    assert abs(ops["merge"] / 4000 - 0.25) < 0.03 and abs(ops["crossover"] / 4000 - 0.5) < 0.03
    assert abs(ops["mutate"] / 4000 - 0.25) < 0.03
