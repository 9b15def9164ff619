"""The run's objective from its command-line names: a competition under its data directory, or
a problem (SPEC §4, §11). Imports no model client and no Prefect: ``swarm-evo run`` checks
this input first, so a wrong ``--data-dir`` is reported before the slow imports.

A data directory may be a store location (an fsspec URL such as ``s3://bucket/prefix/data``,
issue 34): the competition's public part is read through the machine's data cache
(swarm_evo/store/data.py), and its private answers are fetched only when a submission is graded.
"""

from __future__ import annotations

import functools
from pathlib import Path

from swarm_evo.competition import Competition, CompetitionError, load_competition
from swarm_evo.competition.loader import prepare_hint
from swarm_evo.config import ConfigError
from swarm_evo.objective.base import Objective
from swarm_evo.objective.competition import CompetitionObjective
from swarm_evo.objective.problem import ProblemObjective
from swarm_evo.store.data import DataNotFoundError, part_root, sync_competition
from swarm_evo.store.location import is_url


def recorded_data_dir(data_dir: str | Path | None) -> str | None:
    """``data_dir`` as a run's journal records it (``info["data_dir"]``): a store URL as given, so
    a resume on another machine reads the data from the store again; a local path made absolute."""
    if not data_dir:
        return None
    return str(data_dir) if is_url(data_dir) else str(Path(data_dir).resolve())


def stored_competition(competition_id: str, url: str, mlebench_repo: str | None = None, *,
                       answers: bool = False) -> Competition:
    """Competition ``competition_id`` prepared in the store location ``url``, loaded from the
    machine's data cache (its public part downloaded where it changed); with ``answers``, its
    private part too (for ``swarm-evo grade``), else only when :func:`fetch_answers` is called.

    Raises:
        CompetitionError: the store holds no ``URL/<id>/prepared/public/`` (names it and the
            ``swarm-evo prepare`` command), or the cached folder does not load.
        StoreError: an unknown scheme, a missing fsspec package, or a store that cannot be read.
    """
    try:
        public = sync_competition(url, competition_id, "public").data_dir
        if answers:
            sync_competition(url, competition_id, "private")
    except DataNotFoundError as exc:
        raise CompetitionError(f"{exc}: prepare the competition first "
                               f"({prepare_hint(competition_id, url)})") from None
    return load_competition(competition_id, public, mlebench_repo, private_root=part_root(url, "private"))


def fetch_answers(url: str, competition_id: str) -> Path:
    """Download (where changed) the private part of ``competition_id`` from the store location
    ``url`` into the data cache, outside anything a program sees; returns its root.

    Raises:
        CompetitionError: the store holds no ``URL/<id>/prepared/private/``.
        StoreError: the store cannot be read.
    """
    try:
        return sync_competition(url, competition_id, "private").data_dir
    except DataNotFoundError as exc:
        raise CompetitionError(f"{exc} (private answers of {competition_id}): prepare the competition again "
                               f"({prepare_hint(competition_id, url)})") from None


def load_objective(competition_id: str | None, problem: str | None, data_dir: str | Path | None,
                   mlebench_repo: str | None = None, instance: str | None = None) -> Objective:
    """The run's objective: a competition (``competition_id`` under ``data_dir``, a local folder
    or a store URL) or a problem (a built-in name or a problem folder, on ``instance`` if it has
    instances; its data file, if any, under the local folder ``data_dir``).

    Raises:
        ValueError: neither or both of ``competition_id`` and ``problem`` are given.
        ConfigError: an ``instance`` for a competition; a store URL as a problem's data directory.
        CompetitionError: the competition cannot be loaded or is not prepared.
        StoreError: the store URL cannot be opened or read.
        ProblemError: the problem cannot be loaded (names the file or field and the fix), an
            unknown instance, or an instance for a problem without instances.
    """
    if (competition_id is None) == (problem is None):
        raise ValueError("give exactly one of competition_id (a Kaggle competition) and problem")
    if problem is not None:
        from swarm_evo.evaluation import load_problem

        if data_dir and is_url(data_dir):
            raise ConfigError(f"--data-dir {data_dir}: a problem's data files are read from a local folder; "
                              "store URLs hold competitions")
        return ProblemObjective(load_problem(problem, Path(data_dir) if data_dir else None, instance))
    if instance is not None:
        raise ConfigError(
            f"instance {instance!r} (--instance / problem.instance) applies to problems such as tsp, not to "
            f"competition {competition_id!r}: drop it"
        )
    if data_dir and is_url(data_dir):
        competition = stored_competition(competition_id, str(data_dir), mlebench_repo)
        return CompetitionObjective(competition, fetch_answers=functools.partial(
            fetch_answers, str(data_dir), competition_id))
    competition = load_competition(competition_id, Path(data_dir or "data"), mlebench_repo)
    if not competition.public_dir.is_dir():
        raise CompetitionError(f"{competition.public_dir} not found: prepare the competition first")
    return CompetitionObjective(competition)
