"""Submission validation and grading on real prepared competitions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn import metrics

from swarm_evo.competition import (
    CompetitionReport,
    grade_submission,
    load_competition,
    prepare_competition,
    validate_submission,
)

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("data")
    prepare_competition("spaceship-titanic", SHARED_DATA / "spaceship-titanic" / "raw", d)
    prepare_competition(
        "spooky-author-identification", SHARED_DATA / "spooky-author-identification" / "raw", d
    )
    return d


@pytest.fixture(scope="module")
def spaceship(data_dir):
    return load_competition("spaceship-titanic", data_dir)


@pytest.fixture(scope="module")
def spooky(data_dir):
    return load_competition("spooky-author-identification", data_dir)


def write(tmp_path: Path, frame: pd.DataFrame) -> Path:
    path = tmp_path / "submission.csv"
    frame.to_csv(path, index=False)
    return path


def test_sample_submission_is_valid_and_scores_like_sklearn(spaceship, tmp_path):
    sample = pd.read_csv(spaceship.sample_submission_path)
    path = write(tmp_path, sample.sample(frac=1.0, random_state=1))  # order is free
    assert validate_submission(path, spaceship) == []
    report = grade_submission(path, spaceship)
    answers = pd.read_csv(spaceship.answers_path)
    expected = metrics.accuracy_score(answers["Transported"], np.zeros(len(answers), bool))
    assert report.valid_submission and report.submission_exists and report.error is None
    assert report.score == pytest.approx(round(expected, 5))
    assert report.gold_threshold is None and not report.any_medal and not report.above_median
    data = json.loads(json.dumps(report.to_dict()))
    assert data["competition_id"] == "spaceship-titanic" and data["is_lower_better"] is False
    assert isinstance(data["created_at"], str)
    assert set(data) >= set(CompetitionReport.model_fields) - {"error"}


def test_string_booleans_score_as_booleans(spaceship, tmp_path):
    answers = pd.read_csv(spaceship.answers_path)
    sub = answers[["PassengerId", "Transported"]].copy()
    sub["Transported"] = sub["Transported"].map({True: "TRUE", False: "false"})
    report = grade_submission(write(tmp_path, sub), spaceship)
    assert report.score == 1.0


def test_format_errors_are_clear(spaceship, tmp_path):
    sample = pd.read_csv(spaceship.sample_submission_path)
    wrong_cols = sample.rename(columns={"Transported": "transported"})
    errs = validate_submission(write(tmp_path, wrong_cols), spaceship)
    assert any("missing column(s) ['Transported']" in e for e in errs)
    # an extra column is ignored, as MLE-bench's accuracy grader ignores it
    assert validate_submission(write(tmp_path, sample.assign(Extra=1)), spaceship) == []

    errs = validate_submission(write(tmp_path, sample.iloc[:-3]), spaceship)
    assert any(f"has {len(sample) - 3} rows but the sample submission has {len(sample)}" in e for e in errs)
    assert any("3 id(s) of the sample submission are missing" in e for e in errs)

    with_nan = sample.astype({"Transported": object})
    with_nan.loc[0, "Transported"] = None
    errs = validate_submission(write(tmp_path, with_nan), spaceship)
    assert errs == ["column 'Transported' has 1 missing (NaN/empty) value(s)"]

    other_ids = sample.copy()
    other_ids.loc[0, "PassengerId"] = "9999_99"
    errs = validate_submission(write(tmp_path, other_ids), spaceship)
    assert any("'9999_99'" in e and "not in the sample" in e for e in errs)

    errs = validate_submission(tmp_path / "absent.csv", spaceship)
    assert errs and "not found" in errs[0]


def test_grade_never_raises_on_bad_submission(spaceship, tmp_path):
    report = grade_submission(tmp_path / "absent.csv", spaceship)
    assert not report.submission_exists and not report.valid_submission
    assert report.score is None and "not found" in report.error
    bad = tmp_path / "bad.csv"
    bad.write_text("PassengerId\n")
    report = grade_submission(bad, spaceship)
    assert report.submission_exists and not report.valid_submission and report.error


def test_spooky_probabilities_checked_and_scored(spooky, tmp_path):
    sample = pd.read_csv(spooky.sample_submission_path)
    bad = sample.copy()
    bad.loc[3, "EAP"] = 0.9
    errs = validate_submission(write(tmp_path, bad), spooky)
    assert len(errs) == 1 and "do not sum to 1" in errs[0] and "row 3" in errs[0]
    report = grade_submission(write(tmp_path, bad), spooky)
    assert not report.valid_submission and report.score is None

    report = grade_submission(write(tmp_path, sample), spooky)
    assert report.valid_submission and report.is_lower_better
    assert report.score == pytest.approx(round(np.log(3), 5))


def test_leaderboard_gives_thresholds_and_medals(spaceship, tmp_path, data_dir):
    board = data_dir / "spaceship-titanic" / "leaderboard.csv"
    pd.DataFrame({"teamName": [f"t{i}" for i in range(20)], "score": np.linspace(0.95, 0.5, 20)}).to_csv(
        board, index=False
    )
    try:
        comp = load_competition("spaceship-titanic", data_dir)
        assert comp.leaderboard_path == board
        answers = pd.read_csv(comp.answers_path)
        perfect = write(tmp_path, answers[["PassengerId", "Transported"]])
        report = grade_submission(perfect, comp)
        # 20 teams (< 100): gold = position 2, silver = position 4, bronze = position 8
        assert report.gold_threshold == pytest.approx(np.linspace(0.95, 0.5, 20)[1])
        assert report.gold_medal and report.any_medal and report.above_median
        sample = write(tmp_path, pd.read_csv(comp.sample_submission_path))
        report = grade_submission(sample, comp)
        assert not report.any_medal and not report.above_median
    finally:
        board.unlink()
