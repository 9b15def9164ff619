"""Structural checks shared by graders and submission validation (no metric logic).

A submission is a table with the sample submission's columns: the id column (first column
of ``sample_submission.csv``) and the target columns (the others), one row per test id.
These checks mirror what MLE-bench's graders and validation server reject: wrong columns,
wrong row count, missing/extra/duplicated ids and missing values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

_MAX_SHOWN = 5


def normalise_label(value: Any) -> str:
    """Canonical string for a label so that equal labels compare equal.

    Booleans and their spellings (True/"True"/"TRUE"/"true") become ``"True"``/``"False"``;
    integral floats become integers (``1.0`` -> ``"1"``); other values are ``str(v).strip()``.
    """
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    text = str(value).strip()
    if text.lower() in ("true", "false"):
        return text.capitalize()
    return text


BOOLEAN_SPELLINGS: dict[str, str] = {"True": "True", "False": "False", "1": "True", "0": "False"}
"""Normalised labels read as booleans when the answers are booleans: MLE-bench's
``accuracy_score`` compares a boolean ``y_true`` with 1/0 and 1.0/0.0 numerically."""


def is_boolean_labels(column: pd.Series) -> bool:
    """True when every non-missing value of ``column`` is a boolean (True/False in any
    spelling ``normalise_label`` accepts), e.g. spaceship-titanic's ``Transported``."""
    values = set(column.dropna().map(normalise_label))
    return bool(values) and values <= {"True", "False"}


def boolean_label_errors(column: pd.Series, name: str) -> list[str]:
    """Labels of a submission column that cannot be read as booleans (the answers are
    booleans): one message naming them, or []."""
    labels = column.dropna().map(normalise_label)
    bad = sorted(set(labels) - set(BOOLEAN_SPELLINGS))
    if not bad:
        return []
    return [
        f"column '{name}' has label(s) {_show(bad)} outside the answers' labels: the answers are "
        "True/False (1/0 are read as True/False)"
    ]


def normalise_ids(ids: pd.Series) -> pd.Series:
    """Ids as canonical strings (``normalise_label``), so 7, 7.0 and "7" are the same id."""
    return ids.map(normalise_label)


def _show(values: list[Any]) -> str:
    shown = ", ".join(repr(v) for v in values[:_MAX_SHOWN])
    more = f" (+{len(values) - _MAX_SHOWN} more)" if len(values) > _MAX_SHOWN else ""
    return f"[{shown}]{more}"


def structure_errors(
    submission: pd.DataFrame,
    sample_submission: pd.DataFrame,
    id_column: str,
    target_columns: list[str],
    allow_extra: bool = False,
) -> list[str]:
    """Human-readable structural problems of ``submission`` (empty list = structurally OK).

    Checks, in order: columns equal the sample's (as a set; order is free; with
    ``allow_extra``, other columns are ignored as MLE-bench's graders ignore them), same row
    count, no duplicated ids, the same id set as the sample, no missing values in the id and
    target columns. Later checks that need a column are skipped when that column is absent.
    """
    errors: list[str] = []
    expected = [id_column, *target_columns]
    missing = [c for c in expected if c not in submission.columns]
    extra = [] if allow_extra else [c for c in submission.columns if c not in expected]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing column(s) {missing}")
        if extra:
            parts.append(f"unexpected column(s) {extra}")
        wanted = "the sample submission's columns" if allow_extra else "exactly the sample submission's columns"
        errors.append(f"{' and '.join(parts)}; expected {wanted} {expected}")
    if len(submission) != len(sample_submission):
        errors.append(
            f"submission has {len(submission)} rows but the sample submission has "
            f"{len(sample_submission)}: write one row per test id"
        )
    if id_column in submission.columns:
        ids = normalise_ids(submission[id_column])
        dup = ids[ids.duplicated()].unique().tolist()
        if dup:
            errors.append(f"{len(dup)} duplicated id(s) in column '{id_column}': {_show(dup)}")
        expected_ids = set(normalise_ids(sample_submission[id_column]))
        got = set(ids)
        absent = sorted(expected_ids - got)
        unknown = sorted(got - expected_ids)
        if absent:
            errors.append(
                f"{len(absent)} id(s) of the sample submission are missing from column "
                f"'{id_column}': {_show(absent)}"
            )
        if unknown:
            errors.append(
                f"{len(unknown)} id(s) in column '{id_column}' are not in the sample "
                f"submission: {_show(unknown)}"
            )
    present = [c for c in expected if c in submission.columns]
    nan_counts = submission[present].isna().sum()
    for column, count in nan_counts.items():
        if count:
            errors.append(f"column '{column}' has {int(count)} missing (NaN/empty) value(s)")
    return errors


def numeric_frame(submission: pd.DataFrame, columns: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """Columns converted to float, plus errors naming columns with non-numeric values."""
    errors: list[str] = []
    out = {}
    for column in columns:
        raw = submission[column]
        if raw.dtype == bool:
            raw = raw.astype(float)
        values = pd.to_numeric(raw, errors="coerce")
        bad = raw[values.isna() & raw.notna()].tolist()
        if bad:
            errors.append(f"column '{column}' has non-numeric value(s): {_show(bad)}")
        out[column] = values.astype(float)
    return pd.DataFrame(out, index=submission.index), errors
