"""``grade_submission``: score a submission against the private answers (MLE-bench report).

``CompetitionReport`` has the fields of MLE-bench's ``mlebench.grade_helpers.
CompetitionReport`` plus ``error``. Thresholds come from ``<data_dir>/<id>/leaderboard.csv``
when present (rules and reading in ``leaderboard.py``, as MLE-bench; with a leaderboard the
report's ``is_lower_better`` is the leaderboard's, as MLE-bench's), else they are None and no
medal is awarded (a Git LFS pointer in its place is logged with the fix).
Like MLE-bench, the score is rounded to 5 decimals.

Written reports (``grade_report.json``, the sweep's ``grading_reports.jsonl``, ``swarm-evo
grade --jsonl``) load with MLE-bench's ``CompetitionReport.from_dict``: it calls ``float()`` on
every threshold, so absent thresholds are written as ``NaN`` (Python's ``json`` writes and
reads that literal) and read back as None.
"""

from __future__ import annotations

import json
import logging
import math
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from .errors import CompetitionError, InvalidSubmissionError
from .leaderboard import (
    LeaderboardPointerError,
    leaderboard_is_lower_better,
    load_leaderboard_scores,
    medal_thresholds,
    rank_score,
)
from .model import Competition
from .submission import read_submission, validate_submission

log = logging.getLogger(__name__)

SCORE_DECIMALS = 5
MLEBENCH_SUBMISSION_FILE = "mlebench_submission.jsonl"
"""``RUN_DIR/mlebench_submission.jsonl``: a run's submission as ``mlebench grade --submission``
reads it (one JSON line: ``competition_id``, ``submission_path``)."""
THRESHOLD_FIELDS = ("gold_threshold", "silver_threshold", "bronze_threshold", "median_threshold")


class CompetitionReport(BaseModel):
    """Grading result of one submission (MLE-bench's CompetitionReport fields + ``error``)."""

    model_config = ConfigDict(extra="forbid")

    competition_id: str
    score: float | None = None
    gold_threshold: float | None = None
    silver_threshold: float | None = None
    bronze_threshold: float | None = None
    median_threshold: float | None = None
    any_medal: bool = False
    gold_medal: bool = False
    silver_medal: bool = False
    bronze_medal: bool = False
    above_median: bool = False
    submission_exists: bool = False
    valid_submission: bool = False
    is_lower_better: bool
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    submission_path: str
    error: str | None = None

    @field_validator(*THRESHOLD_FIELDS, mode="before")
    @classmethod
    def _nan_is_absent(cls, value: object) -> object:
        return None if isinstance(value, float) and math.isnan(value) else value

    def to_dict(self) -> dict:
        """The dict MLE-bench's ``CompetitionReport.to_dict`` gives (``created_at`` as ISO-8601,
        absent thresholds as ``float("nan")``, which ``from_dict`` loads) plus ``error``."""
        data = self.model_dump(mode="json")
        for name in THRESHOLD_FIELDS:
            if data[name] is None:
                data[name] = math.nan
        return data

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` as JSON (one line unless ``indent``; ``NaN`` for absent thresholds)."""
        return json.dumps(self.to_dict(), indent=indent)


def run_group_report(reports: list[CompetitionReport]) -> dict:
    """MLE-bench's run-group grading report of ``reports`` (``mlebench.grade.aggregate_reports``):
    ``total_runs``, ``total_runs_with_submissions``, ``total_valid_submissions``,
    ``total_medals``, ``total_gold_medals``, ``total_silver_medals``, ``total_bronze_medals``,
    ``total_above_median`` (ints) and ``competition_reports`` (each :meth:`CompetitionReport.to_dict`)."""
    gold = sum(r.gold_medal for r in reports)
    silver = sum(r.silver_medal for r in reports)
    bronze = sum(r.bronze_medal for r in reports)
    return {
        "total_runs": len(reports),
        "total_runs_with_submissions": sum(r.submission_exists for r in reports),
        "total_valid_submissions": sum(r.valid_submission for r in reports),
        "total_medals": gold + silver + bronze,
        "total_gold_medals": gold,
        "total_silver_medals": silver,
        "total_bronze_medals": bronze,
        "total_above_median": sum(r.above_median for r in reports),
        "competition_reports": [r.to_dict() for r in reports],
    }


def grade_submission(submission_path: Path, competition: Competition) -> CompetitionReport:
    """Validate and score ``submission_path`` for ``competition``.

    Returns a report; a missing/invalid/ungradable submission gives ``valid_submission=False``,
    ``score=None`` and ``error`` set (never raises for a bad submission). Raises
    ``CompetitionError`` if the competition's answers or leaderboard cannot be read.
    """
    submission_path = Path(submission_path)
    report = dict(
        competition_id=competition.id,
        is_lower_better=competition.is_lower_better,
        submission_path=str(submission_path),
        submission_exists=submission_path.is_file(),
    )
    thresholds = None
    lower_is_better = competition.is_lower_better
    if competition.leaderboard_path is not None:
        try:
            scores = load_leaderboard_scores(competition.leaderboard_path)
        except LeaderboardPointerError as exc:
            log.warning("%s", exc)
        else:
            thresholds = medal_thresholds(scores)
            # MLE-bench takes the direction from the leaderboard's order (Grader.is_lower_better)
            lower_is_better = leaderboard_is_lower_better(scores)
            if lower_is_better != competition.is_lower_better:
                log.warning("%s: MLE-bench's rule (lower is better when the first score, %s, is below the "
                            "last, %s) says %s is better, grader %s says %s; medals follow MLE-bench's rule",
                            competition.leaderboard_path, scores[0], scores[-1],
                            "lower" if lower_is_better else "higher", competition.grader.name,
                            "lower" if competition.is_lower_better else "higher")
            report.update(
                is_lower_better=lower_is_better,
                gold_threshold=thresholds.gold,
                silver_threshold=thresholds.silver,
                bronze_threshold=thresholds.bronze,
                median_threshold=thresholds.median,
            )
    errors = validate_submission(submission_path, competition)
    if errors:
        return CompetitionReport(**report, error="; ".join(errors))
    if not competition.answers_path.is_file():
        raise CompetitionError(
            f"{competition.answers_path} not found (private answers of {competition.id}): "
            f"prepare the competition again"
        )
    answers = pd.read_csv(competition.answers_path, float_precision="round_trip")
    submission, _ = read_submission(submission_path)
    try:
        raw = competition.grader.score(
            submission, answers, competition.id_column, competition.target_columns
        )
    except (InvalidSubmissionError, ValueError) as exc:
        if isinstance(exc, CompetitionError):
            raise
        return CompetitionReport(**report, error=f"cannot score submission: {exc}")
    score = round(float(raw), SCORE_DECIMALS)
    report.update(score=score, valid_submission=True)
    if thresholds is not None:
        medals = rank_score(score, thresholds, lower_is_better)
        report.update(medals.model_dump(), any_medal=medals.any_medal)
    return CompetitionReport(**report)
