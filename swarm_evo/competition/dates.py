"""Date columns of a public table (issue 53, item 7): which column orders a competition in time.

Read by the layout check (``search.hidden_time_column`` must name a date column) and by the
split's relation (:mod:`swarm_evo.competition.hidden_relation`: a time-ordered split where the
test dates follow the training dates).
"""

from __future__ import annotations

import re

import pandas as pd

DATE_SHARE = 0.9
"""A column is a date column when at least this share of its non-empty values read as dates."""
DATE_PROBE = 1000
"""The first this many values of a column decide whether the whole column is read for dates."""
_DATE = re.compile(r"^\d{4}[-/]\d{1,2}[-/]\d{1,2}([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?\s*(Z|UTC|[+-]\d{2}:?\d{2})?$")


def as_dates(values: pd.Series) -> pd.Series | None:
    """``values`` as UTC timestamps (missing where empty) when at least :data:`DATE_SHARE` of the
    non-empty ones are dates (``2021-03-04``, ``2021/3/4 12:00``, datetime dtypes), else None.
    Numbers (years, Unix times) are not read as dates."""
    if pd.api.types.is_datetime64_any_dtype(values):
        return pd.to_datetime(values, utc=True)
    if pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        return None
    head = values.head(DATE_PROBE).astype(str).str.strip()
    head = head[head != ""]
    if head.empty or head.str.match(_DATE).mean() < DATE_SHARE:  # most columns stop here, unread
        return None
    text = values.astype(str).str.strip()
    filled = text[(text != "") & values.notna()]
    if filled.empty or filled.str.match(_DATE).mean() < DATE_SHARE:
        return None
    dates = pd.to_datetime(text.where(text.str.match(_DATE)).str.replace("/", "-"), errors="coerce", utc=True,
                           format="mixed")
    return dates if dates.notna().sum() >= DATE_SHARE * len(filled) else None
