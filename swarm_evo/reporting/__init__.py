"""Views of a journal for people: the node table, run summary and final report, the run report
(per-operation rates, lineage, steps per agent), where improvements come from (operation
statistics), the best-fitness chart and the self-contained evolution-tree page.

- :mod:`~swarm_evo.reporting.report`, :mod:`~swarm_evo.reporting.run_report`,
  :mod:`~swarm_evo.reporting.operation_stats`, :mod:`~swarm_evo.reporting.charts`,
  :mod:`~swarm_evo.reporting.evolution_tree`.

They read a journal and write files; they never change a run.

May import: operators, competition, population, llm.
"""
