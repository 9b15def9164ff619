"""Verbatim MLE-bench grading logic (see the package docstring for source and license)."""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import pandas as pd
from numpy import ndarray
from scipy.special import softmax
from sklearn.metrics import accuracy_score, log_loss


class InvalidSubmissionError(Exception):
    """mlebench.grade_helpers.InvalidSubmissionError."""


# ------------------------------------------------------------ mlebench/competitions/utils.py


def one_hot_dfs_to_log_loss_inputs(
    submission_one_hot: pd.DataFrame,
    answers_one_hot: pd.DataFrame,
    id_column: str = "id",
    apply_softmax: bool = True,
) -> dict:
    required_cols = set(answers_one_hot.columns)
    submission_cols = set(submission_one_hot.columns)

    if not submission_cols.issuperset(required_cols):
        raise InvalidSubmissionError(
            f"The submission DataFrame is missing some columns required by the `answers` DataFrame. "
            f"Missing columns: {required_cols - submission_cols}."
        )
    if id_column not in submission_one_hot.columns:
        raise InvalidSubmissionError(f"Submission is missing id column '{id_column}'.")

    assert id_column in answers_one_hot.columns, f"Answers is missing id column '{id_column}'."

    submission_filtered = submission_one_hot[
        [col for col in answers_one_hot.columns if col in submission_cols]
    ]

    submission_sorted = submission_filtered.sort_values(by=id_column).reset_index(drop=True)
    answers_sorted = answers_one_hot.sort_values(by=id_column).reset_index(drop=True)

    assert submission_sorted[id_column].tolist() == answers_sorted[id_column].tolist(), (
        f"Mismatch in {id_column.capitalize()}s between `submission` and `answers` after sorting."
    )

    assert list(submission_sorted.columns) == list(answers_sorted.columns), (
        "Column order mismatch after filtering and sorting."
    )

    y_true = answers_sorted.drop(columns=[id_column]).to_numpy()
    y_pred = submission_sorted.drop(columns=[id_column]).to_numpy()

    if apply_softmax and not is_one_hot_encoded(y_pred):
        y_pred = softmax(y_pred, axis=-1)

    return {"y_true": y_true, "y_pred": y_pred}


def is_one_hot_encoded(xs: ndarray) -> bool:
    assert isinstance(xs, ndarray), f"Expected a NumPy array, got {type(xs)}."
    assert xs.ndim == 2, f"Expected a 2D array, got {xs.ndim}D."

    is_binary_matrix = np.bitwise_or(xs == 0, xs == 1).all()
    is_normalized = np.allclose(xs.sum(axis=-1), 1)
    return bool(is_binary_matrix and is_normalized)


def prepare_for_accuracy_metric(
    submission: pd.DataFrame,
    answers: pd.DataFrame,
    target_column: str,
    id_column: str,
) -> dict:
    assert target_column in answers.columns, f"Answers must have a `{target_column}` column"
    assert id_column in answers.columns, f"Answers must have a `{id_column}` column"

    if len(submission) != len(answers):
        raise InvalidSubmissionError("Submission must have the same length as the answers.")
    if target_column not in submission.columns:
        raise InvalidSubmissionError(f"Submission must have a `{target_column}` column")
    if id_column not in submission.columns:
        raise InvalidSubmissionError(f"Submission must have a `{id_column}` column")

    submission = submission.sort_values(id_column)
    answers = answers.sort_values(id_column)

    if (submission[id_column].values != answers[id_column].values).any():
        raise InvalidSubmissionError(f"Submission and Answers `{id_column}`'s do not match")

    y_pred = submission[target_column].to_numpy()
    y_true = answers[target_column].to_numpy()

    return {"y_true": y_true, "y_pred": y_pred}


# ---------------------------------------------- mlebench/competitions/spaceship-titanic/grade.py


def grade_spaceship_titanic(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    accuracy_inputs = prepare_for_accuracy_metric(
        submission=submission, answers=answers, target_column="Transported", id_column="PassengerId"
    )
    return accuracy_score(**accuracy_inputs)


# ------------------------------------ mlebench/competitions/spooky-author-identification/grade.py

SPOOKY_CLASSES = ["EAP", "HPL", "MWS"]
SPOOKY_TOLERANCE = 1e-6


def _spooky_prepare_for_metric(submission: pd.DataFrame, answers: pd.DataFrame) -> dict:
    id_col = "id"

    if submission.shape != (len(answers), len(SPOOKY_CLASSES) + 1):
        raise InvalidSubmissionError(
            f"Submission shape {submission.shape} does not match answers shape {answers.shape}."
        )

    if not np.all(np.isclose(submission.iloc[:, 1:].sum(axis=1), 1, atol=SPOOKY_TOLERANCE)):
        raise InvalidSubmissionError("Each row in submission should sum to one, as probabilities.")
    if not ((submission.iloc[:, 1:] >= 0) & (submission.iloc[:, 1:] <= 1)).all().all():
        raise InvalidSubmissionError(
            "All probabilities in submission DataFrame must be between 0 and 1."
        )

    return one_hot_dfs_to_log_loss_inputs(submission, answers, id_column=id_col, apply_softmax=False)


def grade_spooky_author_identification(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    log_loss_inputs = _spooky_prepare_for_metric(submission, answers)
    return log_loss(**log_loss_inputs)


GRADE_FUNCTIONS: dict[str, Callable[[pd.DataFrame, pd.DataFrame], float]] = {
    "spaceship-titanic": grade_spaceship_titanic,
    "spooky-author-identification": grade_spooky_author_identification,
}


# ---------------------------------------------------- mlebench/grade_helpers.py Grader.__call__


def mlebench_score(competition_id: str, submission: pd.DataFrame, answers: pd.DataFrame) -> Optional[float]:
    """What MLE-bench reports for ``submission``: None when invalid, else the score rounded to
    5 decimals (``Grader.__call__``: InvalidSubmissionError and any other exception -> None)."""
    try:
        score = GRADE_FUNCTIONS[competition_id](submission, answers)
    except Exception:  # noqa: BLE001 - exactly as MLE-bench's Grader.__call__
        return None
    return round(score, 5)


# -------------------------------------------- mlebench/grade_helpers.py CompetitionReport.from_dict


def competition_report_from_dict(data: dict) -> dict:
    """``CompetitionReport.from_dict``'s typed fields (the dataclass itself only stores them):
    raises exactly where MLE-bench's would (``float(None)`` for an absent threshold, a missing
    key, a bad ``created_at``)."""
    from datetime import datetime

    data = data.copy()
    return {
        "competition_id": data["competition_id"],
        "score": float(data["score"]) if data["score"] is not None else None,
        "gold_threshold": float(data["gold_threshold"]),
        "silver_threshold": float(data["silver_threshold"]),
        "bronze_threshold": float(data["bronze_threshold"]),
        "median_threshold": float(data["median_threshold"]),
        "any_medal": bool(data["any_medal"]),
        "gold_medal": bool(data["gold_medal"]),
        "silver_medal": bool(data["silver_medal"]),
        "bronze_medal": bool(data["bronze_medal"]),
        "above_median": bool(data["above_median"]),
        "submission_exists": bool(data["submission_exists"]),
        "valid_submission": bool(data["valid_submission"]),
        "is_lower_better": bool(data["is_lower_better"]),
        "created_at": datetime.fromisoformat(data["created_at"]),
        "submission_path": data["submission_path"],
    }
