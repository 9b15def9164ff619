"""The evolutionary operators' rules (SPEC §6, §8): pheromone over nodes and genes, selection
(merge gene plans, tournament parents, mutation targets), the review rules, the chained debug,
static pre-validation, merge compatibility, the approach tag read from code, and the greedy and
random policies of the ablations (SPEC §12).

- :mod:`~swarm_evo.search.pheromone`, :mod:`~swarm_evo.search.selection`,
  :mod:`~swarm_evo.search.review`, :mod:`~swarm_evo.search.approach_tag`,
  :mod:`~swarm_evo.search.debug_chain`, :mod:`~swarm_evo.search.prevalidate`,
  :mod:`~swarm_evo.search.merge_compat`, :mod:`~swarm_evo.search.policies`.

Pure rules: no model call happens here (the step makes the calls, :mod:`swarm_evo.step`).

May import: sandbox, population, learning.
"""
