"""The run's objective from its command-line names: a competition under its data directory, or
a problem (SPEC §4, §11). Imports no model client and no Prefect: ``swarm-evo run`` checks
this input first, so a wrong ``--data-dir`` is reported before the slow imports."""

from __future__ import annotations

from pathlib import Path

from swarm_evo.competition import CompetitionError, load_competition
from swarm_evo.config import ConfigError
from swarm_evo.objective.base import Objective
from swarm_evo.objective.competition import CompetitionObjective
from swarm_evo.objective.problem import ProblemObjective


def load_objective(competition_id: str | None, problem: str | None, data_dir: Path | None,
                   mlebench_repo: str | None = None, instance: str | None = None) -> Objective:
    """The run's objective: a competition (``competition_id`` under ``data_dir``) or a problem
    (a built-in name or a problem folder, on ``instance`` if it has instances; its data file,
    if any, under ``data_dir``).

    Raises:
        ValueError: neither or both of ``competition_id`` and ``problem`` are given.
        ConfigError: an ``instance`` for a competition.
        CompetitionError: the competition cannot be loaded or is not prepared.
        ProblemError: the problem cannot be loaded (names the file or field and the fix), an
            unknown instance, or an instance for a problem without instances.
    """
    if (competition_id is None) == (problem is None):
        raise ValueError("give exactly one of competition_id (a Kaggle competition) and problem")
    if problem is not None:
        from swarm_evo.evaluation import load_problem

        return ProblemObjective(load_problem(problem, Path(data_dir) if data_dir else None, instance))
    if instance is not None:
        raise ConfigError(
            f"instance {instance!r} (--instance / problem.instance) applies to problems such as tsp, not to "
            f"competition {competition_id!r}: drop it"
        )
    competition = load_competition(competition_id, Path(data_dir or "data"), mlebench_repo)
    if not competition.public_dir.is_dir():
        raise CompetitionError(f"{competition.public_dir} not found: prepare the competition first")
    return CompetitionObjective(competition)
