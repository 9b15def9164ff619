"""Graders on hand-computable inputs, compared with sklearn.metrics and by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn import metrics

from swarm_evo.competition import (
    GRADERS,
    CompetitionError,
    InvalidSubmissionError,
    get_grader,
)

REQUIRED = [
    "accuracy",
    "auc-roc",
    "log-loss",
    "multi-class-log-loss",
    "root-mean-squared-error",
    "root-mean-squared-log-error",
    "mean-absolute-error",
    "micro-f1-score",
    "macro-f1-score",
]


def frame(ids, **cols) -> pd.DataFrame:
    return pd.DataFrame({"id": ids, **cols})


def test_required_graders_exist_with_direction():
    for name in REQUIRED:
        assert GRADERS[name].name == name
    lower = {n for n in REQUIRED if GRADERS[n].is_lower_better}
    assert lower == {
        "log-loss",
        "multi-class-log-loss",
        "root-mean-squared-error",
        "root-mean-squared-log-error",
        "mean-absolute-error",
    }


def test_unknown_grader_lists_known_names():
    with pytest.raises(CompetitionError) as err:
        get_grader("bogus-metric")
    assert "bogus-metric" in str(err.value) and "accuracy" in str(err.value)


def test_accuracy_normalises_booleans_and_aligns_by_id():
    answers = frame([1, 2, 3, 4], y=[True, False, True, False])
    # shuffled order and mixed spellings of booleans
    sub = frame([4, 3, 2, 1], y=["FALSE", "True", "true", False])
    score = get_grader("accuracy").score(sub, answers, "id", ["y"])
    # aligned by id: predictions for ids 1..4 are False, True, True, False -> ids 1, 2 wrong
    assert score == pytest.approx(0.5)
    assert score == metrics.accuracy_score([1, 0, 1, 0], [0, 1, 1, 0])


def test_accuracy_integral_floats_equal_ints():
    answers = frame(["a", "b"], y=[1, 2])
    sub = frame(["a", "b"], y=[1.0, 3.0])
    assert get_grader("accuracy").score(sub, answers, "id", ["y"]) == 0.5


def test_f1_micro_and_macro_match_sklearn():
    y_true = ["a", "b", "c", "a", "b", "c"]
    y_pred = ["a", "c", "b", "a", "a", "c"]
    answers, sub = frame(range(6), y=y_true), frame(range(6), y=y_pred)
    micro = get_grader("micro-f1-score").score(sub, answers, "id", ["y"])
    macro = get_grader("macro-f1-score").score(sub, answers, "id", ["y"])
    assert micro == pytest.approx(metrics.f1_score(y_true, y_pred, average="micro"))
    assert micro == pytest.approx(3 / 6)
    assert macro == pytest.approx(metrics.f1_score(y_true, y_pred, average="macro"))
    # by hand: F1(a)=2*(2/3*1)/(2/3+1)=0.8, F1(b)=0, F1(c)=0.5
    assert macro == pytest.approx((0.8 + 0 + 0.5) / 3)


def test_auc_roc_matches_hand_value():
    answers = frame(range(4), y=[0, 0, 1, 1])
    sub = frame(range(4), y=[0.1, 0.4, 0.35, 0.8])
    score = get_grader("auc-roc").score(sub, answers, "id", ["y"])
    assert score == pytest.approx(0.75)
    assert score == pytest.approx(metrics.roc_auc_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]))


def test_binary_log_loss_accepts_boolean_answers():
    answers = frame(range(2), y=[True, False])
    sub = frame(range(2), y=[0.8, 0.4])
    score = get_grader("log-loss").score(sub, answers, "id", ["y"])
    assert score == pytest.approx(-(math.log(0.8) + math.log(0.6)) / 2)


def test_multiclass_log_loss_one_hot_and_label_answers():
    classes = ["A", "B", "C"]
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    sub = pd.DataFrame({"id": [10, 11], **dict(zip(classes, probs.T))})
    onehot = pd.DataFrame({"id": [11, 10], "A": [0, 1], "B": [0, 0], "C": [1, 0]})
    labels = pd.DataFrame({"id": [10, 11], "author": ["A", "C"]})
    expected = -(math.log(0.7) + math.log(0.8)) / 2
    g = get_grader("multi-class-log-loss")
    assert g.score(sub, onehot, "id", classes) == pytest.approx(expected)
    assert g.score(sub, labels, "id", classes) == pytest.approx(expected)
    assert expected == pytest.approx(metrics.log_loss(["A", "C"], probs, labels=classes))


def test_multiclass_log_loss_takes_probabilities_as_they_are_like_mlebench():
    """No clipping at 1e-15 or renormalising of our own (MLE-bench passes the rows to
    scikit-learn, which clips at machine epsilon): a confident wrong row costs -log(eps)."""
    classes = ["A", "B"]
    sub = pd.DataFrame({"id": [1], "A": [0.0], "B": [1.0]})
    answers = pd.DataFrame({"id": [1], "A": [1], "B": [0]})
    score = get_grader("multi-class-log-loss").score(sub, answers, "id", classes)
    assert score == pytest.approx(-math.log(np.finfo(float).eps))
    assert score == pytest.approx(metrics.log_loss([[1, 0]], [[0.0, 1.0]]))


def test_regression_metrics_match_sklearn():
    y_true = [3.0, 5.0, 2.5, 7.0]
    y_pred = [2.5, 5.0, 4.0, 8.0]
    answers, sub = frame(range(4), y=y_true), frame(range(4), y=y_pred)
    rmse = get_grader("root-mean-squared-error").score(sub, answers, "id", ["y"])
    assert rmse == pytest.approx(math.sqrt((0.25 + 0 + 2.25 + 1) / 4))
    mae = get_grader("mean-absolute-error").score(sub, answers, "id", ["y"])
    assert mae == pytest.approx((0.5 + 0 + 1.5 + 1) / 4)
    rmsle = get_grader("root-mean-squared-log-error").score(sub, answers, "id", ["y"])
    assert rmsle == pytest.approx(metrics.root_mean_squared_log_error(y_true, y_pred))
    by_hand = math.sqrt(np.mean((np.log1p(y_pred) - np.log1p(y_true)) ** 2))
    assert rmsle == pytest.approx(by_hand)


def test_regression_multi_target_averages_over_columns():
    answers = frame(range(2), a=[0.0, 0.0], b=[0.0, 0.0])
    sub = frame(range(2), a=[1.0, 1.0], b=[3.0, 3.0])
    rmse = get_grader("root-mean-squared-error").score(sub, answers, "id", ["a", "b"])
    assert rmse == pytest.approx((1.0 + 3.0) / 2)


def test_score_rejects_ids_not_matching_answers():
    answers = frame([1, 2], y=[1, 0])
    sub = frame([1, 3], y=[1, 0])
    with pytest.raises(InvalidSubmissionError, match="1 missing, 1 unexpected"):
        get_grader("accuracy").score(sub, answers, "id", ["y"])


SAMPLE = pd.DataFrame({"id": [1, 2], "A": [0.5, 0.5], "B": [0.5, 0.5]})


def test_check_format_rows_must_sum_to_one():
    sub = pd.DataFrame({"id": [1, 2], "A": [0.5, 0.7], "B": [0.5, 0.5]})
    with pytest.raises(InvalidSubmissionError) as err:
        get_grader("multi-class-log-loss").check_format(sub, SAMPLE, "id", ["A", "B"])
    assert "do not sum to 1" in str(err.value) and "row 1 sums to 1.2" in str(err.value)


def test_check_format_row_sums_use_mlebenchs_tolerance():
    """np.isclose(sum, 1, atol=1e-6): 1 + 5e-6 passes, rows rounded to 4 decimals (1.0004) fail."""
    grader = get_grader("multi-class-log-loss")
    grader.check_format(pd.DataFrame({"id": [1, 2], "A": [0.5, 0.500005], "B": [0.5, 0.5]}), SAMPLE, "id", ["A", "B"])
    with pytest.raises(InvalidSubmissionError, match="row 1 sums to 1.0004"):
        grader.check_format(pd.DataFrame({"id": [1, 2], "A": [0.5, 0.5004], "B": [0.5, 0.5]}), SAMPLE, "id", ["A", "B"])


def test_boolean_answers_read_1_0_as_booleans_and_reject_other_labels():
    answers = frame(range(4), y=[True, False, True, True])
    sample = frame(range(4), y=[False] * 4)
    accuracy = get_grader("accuracy")
    for labels in ([1, 0, 1, 1], [1.0, 0.0, 1.0, 1.0], ["true", "FALSE", "True", "1"]):
        sub = frame(range(4), y=labels)
        accuracy.check_format(sub, sample, "id", ["y"])
        assert accuracy.score(sub, answers, "id", ["y"]) == 1.0
    bad = frame(range(4), y=["yes", "no", "yes", 2])
    for check in (lambda: accuracy.check_format(bad, sample, "id", ["y"]),
                  lambda: accuracy.score(bad, answers, "id", ["y"])):
        with pytest.raises(InvalidSubmissionError, match=r"label\(s\) \['2', 'no', 'yes'\] outside the answers' labels"):
            check()


def test_extra_columns_are_ignored_except_for_multiclass_log_loss():
    sample = frame(range(2), y=[0.5, 0.5])
    get_grader("auc-roc").check_format(frame(range(2), y=[0.1, 0.9]).assign(note="x"), sample, "id", ["y"])
    with pytest.raises(InvalidSubmissionError, match=r"unexpected column\(s\) \['note'\]"):
        get_grader("multi-class-log-loss").check_format(
            pd.DataFrame({"id": [1, 2], "A": [0.5, 0.5], "B": [0.5, 0.5], "note": ["x", "y"]}), SAMPLE, "id", ["A", "B"])


def test_check_format_probabilities_in_unit_interval():
    sample = pd.DataFrame({"id": [1, 2], "y": [0.5, 0.5]})
    sub = pd.DataFrame({"id": [1, 2], "y": [1.5, -0.1]})
    with pytest.raises(InvalidSubmissionError, match=r"2 value\(s\) outside \[0, 1\]"):
        get_grader("auc-roc").check_format(sub, sample, "id", ["y"])


def test_check_format_non_numeric_and_negative_rmsle():
    sample = pd.DataFrame({"id": [1, 2], "y": [1.0, 1.0]})
    with pytest.raises(InvalidSubmissionError, match="non-numeric value"):
        get_grader("root-mean-squared-error").check_format(
            pd.DataFrame({"id": [1, 2], "y": ["x", 1.0]}), sample, "id", ["y"]
        )
    with pytest.raises(InvalidSubmissionError, match="negative value"):
        get_grader("root-mean-squared-log-error").check_format(
            pd.DataFrame({"id": [1, 2], "y": [-3.0, 1.0]}), sample, "id", ["y"]
        )


def test_check_format_structure_messages():
    sample = pd.DataFrame({"id": [1, 2, 3], "y": [0, 0, 0]})
    g = get_grader("accuracy")
    with pytest.raises(InvalidSubmissionError, match=r"missing column\(s\) \['y'\]"):
        g.check_format(pd.DataFrame({"id": [1, 2, 3], "z": [0, 1, 0]}), sample, "id", ["y"])
    with pytest.raises(InvalidSubmissionError, match="2 rows but the sample submission has 3"):
        g.check_format(pd.DataFrame({"id": [1, 2], "y": [0, 1]}), sample, "id", ["y"])
    with pytest.raises(InvalidSubmissionError, match=r"column 'y' has 1 missing \(NaN/empty\) value"):
        g.check_format(pd.DataFrame({"id": [1, 2, 3], "y": [0, None, 1]}), sample, "id", ["y"])


def test_scikit_learn_is_imported_when_a_grader_first_scores_not_before():
    """The competition package and the objectives import no scikit-learn (≈ 0.7 s of CPU with
    SciPy): a process that grades nothing (a problem's run, ``swarm-evo pool setup``) never pays
    it; a grader's first :attr:`~swarm_evo.competition.Grader.metric` imports it, and the
    grader's metric is the ``sklearn.metrics`` function of its name."""
    import subprocess
    import sys

    script = ("import sys\nimport swarm_evo.competition as c, swarm_evo.objective.load\n"
              "print('sklearn' in sys.modules, 'scipy' in sys.modules)\n"
              "g = c.get_grader('multi-class-log-loss')\n"
              "print(g.facts()['metric'], 'sklearn' in sys.modules)\n"
              "print(g.metric.__module__, 'sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.splitlines() == ["False False", "log_loss False", "sklearn.metrics._classification True"]
    assert get_grader("quadratic-weighted-kappa").metric is metrics.cohen_kappa_score
