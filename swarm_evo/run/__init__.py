"""A run's shared state (SPEC §5, §6): the ``RunSession`` every step of a run reads (and the
per-process registry ``get_session``), the budget (node count, time limit, elapsed time across
crashes), resuming from the run directory, the start check that every prompt fits the model's
window, and what a model call is given (prompt variables, the offline model's context).

- :mod:`~swarm_evo.run.session`, :mod:`~swarm_evo.run.budget`, :mod:`~swarm_evo.run.resume`,
  :mod:`~swarm_evo.run.prompt_budget`, :mod:`~swarm_evo.run.model_context`, :mod:`~swarm_evo.run.preflight`
  (the sandbox probe and the model calls before the first step), :mod:`~swarm_evo.run.heap` (the
  garbage collector of a long-lived run process).

May import: sandbox, config, operators, population, store, prompting, llm, learning, search, objective.
"""
