"""Node quality: the reward the dispatcher and the experience pool learn from (SPEC §9)."""

from __future__ import annotations

from swarm_evo.population import ranking
from swarm_evo.population.journal import Journal
from swarm_evo.population.node import Node


def node_quality(journal: Journal, node: Node) -> float:
    """Percentile rank of ``node``'s fitness among the journal's valid nodes, in (0, 1]; 0 when buggy.

    ``quality = #{valid v : fitness(v) <= fitness(node)} / #valid`` with ``node`` counted among
    the valid nodes (so the best valid node scores 1.0, the worst of n scores 1/n, a lone valid
    node 1.0). Fitness is direction-aware (:func:`swarm_evo.population.ranking.fitness`). Buggy and dead nodes, and nodes
    without a metric, score 0.0 (SPEC §9: "percentile rank of its fitness among valid nodes;
    0 when buggy").
    """
    fitness = ranking.fitness(node)
    if node.is_buggy or node.dead or fitness is None:
        return 0.0
    others = (ranking.fitness(v) for v in journal.valid_pool() if v.id != node.id)
    return ranking.at_or_below_share(fitness, (f for f in others if f is not None))
