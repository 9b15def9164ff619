"""What a run selects on (issue 41, item 5): the hidden split the host grades, or the printed metric.

``search.fitness`` (:class:`swarm_evo.config.SearchConfig`):

* ``auto`` (default): a competition whose public layout allows a hidden split
  (:mod:`swarm_evo.competition.hidden_layout`: the built-ins, MLE-bench training tables keyed by
  the sample submission's id, labelled image folders) selects on it; any other says why in one
  line at start and selects on the printed metric, as before issue 41;
* ``hidden``: the same, but a competition without a split is bad input (a ``ConfigError``
  naming the competition and why: exit 2);
* ``printed``: the program's printed validation metric, as before issue 41.

Problems (the Eval Service) are unchanged whatever the key says: their evaluator already is
the host's. A resumed run keeps the source it began with (``journal.info["fitness"]``): nodes
ranked on two bases would not compare.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from swarm_evo.competition.hidden_layout import HiddenSplitError, HiddenSplitUnavailable
from swarm_evo.competition.hidden_split import SPLIT_DIR
from swarm_evo.config import ConfigError, SearchConfig
from swarm_evo.objective.base import Objective

log = logging.getLogger(__name__)

FITNESS_KEY = "fitness"
"""``journal.info["fitness"]``: ``{"source": "hidden" | "printed" | "evaluator", "why": str}``."""
DERIVED_DIRS: tuple[str, ...] = (SPLIT_DIR,)
"""Folders of a run directory that :func:`apply_fitness` rebuilds at every session open from the
seed and the public data (checked against the journal's digest): derived data, never mirrored to
the run store (a copy of the public data per run, and the hidden answers)."""

SPLIT_KEY = "hidden_split"
"""``journal.info["hidden_split"]``: the split's record (:meth:`HiddenSplit.record`)."""


def choose_fitness(objective: Objective, search: SearchConfig, recorded: str | None = None) -> tuple[str, str]:
    """``(source, why)``: ``hidden``, ``printed`` or (problems) ``evaluator``, and one sentence.

    ``recorded``: the source a resumed run began with (kept, when it still applies).

    Raises:
        ConfigError: ``search.fitness`` is ``hidden`` for a competition that allows no hidden
            split, or ``search.hidden_group_column`` names no column of the training table, or
            ``search.hidden_time_column`` none holding dates.
    """
    if objective.kind != "competition":
        return "evaluator", f"problem {objective.id}: the host's evaluator scores every program"
    if recorded == "printed" or (recorded is None and search.fitness == "printed"):
        return "printed", f"{objective.id}: selecting on the programs' printed validation metrics (search.fitness: printed)"
    try:
        reason = objective.hidden_split_unavailable(  # type: ignore[attr-defined]
            search.hidden_group_column, search.hidden_time_column)
    except HiddenSplitError as exc:
        raise ConfigError(f"competition {objective.id}: {exc}") from None
    if reason is None:
        return "hidden", (f"{objective.id}: selecting on a hidden split of {search.hidden_fraction:.0%} of the "
                          "training rows, graded by the host")
    if search.fitness == "hidden" or recorded == "hidden":
        raise ConfigError(
            f"search.fitness is hidden, but competition {objective.id} allows no hidden split: {reason}; "
            "set search.fitness to printed (or auto)")
    return "printed", f"{objective.id}: no hidden split ({reason}); selecting on the programs' printed validation metrics"


def apply_fitness(objective: Objective, search: SearchConfig, seed: int, run_dir: Path,
                  info: dict[str, Any], nodes: int = 0) -> str:
    """Choose the run's fitness (:func:`choose_fitness`, keeping a resumed run's), give a
    competition its hidden split when it selects on one (written under ``run_dir``, or the one
    written before: the same after a resume), record both in ``info`` (the journal's run info)
    and log the choice in one line. Returns the source. ``nodes``: the journal's nodes so far; a
    journal with nodes but no record of its fitness began before issue 41, on printed metrics,
    and stays on them.

    A split whose answers the competition's grader cannot grade (issue 53, item 10:
    :func:`swarm_evo.competition.hidden_answers.check_gradable`) is no split: ``auto`` falls back
    to the printed metric, saying why in the one line.

    Raises:
        ConfigError: see :func:`choose_fitness`; also ``search.fitness: hidden`` (or a resumed
            hidden run) whose split the grader cannot grade.
        CompetitionError: a resumed run's split can no longer be drawn the same (the public data
            changed).
    """
    recorded = (info.get(FITNESS_KEY) or {}).get("source") or ("printed" if nodes else None)
    source, why = choose_fitness(objective, search, recorded)
    if source == "hidden":
        previous = info.get(SPLIT_KEY)
        if previous is not None:  # a resumed run: its own split, whatever the config says now
            fraction, group, time = previous["fraction"], previous.get("group_column"), previous.get("time_column")
            seed = previous["seed"]
        else:
            fraction, group, time = search.hidden_fraction, search.hidden_group_column, search.hidden_time_column
        try:
            split = objective.use_hidden_split(  # type: ignore[attr-defined]
                run_dir, seed, fraction, group, recorded=previous, time_column=time)
        except HiddenSplitUnavailable as exc:  # the grader cannot grade the hidden answers (issue 53, item 10)
            shutil.rmtree(Path(run_dir) / SPLIT_DIR, ignore_errors=True)
            if search.fitness == "hidden" or recorded == "hidden":
                raise ConfigError(f"search.fitness is hidden, but competition {objective.id} allows no hidden split: "
                                  f"{exc}; set search.fitness to printed (or auto)") from None
            source, why = "printed", (f"{objective.id}: no hidden split ({exc}); selecting on the programs' "
                                      "printed validation metrics")
        else:
            info[SPLIT_KEY] = split.record()
            why = f"{why}: {split.rows} hidden rows of {split.train_rows}" + (" (stratified)" if split.stratified else "")
            if split.relation_why:  # issue 53, item 7: which relation the split mirrors, and why
                why = f"{why}, drawn {split.relation_why}"
    info[FITNESS_KEY] = {"source": source, "why": why}
    (log.warning if source == "printed" and search.fitness != "printed" else log.info)("fitness: %s", why)
    return source
