"""Medal thresholds from a Kaggle leaderboard, read as MLE-bench reads it.

Rules are those of ``mlebench.grade_helpers.Grader.rank_score`` (from kaggle.com/progression).
The leaderboard's ``score`` column is taken as it is in the file (MLE-bench's ``get_leaderboard``
is a plain ``pd.read_csv``): no row is dropped or re-sorted, N is the number of rows (rows with
an empty score count), "position p" is the p-th row (1-based), and the direction is MLE-bench's
``Grader.is_lower_better``: lower is better when the first score is below the last.

- 1 <= N < 100:    gold = position max(1, int(0.1 N)), silver = max(1, int(0.2 N)),
                   bronze = max(1, int(0.4 N))
- 100 <= N < 250:  gold = position 10, silver = max(1, int(0.2 N)), bronze = max(1, int(0.4 N))
- 250 <= N < 1000: gold = position 10 + int(0.002 N), silver = position 50, bronze = position 100
- N >= 1000:       gold = position 10 + int(0.002 N), silver = max(1, int(0.05 N)),
                   bronze = max(1, int(0.1 N))
- median threshold = ``pandas.Series.median`` of the scores (empty scores skipped).

A score earns gold if it is at least as good as the gold threshold; silver/bronze only if it
did not earn a better medal; "above median" is strictly better than the median.

MLE-bench's ``leaderboard.csv`` files are Git LFS objects: a checkout without ``git lfs pull``
holds a small pointer file instead. :func:`load_leaderboard_scores` detects it and raises
:class:`LeaderboardPointerError` (never parsed as data).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict

from .errors import CompetitionError


class MedalThresholds(BaseModel):
    """Scores needed for gold/silver/bronze and the leaderboard median (same metric units)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gold: float
    silver: float
    bronze: float
    median: float


class MedalResult(BaseModel):
    """Which medals a score earns against ``MedalThresholds`` (MLE-bench's rank_score keys)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gold_medal: bool
    silver_medal: bool
    bronze_medal: bool
    above_median: bool

    @property
    def any_medal(self) -> bool:
        """True if any of gold, silver, bronze."""
        return self.gold_medal or self.silver_medal or self.bronze_medal


def medal_positions(num_teams: int) -> tuple[int, int, int]:
    """1-based leaderboard positions of the (gold, silver, bronze) thresholds for N teams.

    Raises ``CompetitionError`` if ``num_teams < 1``. Rules: MLE-bench (module docstring).
    """
    n = num_teams
    if n < 1:
        raise CompetitionError("leaderboard has no teams: need at least one score row")
    if n < 100:
        return max(1, int(n * 0.1)), max(1, int(n * 0.2)), max(1, int(n * 0.4))
    if n < 250:
        return 10, max(1, int(n * 0.2)), max(1, int(n * 0.4))
    if n < 1000:
        return 10 + int(n * 0.002), 50, 100
    return 10 + int(n * 0.002), max(1, int(n * 0.05)), max(1, int(n * 0.1))


def leaderboard_is_lower_better(scores: list[float]) -> bool:
    """MLE-bench's ``Grader.is_lower_better``: the first score is below the last (file order)."""
    return bool(scores[0] < scores[-1])


def medal_thresholds(scores: list[float]) -> MedalThresholds:
    """Thresholds for a leaderboard's scores in file order (MLE-bench's ``rank_score``).

    Raises ``CompetitionError`` if ``scores`` is empty.
    """
    series = pd.Series([float(s) for s in scores], dtype=float)
    gold, silver, bronze = medal_positions(len(series))
    return MedalThresholds(
        gold=series.iloc[gold - 1],
        silver=series.iloc[silver - 1],
        bronze=series.iloc[bronze - 1],
        median=float(series.median()),
    )


def rank_score(
    score: float | None, thresholds: MedalThresholds, is_lower_better: bool
) -> MedalResult:
    """Medals earned by ``score`` (None -> no medals), exclusive as in MLE-bench."""
    if score is None:
        return MedalResult(gold_medal=False, silver_medal=False, bronze_medal=False, above_median=False)

    def at_least(threshold: float) -> bool:
        return score <= threshold if is_lower_better else score >= threshold

    gold = at_least(thresholds.gold)
    silver = not gold and at_least(thresholds.silver)
    bronze = not gold and not silver and at_least(thresholds.bronze)
    above = score < thresholds.median if is_lower_better else score > thresholds.median
    return MedalResult(gold_medal=gold, silver_medal=silver, bronze_medal=bronze, above_median=above)


LFS_POINTER_PREFIX = b"version https://git-lfs.github.com/spec/v1"
"""How a Git LFS pointer file starts (git-lfs spec)."""


class LeaderboardPointerError(CompetitionError):
    """The leaderboard file is a Git LFS pointer, not the leaderboard (``git lfs pull`` fetches it)."""


def load_leaderboard_scores(path: Path) -> list[float]:
    """The ``score`` column of a leaderboard CSV in file order (MLE-bench's ``leaderboard.csv``);
    empty or non-numeric scores are NaN and still count as rows.

    Raises:
        LeaderboardPointerError: the file is a Git LFS pointer (the message says to run
            ``git lfs pull`` in its directory).
        CompetitionError: the file cannot be read, has no ``score`` column or no row.
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(LFS_POINTER_PREFIX))
    except OSError as exc:
        raise CompetitionError(f"{path}: cannot read leaderboard CSV ({exc.strerror})") from exc
    if head == LFS_POINTER_PREFIX:
        raise LeaderboardPointerError(
            f"{path} is a Git LFS pointer, not the leaderboard: run `git lfs pull` in {path.parent} "
            "(medal thresholds stay null until then)"
        )
    try:
        table = pd.read_csv(path)
    except Exception as exc:  # noqa: BLE001 - any parse failure is reported with the path
        raise CompetitionError(f"{path}: cannot read leaderboard CSV ({exc})") from exc
    if "score" not in table.columns:
        raise CompetitionError(
            f"{path}: leaderboard needs a 'score' column, found columns {list(table.columns)}"
        )
    if table.empty:
        raise CompetitionError(f"{path}: leaderboard has no rows")
    return pd.to_numeric(table["score"], errors="coerce").astype(float).tolist()
