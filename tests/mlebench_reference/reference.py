"""Verbatim MLE-bench grading logic (see the package docstring for source and license)."""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import pandas as pd
from numpy import ndarray
from scipy.special import softmax
from sklearn import metrics
from sklearn.metrics import accuracy_score, cohen_kappa_score, log_loss, roc_auc_score, root_mean_squared_error


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


# ------------------------------------- mlebench/competitions/aptos2019-blindness-detection/grade.py


def grade_aptos2019(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    target_column = "diagnosis"
    if target_column not in submission.columns:
        raise InvalidSubmissionError(f"Submission must contain the target column '{target_column}'")
    assert target_column in answers.columns
    if submission.empty:
        raise InvalidSubmissionError("Submission DataFrame should not be empty")
    assert not answers.empty
    if set(submission["id_code"]) != set(answers["id_code"]):
        raise InvalidSubmissionError("Submission must have the same id_codes as answers")
    submission_sorted = submission.sort_values(by="id_code")
    answers_sorted = answers.sort_values(by="id_code")
    y_pred = submission_sorted[target_column].values
    y_true = answers_sorted[target_column].values
    return cohen_kappa_score(y_pred, y_true, weights="quadratic")


# ---------------------------------------- mlebench/competitions/denoising-dirty-documents/grade.py


def grade_denoising(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    assert "id" in answers.columns and "value" in answers.columns
    if "id" not in submission.columns:
        raise InvalidSubmissionError("Submission must have an 'id' column.")
    if "value" not in submission.columns:
        raise InvalidSubmissionError("Submission must have a 'value' column.")
    try:
        submission["value"].astype(float)
    except ValueError:
        raise InvalidSubmissionError("Submission must have float values in the 'value' column.")
    if len(submission) != len(answers):
        raise InvalidSubmissionError("Expected the submission to have as many rows as the answers.")
    submission_sorted = submission.sort_values(by="id").sort_index(axis=1)
    answers_sorted = answers.sort_values(by="id").sort_index(axis=1)
    if (submission_sorted["id"].values != answers_sorted["id"].values).any():
        raise InvalidSubmissionError("Expected the submission to have the same 'id' values as the answers.")
    return root_mean_squared_error(y_true=submission_sorted["value"], y_pred=answers_sorted["value"])


# ------------------------- mlebench/competitions/jigsaw-toxic-comment-classification-challenge/grade.py

JIGSAW_CLASSES = ["toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"]


def grade_jigsaw(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    classes_set = set(JIGSAW_CLASSES)
    if "id" not in submission.columns:
        raise InvalidSubmissionError("Submission is missing the column: id")
    if not classes_set.issubset(set(submission.columns)):
        raise InvalidSubmissionError("Submission is missing class columns")
    assert len(submission) == len(answers), "Submission and answers have different lengths"
    submission = submission.set_index("id").sort_index()
    answers = answers.set_index("id").sort_index()
    keep_mask = answers[JIGSAW_CLASSES].sum(axis=1) >= 0
    answers = answers[keep_mask]
    submission = submission[keep_mask]
    return roc_auc_score(y_score=submission.to_numpy(), y_true=answers.to_numpy(), average="macro")


# ------------------------------ mlebench/competitions/nomad2018-predict-transparent-conductors/grade.py


def grade_nomad2018(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    for column in ("formation_energy_ev_natom", "bandgap_energy_ev"):
        assert column in answers.columns
        if column not in submission.columns:
            raise InvalidSubmissionError(f"Expected '{column}' column in submission")
    if len(submission) != len(answers):
        raise InvalidSubmissionError(f"Expected {len(answers)} rows in submission, got {len(submission)}")
    return (
        metrics.root_mean_squared_log_error(answers["formation_energy_ev_natom"], submission["formation_energy_ev_natom"])
        + metrics.root_mean_squared_log_error(answers["bandgap_energy_ev"], submission["bandgap_energy_ev"])
    ) / 2


# ---------------------------------------- mlebench/competitions/plant-pathology-2020-fgvc7/grade.py


def grade_plant_pathology(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    expected = ["image_id", "healthy", "multiple_diseases", "rust", "scab"]
    assert set(answers.columns) == set(expected)
    if len(submission) != len(answers):
        raise InvalidSubmissionError(f"Expected submission to have {len(answers)} rows")
    if set(submission.columns) != set(expected):
        raise InvalidSubmissionError(f"Expected submission to have columns {expected}")
    submission_sorted = submission.sort_values(by="image_id").reset_index(drop=True)
    answers_sorted = answers.sort_values(by="image_id").reset_index(drop=True)
    if not all(submission_sorted["image_id"] == answers_sorted["image_id"]):
        raise InvalidSubmissionError("Submission and answers DataFrames must have matching 'image_id' columns.")
    return np.mean([roc_auc_score(y_true=answers_sorted[c], y_score=submission_sorted[c]) for c in expected[1:]])


# ------------------------------- mlebench/competitions/tabular-playground-series-dec-2021/grade.py


def grade_tabular_dec_2021(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    return accuracy_score(**prepare_for_accuracy_metric(submission, answers, target_column="Cover_Type", id_column="Id"))


# ------------------------ mlebench/competitions/text-normalization-challenge-english-language/grade.py


def grade_text_normalization(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    target_column, id_column = "after", "id"
    assert target_column in answers.columns and id_column in answers.columns
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
    submission[target_column] = submission[target_column].astype(str)
    answers[target_column] = answers[target_column].astype(str)
    return accuracy_score(y_pred=submission[target_column].to_numpy(), y_true=answers[target_column].to_numpy())


# ------------------------------------ mlebench/competitions/dogs-vs-cats-redux-kernels-edition/grade.py


def grade_dogs_vs_cats(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    if "id" not in submission.columns:
        raise InvalidSubmissionError("Submission is missing `id` column")
    if "label" not in submission.columns:
        raise InvalidSubmissionError("Submission is missing `label` column")
    if set(submission["id"]) != set(answers["id"]):
        raise InvalidSubmissionError("Submission and answers have different id's")
    if len(submission) != len(answers):
        raise InvalidSubmissionError("Submission and answers have different lengths")
    if not ((submission["label"] >= 0) & (submission["label"] <= 1)).all():
        raise InvalidSubmissionError("All values in submission `label` column must be between 0 and 1.")
    submission = submission.sort_values("id")
    answers = answers.sort_values("id")
    return log_loss(y_true=answers["label"], y_pred=submission["label"])


# ------------------------------------ mlebench/competitions/new-york-city-taxi-fare-prediction/grade.py


def grade_nyc_taxi(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    if "fare_amount" not in submission.columns:
        raise InvalidSubmissionError("Submission should have a fare_amount column")
    if "key" not in submission.columns:
        raise InvalidSubmissionError("Submission should have a key column")
    submission = submission.sort_values("key")
    answers = answers.sort_values("key")
    return root_mean_squared_error(answers["fare_amount"], submission["fare_amount"])


# ------------------------------- mlebench/competitions/detecting-insults-in-social-commentary/grade.py


def grade_detecting_insults(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    roc_auc_inputs = prepare_for_auroc_metric(submission=submission, answers=answers, id_col="Comment",
                                              target_col="Insult")
    return roc_auc_score(y_true=roc_auc_inputs["y_true"], y_score=roc_auc_inputs["y_score"])


def prepare_for_auroc_metric(submission: pd.DataFrame, answers: pd.DataFrame, id_col: str, target_col: str) -> dict:
    """mlebench/competitions/utils.py ``prepare_for_auroc_metric``."""
    assert id_col in answers.columns and target_col in answers.columns
    if id_col not in submission.columns:
        raise InvalidSubmissionError(f"Submission should have an {id_col} column")
    if target_col not in submission.columns:
        raise InvalidSubmissionError(f"Submission should have a {target_col} column")
    if len(submission) != len(answers):
        raise InvalidSubmissionError("Submission and answers should have the same number of rows")
    try:
        pd.to_numeric(submission[target_col])
    except ValueError:
        raise InvalidSubmissionError(f"Expected {target_col} column to be numeric")
    if submission[target_col].min() < 0 or submission[target_col].max() > 1:
        raise InvalidSubmissionError(f"Submission {target_col} column should contain probabilities")
    submission = submission.sort_values(id_col)
    answers = answers.sort_values(id_col)
    if (submission[id_col].values != answers[id_col].values).any():
        raise InvalidSubmissionError(f"Submission and answers should have the same {id_col} values")
    return {"y_true": answers[target_col].to_numpy(), "y_score": submission[target_col].to_numpy()}


GRADE_FUNCTIONS: dict[str, Callable[[pd.DataFrame, pd.DataFrame], float]] = {
    "dogs-vs-cats-redux-kernels-edition": grade_dogs_vs_cats,
    "new-york-city-taxi-fare-prediction": grade_nyc_taxi,
    "detecting-insults-in-social-commentary": grade_detecting_insults,
    "text-normalization-challenge-english-language": grade_text_normalization,
    "spaceship-titanic": grade_spaceship_titanic,
    "spooky-author-identification": grade_spooky_author_identification,
    "aptos2019-blindness-detection": grade_aptos2019,
    "denoising-dirty-documents": grade_denoising,
    "jigsaw-toxic-comment-classification-challenge": grade_jigsaw,
    "nomad2018-predict-transparent-conductors": grade_nomad2018,
    "plant-pathology-2020-fgvc7": grade_plant_pathology,
    "tabular-playground-series-dec-2021": grade_tabular_dec_2021,
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


# ------------------------------------- mlebench/grade_helpers.py Grader.is_lower_better, rank_score


def mlebench_rank_score(score: Optional[float], leaderboard: pd.DataFrame) -> dict:
    """``Grader.rank_score`` (with ``Grader.is_lower_better``), verbatim but for the method form."""
    assert "score" in leaderboard.columns, "Leaderboard must have a `score` column."
    scores = leaderboard["score"]
    lower_is_better = bool(scores.iloc[0] < scores.iloc[-1])
    num_teams = len(leaderboard)

    def get_score_at_position(position: int) -> float:
        if position - 1 >= len(scores) or position < 1:
            raise IndexError("Position out of bounds in the leaderboard.")
        return scores.iloc[position - 1]

    def get_thresholds(num_teams: int) -> tuple[float, float, float, float]:
        if 1 <= num_teams < 100:
            gold_threshold = get_score_at_position(max(1, int(num_teams * 0.1)))
            silver_threshold = get_score_at_position(max(1, int(num_teams * 0.2)))
            bronze_threshold = get_score_at_position(max(1, int(num_teams * 0.4)))
        elif 100 <= num_teams < 250:
            gold_threshold = get_score_at_position(10)
            silver_threshold = get_score_at_position(max(1, int(num_teams * 0.2)))
            bronze_threshold = get_score_at_position(max(1, int(num_teams * 0.4)))
        elif 250 <= num_teams < 1000:
            gold_threshold = get_score_at_position(10 + int(num_teams * 0.002))
            silver_threshold = get_score_at_position(50)
            bronze_threshold = get_score_at_position(100)
        elif num_teams >= 1000:
            gold_threshold = get_score_at_position(10 + int(num_teams * 0.002))
            silver_threshold = get_score_at_position(max(1, int(num_teams * 0.05)))
            bronze_threshold = get_score_at_position(max(1, int(num_teams * 0.1)))
        else:
            raise ValueError("Number of teams in leaderboard must be greater than 0.")
        median_threshold = scores.median()
        return (float(gold_threshold), float(silver_threshold), float(bronze_threshold), float(median_threshold))

    gold_threshold, silver_threshold, bronze_threshold, median_threshold = get_thresholds(num_teams)
    if score is None:
        return {"gold_medal": False, "silver_medal": False, "bronze_medal": False, "above_median": False,
                "gold_threshold": gold_threshold, "silver_threshold": silver_threshold,
                "bronze_threshold": bronze_threshold, "median_threshold": median_threshold,
                "is_lower_better": lower_is_better}
    gold_medal = score <= gold_threshold if lower_is_better else score >= gold_threshold
    silver_medal = not gold_medal and (score <= silver_threshold if lower_is_better else score >= silver_threshold)
    bronze_medal = (not gold_medal and not silver_medal
                    and (score <= bronze_threshold if lower_is_better else score >= bronze_threshold))
    above_median = score < median_threshold if lower_is_better else score > median_threshold
    return {"gold_medal": gold_medal, "silver_medal": silver_medal, "bronze_medal": bronze_medal,
            "above_median": above_median, "gold_threshold": gold_threshold, "silver_threshold": silver_threshold,
            "bronze_threshold": bronze_threshold, "median_threshold": median_threshold,
            "is_lower_better": lower_is_better}
