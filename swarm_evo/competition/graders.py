"""Graders: one metric each, named as in MLE-bench's ``config.yaml`` (``grader.name``).

A grader fixes the metric, its direction and the value checks of a submission. Scores are
computed with ``sklearn.metrics`` only. Every grader works on tables with an id column and
one or more target columns (the sample submission's header); rows are aligned by id.

Kinds of graders:
- ``label`` (accuracy, micro/macro F1): text labels (the answers' column holds strings) are
  compared as exact strings, as MLE-bench's ``astype(str)`` (text-normalization's exact match:
  no stripping or case folding); numeric and boolean labels after ``checks.normalise_label``
  (True/"True"/"TRUE" are equal; 1.0 equals 1), in the answers' label space: when the answers
  (and the sample submission) are booleans, 1/0 and 1.0/0.0 are read as True/False, as MLE-bench's ``accuracy_score`` on a boolean ``y_true`` compares them,
  and any other label ("yes") is rejected, naming it (MLE-bench's scikit-learn call fails on
  mixed label types: invalid there too).
- ``probability`` (auc-roc, binary log-loss): each target column is P(label is positive);
  values must be numbers in [0, 1] (MLE-bench's ``prepare_for_auroc_metric`` and
  dogs-vs-cats' checks); answers are 0/1 or booleans; scored as given (no clipping of our own).
- ``multiclass_probability`` (multi-class-log-loss): exactly one column per class besides the
  id (no extra column), values in [0, 1], rows summing to 1 as MLE-bench checks it
  (``np.isclose(sum, 1, atol=1e-6)``, spooky-author-identification's ``grade.py``); the
  probabilities go to ``sklearn.metrics.log_loss`` as they are (no clipping or renormalising
  of our own: scikit-learn clips at machine epsilon). Answers are one-hot over the same
  columns, or a single label column.
- ``ordinal`` (quadratic-weighted-kappa): integer grades, ``sklearn.metrics.cohen_kappa_score(
  y_pred, y_true, weights="quadratic")`` as aptos2019-blindness-detection's ``grade.py``.
- ``regression`` (RMSE, RMSLE, MAE): numeric targets; RMSLE needs non-negative values.
- The column-wise ROC AUC (jigsaw-toxic-comment-classification-challenge,
  plant-pathology-2020-fgvc7) is the ``probability`` kind over several columns, averaged, and
  skips answer rows marked -1 in every column (jigsaw's unscored test rows), as MLE-bench does.
With several target columns, the metric is averaged over columns (sklearn's
``multioutput="uniform_average"`` for regression; per-column mean otherwise). Columns besides
the id and the targets are ignored, as MLE-bench's graders ignore them, except for
multi-class log loss (MLE-bench checks the submission's shape there).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Literal

import numpy as np
import pandas as pd

from .checks import (
    BOOLEAN_SPELLINGS,
    boolean_label_errors,
    is_boolean_labels,
    normalise_ids,
    normalise_label,
    numeric_frame,
    structure_errors,
)
from .errors import CompetitionError, InvalidSubmissionError



@dataclass(frozen=True)
class KindTraits:
    """What other modules may ask of a grader kind: they read these, never a kind's name, so a
    new kind is written in this module alone (issue 55, item 4).

    Attributes:
        classification: the targets are classes (a hidden split stratifies on them).
        probabilities: the submission holds probabilities in [0, 1].
        one_column_per_class: one probability column per class, each row summing to 1.
    """

    classification: bool
    probabilities: bool = False
    one_column_per_class: bool = False

    @property
    def positive_class(self) -> bool:
        """Each target column is P(positive class), its answers 0/1."""
        return self.probabilities and not self.one_column_per_class


KINDS: dict[str, KindTraits] = {  # the grader kinds (module docstring) and their traits
    "label": KindTraits(classification=True), "ordinal": KindTraits(classification=True),
    "probability": KindTraits(classification=True, probabilities=True),
    "multiclass_probability": KindTraits(classification=True, probabilities=True, one_column_per_class=True),
    "regression": KindTraits(classification=False),
}
GraderKind = Literal[tuple(KINDS)]  # type: ignore[valid-type]  # a key of KINDS

ROW_SUM_ATOL = 1e-6
"""``np.isclose(row_sum, 1, atol=ROW_SUM_ATOL)`` (default rtol 1e-5): MLE-bench's tolerance
for rows of class probabilities (spooky-author-identification ``grade.py``)."""


@dataclass(frozen=True)
class Grader:
    """A metric with direction and submission checks.

    Attributes:
        name: MLE-bench grader name, e.g. ``"accuracy"``.
        is_lower_better: True for losses/errors.
        kind: how targets are interpreted (see module docstring).
        metric_name: the ``sklearn.metrics`` function's name; :attr:`metric` is the function
            ``(y_true, y_pred, **kw) -> float``, imported on first use: a process that grades
            nothing (a problem's run, ``swarm-evo pool setup``) never imports scikit-learn and
            SciPy (importing ``flows.two_phase_evo``: 4.6 -> 3.9 s of CPU, median of 5).
        metric_kwargs: extra keyword arguments for ``metric`` (e.g. ``average="macro"``).
        non_negative: predictions must be >= 0 (RMSLE).
        skip_marked_rows: answer rows whose targets sum below 0 (marked -1) are not scored
            (jigsaw's ``grade.py``).
    """

    name: str
    is_lower_better: bool
    kind: GraderKind
    metric_name: str
    metric_kwargs: tuple[tuple[str, object], ...] = ()
    non_negative: bool = False
    skip_marked_rows: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"grader {self.name!r}: unknown kind {self.kind!r}; use one of {', '.join(KINDS)}")

    @property
    def traits(self) -> KindTraits:
        """What its kind's targets and submissions are (:data:`KINDS`)."""
        return KINDS[self.kind]

    def facts(self) -> dict[str, Any]:
        """What a program writer is told of this grader (the offline model's CTX ``competition``,
        docs/CONTRACTS.md): ``grader`` (its name), ``grader_kind`` (:data:`GraderKind`), its
        kind's traits (``classification``, ``probabilities``, ``one_column_per_class``:
        :class:`KindTraits`), ``is_lower_better``, ``metric`` (the ``sklearn.metrics`` function's
        name), ``metric_kwargs`` (its keyword arguments, JSON values) and ``non_negative``."""
        traits = self.traits
        return {"grader": self.name, "grader_kind": self.kind, "classification": traits.classification,
                "probabilities": traits.probabilities, "one_column_per_class": traits.one_column_per_class,
                "is_lower_better": self.is_lower_better, "metric": self.metric_name,
                "metric_kwargs": dict(self.metric_kwargs), "non_negative": self.non_negative}

    @property
    def metric(self) -> Callable[..., float]:
        """The ``sklearn.metrics`` function :attr:`metric_name`."""
        from sklearn import metrics

        return getattr(metrics, self.metric_name)

    # ------------------------------------------------------------------ checks
    def check_format(
        self,
        submission: pd.DataFrame,
        sample_submission: pd.DataFrame,
        id_column: str,
        target_columns: list[str],
    ) -> None:
        """Raise ``InvalidSubmissionError`` if ``submission`` cannot be graded.

        ``submission`` and ``sample_submission`` are DataFrames with columns
        ``[id_column, *target_columns]``; the check never needs the answers. Structural
        problems (columns, rows, ids, NaN) come first, then this grader's value checks
        (numbers, [0, 1] range, rows summing to 1, non-negativity). The message lists
        every problem found, separated by "; ".
        """
        errors = structure_errors(submission, sample_submission, id_column, target_columns,
                                  allow_extra=self.allows_extra_columns)
        if errors:
            raise InvalidSubmissionError("; ".join(errors))
        errors = self._value_errors(submission, sample_submission, target_columns)
        if errors:
            raise InvalidSubmissionError("; ".join(errors))

    @property
    def allows_extra_columns(self) -> bool:
        """Whether columns besides the id and targets are ignored (True) or rejected: MLE-bench
        ignores them except where it checks the shape (multi-class log loss)."""
        return self.kind != "multiclass_probability"

    def _value_errors(
        self, submission: pd.DataFrame, sample_submission: pd.DataFrame, target_columns: list[str]
    ) -> list[str]:
        if self.kind == "label":
            return [
                err for c in target_columns
                if is_boolean_labels(sample_submission[c])
                for err in boolean_label_errors(submission[c], c)
            ]
        values, errors = numeric_frame(submission, target_columns)
        if errors:
            return errors
        if not np.isfinite(values.to_numpy()).all():
            errors.append(f"{self.name}: target columns contain infinite values")
        if self.kind in ("probability", "multiclass_probability"):
            outside = ((values < 0) | (values > 1)).sum()
            for column, count in outside.items():
                if count:
                    errors.append(
                        f"column '{column}' has {int(count)} value(s) outside [0, 1]; "
                        f"{self.name} needs probabilities"
                    )
        if self.kind == "multiclass_probability":
            if len(target_columns) < 2:
                errors.append(
                    f"{self.name} needs one probability column per class, got {target_columns}"
                )
            sums = values.sum(axis=1)
            off = ~np.isclose(sums.to_numpy(), 1.0, atol=ROW_SUM_ATOL)
            if off.any():
                first = int(np.flatnonzero(off)[0])
                errors.append(
                    f"{int(off.sum())} row(s) of probabilities over {target_columns} do not sum "
                    f"to 1 (MLE-bench's tolerance: about {ROW_SUM_ATOL:g} + 1e-5); e.g. row {first} "
                    f"sums to {float(sums.iloc[first]):.9g}: write unrounded probabilities, or "
                    "divide each row by its sum"
                )
        if self.non_negative:
            negative = (values < 0).sum()
            for column, count in negative.items():
                if count:
                    errors.append(
                        f"column '{column}' has {int(count)} negative value(s); {self.name} "
                        f"takes log(1 + x) and needs predictions >= 0"
                    )
        return errors

    # ----------------------------------------------------------------- scoring
    def score(
        self,
        submission: pd.DataFrame,
        answers: pd.DataFrame,
        id_column: str,
        target_columns: list[str],
    ) -> float:
        """Score ``submission`` against ``answers`` (rows aligned by ``id_column``).

        ``submission`` has columns ``[id_column, *target_columns]``; ``answers`` has the id
        column and either the same target columns or (label/multi-class graders) one label
        column. Raises ``InvalidSubmissionError`` if ids do not match the answers' ids or the
        values are unusable, ``CompetitionError`` if the answers lack the target columns.
        """
        sub, ans = _align(submission, answers, id_column)
        kwargs = dict(self.metric_kwargs)
        if self.kind == "multiclass_probability":
            return self._score_multiclass(sub, ans, id_column, target_columns, kwargs)
        missing = [c for c in target_columns if c not in ans.columns]
        if missing:
            raise CompetitionError(
                f"answers lack target column(s) {missing} of the sample submission "
                f"(answers columns: {list(ans.columns)})"
            )
        if self.kind == "label":
            per_column = []
            for c in target_columns:
                if ans[c].dtype == object and not is_boolean_labels(ans[c]):
                    # text labels: exact strings, as MLE-bench's astype(str) comparison
                    # (text-normalization: "1.0" is not "1", " cat" is not "cat")
                    per_column.append(self.metric(ans[c].astype(str).to_numpy(), sub[c].astype(str).to_numpy(),
                                                  **kwargs))
                    continue
                truth, pred = ans[c].map(normalise_label), sub[c].map(normalise_label)
                if is_boolean_labels(ans[c]):
                    errors = boolean_label_errors(sub[c], c)
                    if errors:
                        raise InvalidSubmissionError("; ".join(errors))
                    pred = pred.map(BOOLEAN_SPELLINGS)
                per_column.append(self.metric(truth.to_numpy(), pred.to_numpy(), **kwargs))
            return float(np.mean(per_column))
        pred, errors = numeric_frame(sub, target_columns)
        if errors:
            raise InvalidSubmissionError("; ".join(errors))
        if self.kind == "ordinal":
            truth, errors = numeric_frame(ans, target_columns)
            if errors:
                raise CompetitionError("answers: " + "; ".join(errors))
            return float(np.mean([self.metric(pred[c].to_numpy(), truth[c].to_numpy(), **kwargs)
                                  for c in target_columns]))
        if self.kind == "probability":
            if self.skip_marked_rows:
                truth, errors = numeric_frame(ans, target_columns)
                if errors:
                    raise CompetitionError("answers: " + "; ".join(errors))
                keep = truth.sum(axis=1) >= 0
                ans, pred = ans[keep], pred[keep]
            per_column = []
            for c in target_columns:
                y_true = _binary_truth(ans[c], c)
                y_pred = pred[c].to_numpy()  # as given: scikit-learn clips log loss at machine epsilon
                if self.metric_name == "log_loss":
                    kwargs = {**kwargs, "labels": [0, 1]}
                per_column.append(self.metric(y_true, y_pred, **kwargs))
            return float(np.mean(per_column))
        truth, errors = numeric_frame(ans, target_columns)
        if errors:
            raise CompetitionError("answers: " + "; ".join(errors))
        y_true, y_pred = truth.to_numpy(), pred.to_numpy()
        if len(target_columns) == 1:
            y_true, y_pred = y_true[:, 0], y_pred[:, 0]
        return float(self.metric(y_true, y_pred, **kwargs))

    def _score_multiclass(self, sub, ans, id_column, target_columns, kwargs) -> float:
        pred, errors = numeric_frame(sub, target_columns)
        if errors:
            raise InvalidSubmissionError("; ".join(errors))
        if all(c in ans.columns for c in target_columns):
            onehot, errors = numeric_frame(ans, target_columns)
            if errors:
                raise CompetitionError("answers: " + "; ".join(errors))
            y_true = np.asarray(target_columns, dtype=object)[onehot.to_numpy().argmax(axis=1)]
        else:
            label_cols = [c for c in ans.columns if c != id_column]
            if len(label_cols) != 1:
                raise CompetitionError(
                    f"answers must be one-hot over {target_columns} or have one label column; "
                    f"got columns {list(ans.columns)}"
                )
            y_true = ans[label_cols[0]].map(normalise_label).to_numpy()
            unknown = sorted(set(y_true) - set(target_columns))
            if unknown:
                raise CompetitionError(f"answer labels {unknown} are not classes {target_columns}")
        return float(self.metric(y_true, pred.to_numpy(), labels=list(target_columns), **kwargs))


def _align(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str):
    """Rows of both tables ordered by the answers' ids (ids compared as canonical strings)."""
    for name, frame in (("submission", submission), ("answers", answers)):
        if id_column not in frame.columns:
            raise InvalidSubmissionError(f"{name} has no id column '{id_column}'")
    sub = submission.set_index(normalise_ids(submission[id_column]))
    ans = answers.set_index(normalise_ids(answers[id_column]))
    if sub.index.duplicated().any():
        raise InvalidSubmissionError(f"submission has duplicated ids in '{id_column}'")
    if set(sub.index) != set(ans.index) or len(sub) != len(ans):
        missing = len(set(ans.index) - set(sub.index))
        extra = len(set(sub.index) - set(ans.index))
        raise InvalidSubmissionError(
            f"submission ids do not match the answers: {missing} missing, {extra} unexpected"
        )
    return sub.loc[ans.index], ans


def _binary_truth(column: pd.Series, name: str) -> np.ndarray:
    labels = column.map(normalise_label)
    mapping = {"True": 1, "False": 0, "1": 1, "0": 0}
    unknown = sorted(set(labels) - set(mapping))
    if unknown:
        raise CompetitionError(
            f"answers column '{name}' must be binary (0/1 or True/False), got {unknown[:5]}"
        )
    return labels.map(mapping).to_numpy(dtype=int)


def _make(name, lower, kind, metric_name, non_negative=False, skip_marked_rows=False, **kwargs) -> Grader:
    return Grader(name, lower, kind, metric_name, tuple(sorted(kwargs.items())), non_negative, skip_marked_rows)


GRADERS: dict[str, Grader] = {
    g.name: g
    for g in (
        _make("accuracy", False, "label", "accuracy_score"),
        _make("micro-f1-score", False, "label", "f1_score", average="micro"),
        _make("macro-f1-score", False, "label", "f1_score", average="macro"),
        _make("auc-roc", False, "probability", "roc_auc_score"),
        _make("log-loss", True, "probability", "log_loss"),
        _make("multi-class-log-loss", True, "multiclass_probability", "log_loss"),
        _make("root-mean-squared-error", True, "regression", "root_mean_squared_error"),
        _make(
            "root-mean-squared-log-error",
            True,
            "regression",
            "root_mean_squared_log_error",
            non_negative=True,
        ),
        _make("mean-absolute-error", True, "regression", "mean_absolute_error"),
        _make("mean-squared-error", True, "regression", "mean_squared_error"),
        _make("r2-score", False, "regression", "r2_score"),
        _make("quadratic-weighted-kappa", False, "ordinal", "cohen_kappa_score", weights="quadratic"),
        _make("mean-column-wise-roc-auc", False, "probability", "roc_auc_score", skip_marked_rows=True),
    )
}

ALIASES: dict[str, str] = {
    "root_mean_squared_error": "root-mean-squared-error",  # denoising-dirty-documents
    "multi-class-classification-accuracy": "accuracy",  # tabular-playground-series-dec-2021
    "mean-column-wise-rmsle": "root-mean-squared-log-error",  # nomad2018 (mean of per-column RMSLE)
    "column-wise ROC AUC": "mean-column-wise-roc-auc",  # jigsaw-toxic-comment-classification-challenge
    "column-wise": "mean-column-wise-roc-auc",
}
"""Other spellings MLE-bench's ``config.yaml`` files use for the same metric (MLE-bench lite).
A multi-column regression grader averages the per-column errors (sklearn's
``multioutput="uniform_average"`` takes the root per column), as nomad2018's ``grade.py``."""


def get_grader(name: str) -> Grader:
    """The grader called ``name`` (MLE-bench grader name or one of its :data:`ALIASES`; the
    grader then carries that name); ``CompetitionError`` if unknown."""
    if name in ALIASES:
        return replace(GRADERS[ALIASES[name]], name=name)
    try:
        return GRADERS[name]
    except KeyError:
        raise CompetitionError(
            f"unknown grader name {name!r}: known graders are {sorted([*GRADERS, *ALIASES])}"
        ) from None
