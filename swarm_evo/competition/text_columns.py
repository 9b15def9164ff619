"""Which columns of a competition's public data are free text (one rule for every reader).

A column is free text when it is not numeric or boolean and its values average more than
:data:`FREE_TEXT_MEAN_CHARS` characters (a name or a category is shorter; a comment, a review,
a sentence of a novel is longer). Used by the Evolution Log to offer text-only directions
(TF-IDF, n-grams, ...) only where they apply (SPEC §9; issue 16).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

FREE_TEXT_MEAN_CHARS = 50
"""Mean length (characters) above which a string column counts as free text."""

SAMPLE_ROWS = 2_000
"""Rows of train.csv read to decide (the first ones; enough for a mean length)."""


def free_text_columns(frame: pd.DataFrame) -> list[str]:
    """Names of the free-text columns of ``frame``, in column order."""
    names = []
    for name in frame.columns:
        column = frame[name]
        if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            continue
        values = column.dropna().astype(str)
        if len(values) and values.str.len().mean() > FREE_TEXT_MEAN_CHARS:
            names.append(str(name))
    return names


def has_free_text(public_dir: Path) -> bool:
    """True when the public ``train.csv`` (its first :data:`SAMPLE_ROWS` rows) has a free-text
    column; False when there is no train.csv (e.g. an image competition with only folders)."""
    path = Path(public_dir) / "train.csv"
    if not path.is_file():
        return False
    try:
        frame = pd.read_csv(path, nrows=SAMPLE_ROWS)
    except (ValueError, OSError, UnicodeDecodeError):
        return False
    return bool(free_text_columns(frame))
