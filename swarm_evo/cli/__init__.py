"""The ``swarm-evo`` command line (issue 2 contract): ``prepare``, ``run``, ``resume``, ``grade``
(:mod:`~swarm_evo.cli.commands`), ``eval`` (:mod:`~swarm_evo.cli.eval_cli`),
``sweep`` (:mod:`~swarm_evo.cli.sweep_cli`) and ``env`` (:mod:`~swarm_evo.cli.env_cli`).
``python -m swarm_evo.cli`` is the same command (``__main__.py``).

The only part of the core that reaches Prefect, and only lazily: its commands import ``flows``
inside their functions, so ``swarm-evo --help`` and bad input never load Prefect.

May import: sandbox, config, competition, population, evaluation, prompting, llm, learning,
search, reporting, objective, run, step, sweeps, store.
"""

from swarm_evo.cli.commands import main

__all__ = ["main"]
