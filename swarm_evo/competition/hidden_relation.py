"""Which relation between training and test rows a hidden split mirrors (issue 53, item 7).

A hidden split grades programs on rows that stand to the rest of the training rows as the
competition's test rows stand to its training rows. Drawn at random where the competition's
test rows are not random, it rewards the very leak it exists to catch: on a table whose test
patients are unseen, per-patient target encoding scored a hidden RMSE of 0.333 against 1.008
for an honest model, with the same private score (0.850) for both. So the split is:

* **time** (checked first: each day of a date column is also a "group" of unseen values) — by a
  date column whose test range follows the training range (at most :data:`EARLY_SHARE` of the
  test dates fall before the training dates' 95th percentile): the latest ``fraction`` of the
  training rows are hidden, so hidden rows follow the rest in time like the test's;
* **group** — by a column (not a date column) whose values the test rows (nearly) never share
  with training rows (at most :data:`UNSEEN_SHARE` of the test rows with a value have one the
  training table holds) while training rows repeat them (at least :data:`REPEAT_SHARE` of the
  training rows share their value with another): a patient, a session, a user. Whole groups
  are hidden (``GroupShuffleSplit``), so hidden groups are unseen like the test's;
* **random** — otherwise, as MLE-bench's own split draws its test rows (stratified on the label
  for classification).

``search.hidden_group_column`` names the group column itself and ``search.hidden_time_column``
the date column (no detection); a built-in declares
its relation (:attr:`swarm_evo.competition.builtins.BuiltinSpec.hidden_relation`). The split's
record keeps the relation and why (``relation_why``), and the run's one fitness line at start
says them (:func:`swarm_evo.objective.fitness.apply_fitness`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pandas as pd

from .dates import as_dates
from .hidden_layout import HiddenLayout, HiddenSplitError

Relation = Literal["random", "group", "time"]
UNSEEN_SHARE = 0.1
"""A column groups the rows when at most this share of the test rows hold a value the training table holds..."""
REPEAT_SHARE = 0.5
"""...while at least this share of the training rows share their value with another training row."""
MIN_GROUPS = 10
"""A group column has at least this many values among the training rows."""
EARLY_SHARE = 0.05
"""A date column orders the split when at most this share of the test dates fall before the 95th
percentile of the training dates."""


@dataclass(frozen=True)
class SplitRelation:
    """How the hidden rows are drawn: ``kind``, the ``column`` it follows (group or time; None
    for random) and ``why`` (one sentence, logged at start)."""

    kind: Relation
    column: str | None
    why: str


def _group_evidence(train: pd.Series, test: pd.Series) -> tuple[float, float, int] | None:
    """``(share of test rows seen in training, share of training rows repeated, values)``."""
    train, test = train.astype(str), test.astype(str)
    train, test = train[train != ""], test[test != ""]
    if train.empty or test.empty:
        return None
    counts = train.value_counts()
    return float(test.isin(counts.index).mean()), float((train.map(counts) >= 2).mean()), len(counts)


def detect_relation(train: pd.DataFrame, test: pd.DataFrame | None, layout: HiddenLayout) -> SplitRelation:
    """The competition's own train/test relation, read from its tables (module docstring).

    Args:
        train: the public training table (as :func:`~swarm_evo.competition.hidden_layout.read_table` reads it).
        test: the public test table, or None (an image competition: random).
        layout: the split's layout (its feature columns are the candidates; the id is not one).
    """
    if test is None:
        return SplitRelation("random", None, "no test table to compare with: hidden rows drawn at random")
    candidates = [c for c in layout.feature_columns if c != layout.id_column and c in train.columns]
    dated = set()
    for column in candidates:
        train_dates, test_dates = as_dates(train[column]), as_dates(test[column])
        if train_dates is not None:
            dated.add(column)
        if train_dates is None or test_dates is None or train_dates.notna().sum() < 2 or test_dates.notna().sum() < 1:
            continue
        cut = train_dates.quantile(0.95)
        early = float((test_dates.dropna() < cut).mean())
        if early <= EARLY_SHARE:
            return SplitRelation("time", column, (
                f"by time on {column!r}: the test dates ({test_dates.min():%Y-%m-%d}..{test_dates.max():%Y-%m-%d}) "
                f"follow the training dates ({train_dates.min():%Y-%m-%d}..{train_dates.max():%Y-%m-%d}); the latest "
                "training rows are hidden"))
    groups = []
    for column in candidates:
        if column in dated:  # each day a group: a date column orders rows, above
            continue
        evidence = _group_evidence(train[column], test[column])
        if evidence is None:
            continue
        seen, repeated, values = evidence
        if seen <= UNSEEN_SHARE and repeated >= REPEAT_SHARE and values >= MIN_GROUPS:
            groups.append((seen, -repeated, column))
    if groups:
        seen, repeated, column = min(groups)
        return SplitRelation("group", column, (
            f"grouped by {column!r}: {seen:.0%} of the test rows have a {column} the training rows have, while "
            f"{-repeated:.0%} of the training rows share theirs with another; whole groups are hidden"))
    return SplitRelation("random", None, (
        "at random (stratified for classification): no column's test values are unseen in training while "
        "repeating within it, and no date column's test range follows the training range"))


def chosen_relation(competition_id: str, train: pd.DataFrame, test: pd.DataFrame | None, layout: HiddenLayout,
                    group_column: str | None = None, time_column: str | None = None) -> SplitRelation:
    """The relation a split uses: ``search.hidden_group_column`` when set, else ``time_column``
    (the latest rows by it) when given, else a built-in's declared relation
    (:attr:`~swarm_evo.competition.builtins.BuiltinSpec.hidden_relation`), else
    :func:`detect_relation`.

    Raises:
        HiddenSplitError: both columns are given; ``time_column`` is not a training column
            holding dates; a built-in declares a column its training table lacks (a bug).
    """
    from .builtins import BUILTIN_COMPETITIONS

    if group_column is not None and time_column is not None:
        raise HiddenSplitError(f"a hidden split is grouped ({group_column!r}) or ordered by time ({time_column!r}), "
                               "not both: name one")
    if time_column is not None:
        if time_column not in train.columns or as_dates(train[time_column]) is None:
            raise HiddenSplitError(f"time column {time_column!r} is not a column of the training table holding dates "
                                   f"(2021-03-04, 2021/3/4 10:00; columns: {list(train.columns)[:12]})")
        return SplitRelation("time", time_column, f"by time on {time_column!r} (named by search.hidden_time_column "
                                                  "or by the split this run began with); the latest training rows are "
                                                  "hidden")
    if group_column is not None:
        return SplitRelation("group", group_column, f"grouped by {group_column!r} (named by search.hidden_group_column "
                                                    "or by the split this run began with); whole groups are hidden")
    spec = BUILTIN_COMPETITIONS.get(competition_id)
    if spec is not None:
        if spec.hidden_relation_column is not None and spec.hidden_relation_column not in train.columns:
            raise HiddenSplitError(f"built-in {competition_id} declares a {spec.hidden_relation} split on "
                                   f"{spec.hidden_relation_column!r}, a column its training table lacks")
        kind = {"random": "at random", "group": "grouped", "time": "by time"}[spec.hidden_relation]
        on = f" on {spec.hidden_relation_column!r}" if spec.hidden_relation_column else ""
        return SplitRelation(spec.hidden_relation, spec.hidden_relation_column,
                             f"{kind}{on} ({spec.hidden_relation_why}; declared for the built-in)")
    return detect_relation(train, test, layout)
