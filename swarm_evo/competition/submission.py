"""Format-only validation of a submission file, like MLE-bench's validation server.

Never reads the private answers: it compares the submission with the public sample
submission (columns, row count, id set, missing values) and runs the grader's value checks
(``Grader.check_format``: numbers, probability range, rows summing to 1, ...).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd

from swarm_evo.sandbox.safe_read import ProgramFileError, open_program_file

from .checks import structure_errors
from .errors import CompetitionError, InvalidSubmissionError
from .model import Competition


def read_submission(path: Path) -> tuple[pd.DataFrame | None, list[str]]:
    """Read a submission CSV; return (table or None, errors).

    The file is opened as :func:`~swarm_evo.sandbox.safe_read.open_program_file` does (a
    program wrote it): a FIFO, directory, device or symlink there is an error naming it, and
    reading never blocks.
    """
    path = Path(path)
    try:
        with open_program_file(path) as fh:
            table = pd.read_csv(fh, float_precision="round_trip")
    except FileNotFoundError:
        return None, [f"submission file {path} not found: write ./submission/submission.csv"]
    except ProgramFileError as exc:
        return None, [f"submission file {exc}: write a regular CSV file to ./submission/submission.csv"]
    except Exception as exc:  # noqa: BLE001 - any parse failure is a format error
        return None, [f"submission file {path} cannot be parsed as CSV: {exc}"]
    if table.columns.size == 0:
        return None, [f"submission file {path} is empty"]
    return table, []


@functools.lru_cache(maxsize=8)
def _sample_table(path: str, mtime_ns: int, size: int) -> pd.DataFrame:
    """The sample submission, read once per file version (every execution and review validates
    against it)."""
    return pd.read_csv(path, float_precision="round_trip")


def read_sample_submission(competition: Competition) -> pd.DataFrame:
    """A copy of the competition's sample submission (cached while the file is unchanged).

    Raises:
        CompetitionError: the file is missing or unreadable (a broken competition, not a bad
            submission).
    """
    path = Path(competition.sample_submission_path)
    try:
        stat = path.stat()
        return _sample_table(str(path), stat.st_mtime_ns, stat.st_size).copy()
    except Exception as exc:  # noqa: BLE001
        raise CompetitionError(f"{path}: cannot read sample submission ({exc})") from exc


def validate_submission(submission_path: Path, competition: Competition) -> list[str]:
    """Human-readable format errors of ``submission_path`` (empty list = valid).

    Checks: the file exists and parses as CSV; its columns equal the sample submission's
    (``[id_column, *target_columns]``); same number of rows; same set of ids; no NaN;
    then ``competition.grader.check_format``. Never raises for a bad submission; raises
    ``CompetitionError`` only if the competition's sample submission is unreadable.
    """
    submission, errors = read_submission(submission_path)
    if submission is None:
        return errors
    sample = read_sample_submission(competition)
    errors = structure_errors(
        submission, sample, competition.id_column, competition.target_columns,
        allow_extra=competition.grader.allows_extra_columns,
    )
    if errors:
        return errors
    try:
        competition.grader.check_format(
            submission, sample, competition.id_column, competition.target_columns
        )
    except InvalidSubmissionError as exc:
        return [str(exc)]
    return []
