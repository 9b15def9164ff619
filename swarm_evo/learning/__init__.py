"""What the search learns from its own history (SPEC §9): agents with role and strategy texts,
the ε-greedy dispatcher that picks the agent of a step, the experience pool of every step's
outcome, node quality (the reward both learn from), the evolution log shown in prompts, and
the rules of agent evolution (who is elite, who is weak, the record).

- :mod:`~swarm_evo.learning.agents`, :mod:`~swarm_evo.learning.dispatcher`,
  :mod:`~swarm_evo.learning.experience`, :mod:`~swarm_evo.learning.quality`,
  :mod:`~swarm_evo.learning.evolution_log`, :mod:`~swarm_evo.learning.agent_evolution`.

The job that runs an agent evolution on a session is :mod:`swarm_evo.step.evolve_agents`.

May import: operators, population, prompting.
"""
