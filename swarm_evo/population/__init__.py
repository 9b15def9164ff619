"""The population (SPEC §5): a node (one candidate program and its outcome), its genes (the 7
loci of a program, parsed from ``# [SECTION: NAME]`` markers) and the journal (every node of a
run, the run's source of truth, written atomically).

- :mod:`~swarm_evo.population.node`: ``Node``, ``ExecutionSummary``, ``LLMUsage``;
- :mod:`~swarm_evo.population.genes`: ``LOCI``, parsing and assembling a program's genes;
- :mod:`~swarm_evo.population.source`: ``parse_program``, a program's AST, one parse at a time
  (CPython 3.11's parser is not safe in two threads at once);
- :mod:`~swarm_evo.population.ranking`: the ranking rule (fitness, rank key, best so far,
  percentiles, the Phase 1 stop rule), used by every part of the search that orders nodes;
- :mod:`~swarm_evo.population.journal`: ``Journal``, ``atomic_write_text``.

May import: sandbox, operators.
"""
