"""Checks of a prepared competition folder before a run writes anything (issue 7, "bad input").

``load_competition`` calls these, so ``swarm-evo run``/``grade`` stop with exit code 2 and one
line naming the file or field and the fix when:

- a file the competition needs is missing (built-ins: ``BuiltinSpec.public_files`` and
  ``private_files``, the files ``prepare.py`` writes; generic competitions: the config's
  ``dataset.sample_submission`` and ``dataset.answers``), or a folder it needs is missing or
  empty (built-ins: ``BuiltinSpec.public_folders``, e.g. the ``train/`` and ``test/`` images
  of an image competition);
- the sample submission has no id column (the built-in's ``id_column`` or the config's
  optional ``dataset.id_column``), or duplicated ids;
- the private answers lack the id column or have other ids than the sample submission
  (MLE-bench's graders align answers and submission by id, so such answers grade nothing).

Every error is a ``CompetitionError`` whose message is one line (no newlines). Only the id
columns are read (``pd.read_csv(usecols=[id])``), so the checks stay cheap for large
competitions.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence

import pandas as pd

from .checks import normalise_ids
from .errors import CompetitionError

EXAMPLES = 3
"""How many missing/extra ids an error message shows."""


def one_line(text: object) -> str:
    """``str(text)`` with every run of whitespace (newlines included) collapsed to one space."""
    return re.sub(r"\s+", " ", str(text)).strip()


def _has_entries(folder: Path) -> bool:
    """True when ``folder`` is a directory with at least one entry (reads one entry only)."""
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is not None
    except OSError:
        return False


def check_files(
    required: Sequence[tuple[Path, str]], fix: str, folders: Sequence[tuple[Path, str]] = ()
) -> None:
    """Raise if any required file is missing, or any required folder is missing or empty.

    Args:
        required: ``(path, role)`` pairs, e.g. ``(.../prepared/public/train.csv, "public
            training data")``.
        fix: how to create them, e.g. ``"run `swarm-evo prepare ID --data-dir D`"``.
        folders: ``(path, role)`` pairs of directories that must exist and hold at least one
            entry, e.g. ``(.../prepared/public/train, "public train/ folder")``.

    Raises:
        CompetitionError: ``"<path>[, <path>...] not found (<role>[, ...]): <fix>"``; an empty
            folder is listed as ``"<path>/ (empty)"``.
    """
    missing = [(path, role) for path, role in required if not Path(path).is_file()]
    for path, role in folders:
        if not Path(path).is_dir():
            missing.append((f"{path}/", role))
        elif not _has_entries(Path(path)):
            missing.append((f"{path}/ (empty)", role))
    if missing:
        paths = ", ".join(str(p) for p, _ in missing)
        roles = ", ".join(r for _, r in missing)
        raise CompetitionError(one_line(f"{paths} not found ({roles}): {fix}"))


def read_header(path: Path, what: str) -> list[str]:
    """The column names of CSV ``path`` (reads no rows).

    Raises:
        CompetitionError: the file cannot be parsed as CSV (names ``path`` and ``what``).
    """
    try:
        return [str(c) for c in pd.read_csv(path, nrows=0).columns]
    except Exception as exc:  # noqa: BLE001 - any parse failure is reported with the path
        raise CompetitionError(one_line(f"{path}: cannot read {what} CSV ({exc})")) from exc


def check_id_column(sample_path: Path, columns: list[str], id_column: str, field: str, fix: str) -> None:
    """Raise unless ``id_column`` is one of the sample submission's ``columns``.

    ``field`` names where the id column is configured (e.g. ``"dataset.id_column of
    D/x/config.yaml"`` or ``"the built-in spec of x"``).

    Raises:
        CompetitionError: names the file, the id column expected, the columns found and ``fix``.
    """
    if id_column not in columns:
        raise CompetitionError(one_line(
            f"{sample_path}: sample submission has no id column {id_column!r} ({field}); "
            f"columns found: {columns}: {fix}"
        ))


def _read_ids(path: Path, id_column: str, what: str, as_text: bool) -> pd.Series:
    try:
        if as_text:
            frame = pd.read_csv(path, usecols=[id_column], dtype=str, keep_default_na=False)
        else:
            frame = pd.read_csv(path, usecols=[id_column], float_precision="round_trip")
    except Exception as exc:  # noqa: BLE001 - reported with the path
        raise CompetitionError(one_line(f"{path}: cannot read column {id_column!r} of the {what} ({exc})")) from exc
    return frame[id_column]


def _examples(values: set[str]) -> str:
    shown = sorted(values)[:EXAMPLES]
    return ", ".join(repr(v) for v in shown) + (", ..." if len(values) > EXAMPLES else "")


def check_answer_ids(answers_path: Path, sample_path: Path, id_column: str, fix: str) -> None:
    """Raise unless the private answers hold exactly the sample submission's ids, once each.

    Ids are compared as the graders compare them (``checks.normalise_ids``: 7, 7.0 and "7"
    are one id); as text first, which decides the common case without the per-value work.

    Raises:
        CompetitionError: duplicated ids in the sample submission; answers without the id
            column; or answers whose ids differ (how many are missing and extra, with
            ``EXAMPLES`` examples each) or repeat. Names the file and ``fix``.
    """
    answer_columns = read_header(answers_path, "private answers")
    if id_column not in answer_columns:
        raise CompetitionError(one_line(
            f"{answers_path}: private answers have no id column {id_column!r} (the sample "
            f"submission's); columns found: {answer_columns}: {fix}"
        ))
    sample_ids = _read_ids(sample_path, id_column, "sample submission", as_text=True)
    answer_ids = _read_ids(answers_path, id_column, "private answers", as_text=True)
    if len(sample_ids) == len(answer_ids) and set(sample_ids) == set(answer_ids) and not sample_ids.duplicated().any():
        return
    sample_ids = normalise_ids(_read_ids(sample_path, id_column, "sample submission", as_text=False))
    answer_ids = normalise_ids(_read_ids(answers_path, id_column, "private answers", as_text=False))
    dup = set(sample_ids[sample_ids.duplicated()])
    if dup:
        raise CompetitionError(one_line(
            f"{sample_path}: {len(dup)} duplicated id(s) in column {id_column!r} of the sample "
            f"submission (e.g. {_examples(dup)}): {fix}"
        ))
    expected, got = set(sample_ids), set(answer_ids)
    missing, extra = expected - got, got - expected
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"{len(missing)} id(s) of the sample submission missing (e.g. {_examples(missing)})")
        if extra:
            parts.append(f"{len(extra)} id(s) not in the sample submission (e.g. {_examples(extra)})")
        raise CompetitionError(one_line(
            f"{answers_path}: private answers have other ids than {sample_path} (column "
            f"{id_column!r}): {'; '.join(parts)}: {fix}"
        ))
    dup = set(answer_ids[answer_ids.duplicated()])
    if dup:
        raise CompetitionError(one_line(
            f"{answers_path}: {len(dup)} duplicated id(s) in column {id_column!r} of the private "
            f"answers (e.g. {_examples(dup)}): {fix}"
        ))
