"""Competitions: MLE-bench layout, built-in recipes, graders, validation and grading (SPEC §4).

Public API (other modules import exactly these names):
``CompetitionError``, ``InvalidSubmissionError``, ``Grader``, ``GRADERS``, ``get_grader``,
``Competition``, ``load_competition``, ``BUILTIN_COMPETITIONS``, ``prepare_competition``,
``validate_submission``, ``CompetitionReport``, ``grade_submission``.
No Prefect imports here: flows/tasks wrap these functions.

May import: sandbox (``safe_read``; ``output`` to write a submission back: the hidden split).

The hidden validation split (issue 41): ``hidden_layout`` (which layouts allow one), ``hidden_split``
(the split and the run's view of the public data), ``hidden_grading`` (``HiddenGrader``).
"""

from .builtins import BUILTIN_COMPETITIONS, BuiltinSpec
from .errors import CompetitionError, InvalidSubmissionError
from .graders import GRADERS, Grader, get_grader
from .grading import CompetitionReport, grade_submission
from .leaderboard import MedalThresholds, medal_positions, medal_thresholds
from .loader import load_competition
from .model import Competition
from .prepare import prepare_competition
from .submission import validate_submission

__all__ = [
    "BUILTIN_COMPETITIONS",
    "BuiltinSpec",
    "Competition",
    "CompetitionError",
    "CompetitionReport",
    "GRADERS",
    "Grader",
    "InvalidSubmissionError",
    "MedalThresholds",
    "get_grader",
    "grade_submission",
    "load_competition",
    "medal_positions",
    "medal_thresholds",
    "prepare_competition",
    "validate_submission",
]
