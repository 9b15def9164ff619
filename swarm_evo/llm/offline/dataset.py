"""Infer what a competition's public data looks like (columns, target, output kind).

Reads only files under the competition's public directory (``train.csv``, ``test.csv``,
``sample_submission.csv``); never private answers. The result steers which program the
offline model writes; the programs themselves re-read the data at run time.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache

import pandas as pd

PROBA_GRADERS = {"auc-roc", "log-loss", "multi-class-log-loss"}
LABEL_GRADERS = {"accuracy", "micro-f1-score", "macro-f1-score"}
REGRESSION_GRADERS = {"root-mean-squared-error", "root-mean-squared-log-error", "mean-absolute-error"}
LOWER_IS_BETTER = {"log-loss", "multi-class-log-loss"} | REGRESSION_GRADERS


@dataclass
class DatasetInfo:
    """What the offline model knows about a competition's public data."""

    public_dir: str
    grader: str
    id_col: str
    submission_cols: list[str]
    target_col: str
    task: str  # "classification" | "regression"
    output: str  # "label" | "proba_binary" | "proba_multi" | "value"
    text_cols: list[str] = field(default_factory=list)
    drop_cols: list[str] = field(default_factory=list)
    split_cols: dict[str, list[bool]] = field(default_factory=dict)  # col -> per part: numeric?
    group_id: bool = False
    spend_cols: list[str] = field(default_factory=list)
    n_rows: int = 0
    columns: list[str] = field(default_factory=list)
    sample_file: str = "sample_submission.csv"

    @property
    def is_text(self) -> bool:
        """True when the features are dominated by free text (TF-IDF programs)."""
        return bool(self.text_cols)


@lru_cache(maxsize=32)
def _read(path: str, mtime: float) -> pd.DataFrame:
    return pd.read_csv(path)


def read_csv(path: str) -> pd.DataFrame:
    """Read a CSV, cached by path and modification time (the caller must not mutate it)."""
    return _read(path, os.path.getmtime(path))


def public_columns(public_dir: str) -> list[str]:
    """Every column name of the public CSV files (train, test, sample submission)."""
    cols: list[str] = []
    for name in ("train.csv", "test.csv", "sample_submission.csv"):
        path = os.path.join(public_dir, name)
        if os.path.exists(path):
            for c in pd.read_csv(path, nrows=0).columns:
                if c not in cols:
                    cols.append(str(c))
    return cols


def _grader_output(grader: str, n_sub_cols: int) -> tuple[str, str]:
    if grader in REGRESSION_GRADERS:
        return "regression", "value"
    if grader == "multi-class-log-loss" or (grader in PROBA_GRADERS and n_sub_cols > 1):
        return "classification", "proba_multi"
    if grader in PROBA_GRADERS:
        return "classification", "proba_binary"
    return "classification", "label"


def _is_free_text(column: pd.Series) -> bool:
    """Long, mostly unique, multi-word strings (the rule used for text features below)."""
    if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        return False
    st = column.dropna().astype(str)
    return (not st.empty and st.str.len().mean() > 30 and st.nunique() / max(len(column), 1) > 0.5
            and st.str.count(" ").mean() >= 3)


def infer_dataset(competition: dict) -> DatasetInfo:
    """Build a :class:`DatasetInfo` from the CTX ``competition`` dict and the public files."""
    public_dir = competition["public_dir"]
    grader = competition.get("grader") or "accuracy"
    train = read_csv(os.path.join(public_dir, "train.csv"))
    test = read_csv(os.path.join(public_dir, "test.csv"))
    sample_path = competition.get("sample_submission") or os.path.join(public_dir, "sample_submission.csv")
    sample = read_csv(sample_path)
    id_col = competition.get("id_column") or str(sample.columns[0])
    sub_cols = list(competition.get("target_columns") or [c for c in sample.columns if c != id_col])
    only_train = [c for c in train.columns if c not in test.columns and c != id_col]
    if len(sub_cols) == 1 and sub_cols[0] in train.columns:
        target = sub_cols[0]
    elif only_train:
        target = only_train[0]
    else:
        target = sub_cols[0]
    task, output = _grader_output(grader, len(sub_cols))
    if grader not in PROBA_GRADERS | LABEL_GRADERS | REGRESSION_GRADERS:
        # unknown grader: guess from the target
        if pd.api.types.is_float_dtype(train[target]) and train[target].nunique() > 20:
            task, output = "regression", "value"
    info = DatasetInfo(public_dir=public_dir, grader=grader, id_col=id_col, submission_cols=sub_cols,
                       target_col=target, task=task, output=output, n_rows=len(train),
                       columns=[str(c) for c in train.columns], sample_file=os.path.basename(sample_path))
    # The id is a feature too when it is the text itself (detecting-insults: id column Comment).
    feats = [c for c in train.columns if c != target and c in test.columns and (c != id_col or _is_free_text(train[c]))]
    n = max(len(train), 1)
    for c in feats:
        s = train[c]
        if pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
            continue
        st = s.dropna().astype(str)
        if st.empty:
            info.drop_cols.append(c)
            continue
        mean_len = st.str.len().mean()
        uniq = st.nunique() / n
        if mean_len > 30 and uniq > 0.5 and st.str.count(" ").mean() >= 3:
            info.text_cols.append(c)
            continue
        slash = st.str.count("/")
        if (slash > 0).mean() > 0.9 and slash.nunique() == 1:
            k = int(slash.iloc[0]) + 1
            parts = st.str.split("/", expand=True)
            info.split_cols[c] = [bool(parts[i].str.fullmatch(r"\d+").mean() > 0.9) for i in range(k)]
        if uniq > 0.5 or st.nunique() > 200:
            info.drop_cols.append(c)
    ids = train[id_col].astype(str)
    info.group_id = bool(ids.str.fullmatch(r"\d+_\d+").mean() > 0.95)
    for c in feats:
        s = train[c]
        if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
            if s.min() >= 0 and (s == 0).mean() > 0.3 and s.nunique() > 20:
                info.spend_cols.append(c)
    if len(info.spend_cols) < 2:
        info.spend_cols = []
    return info


def safe_name(col: str) -> str:
    """A Python-identifier-friendly version of a column name (for derived feature names)."""
    return re.sub(r"\W+", "_", col).strip("_") or "col"
