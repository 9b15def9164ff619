"""Benchmark sweeps (SPEC §12; issues 6, 17): the plan (competitions or problems × policies ×
seeds), the rows (``grading_reports.jsonl``, ``problem_reports.jsonl``), the MLE-bench-style
summary, mean ± SEM over seeds and the policy comparisons' statistics.

- :mod:`~swarm_evo.sweeps.sweep`, :mod:`~swarm_evo.sweeps.sweep_problems`,
  :mod:`~swarm_evo.sweeps.sweep_stats`;
- :mod:`~swarm_evo.sweeps.sweep_store`: a sweep's runs and rows in the run store (issue 34);
- :mod:`~swarm_evo.sweeps.sweep_identity`: the sweep's id, one sweep per store folder, and the
  rows a restarted sweep keeps (issue 40).

The ``benchmark-sweep`` flow (flows/benchmark_sweep.py) runs a sweep's plan.

May import: competition, population, store, reporting.
"""
