"""The search's objective: a competition or a program-optimisation problem (SPEC §4, §11).

``Objective`` is the interface; ``CompetitionObjective`` and ``ProblemObjective`` implement it.

May import: sandbox, config, competition, population, store, evaluation, prompting, search.
"""

from swarm_evo.objective.base import Assessment, Objective
from swarm_evo.objective.competition import SUBMISSION, CompetitionObjective
from swarm_evo.objective.problem import ProblemObjective, ProblemReport

__all__ = ["Assessment", "CompetitionObjective", "Objective", "ProblemObjective", "ProblemReport", "SUBMISSION"]
