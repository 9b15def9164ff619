"""One execution, two scores (issue 41, item 2): the host splits what a program wrote.

A program of a run with a hidden split reads the run's view of the public data
(:mod:`swarm_evo.competition.hidden_split`) and writes one submission for every test row it
sees, real and hidden alike. :class:`HiddenGrader`:

* checks that submission against the view's sample submission (what the program was asked
  for: :meth:`HiddenGrader.program_errors`, the same checks as ever);
* grades its hidden rows with the competition's own grader (the one ``grade_submission`` uses,
  equal to MLE-bench's ``grade.py``: tests/test_mlebench_fidelity.py) against
  ``hidden_split/answers.csv``, rounded to 5 decimals as MLE-bench rounds;
* writes the real rows back as the node's ``submission/submission.csv`` (the program's own
  text, row by row), which is then a submission of the competition itself: the hand-in, graded
  on the private answers only at the end of the run.

The private test answers are not read here.
"""

from __future__ import annotations

import io
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from swarm_evo.sandbox.output import write_output_file
from swarm_evo.sandbox.safe_read import open_program_file

from .checks import normalise_ids
from .errors import CompetitionError, InvalidSubmissionError
from .grading import SCORE_DECIMALS
from .hidden_split import HiddenSplit
from .model import Competition
from .submission import read_submission, validate_submission

MAX_SUBMISSION_BYTES = 2 * 1024**3
"""The largest submission file the host splits (2 GiB)."""


@dataclass(frozen=True)
class SplitOutcome:
    """What the host made of one valid submission: the hidden rows' ``score`` (metric's own
    units and direction), how many hidden and real rows it had."""

    score: float
    hidden_rows: int
    real_rows: int


class HiddenGrader:
    """The host's side of a run's hidden split: see the module docstring.

    Attributes:
        competition: the competition itself (its sample submission lists the real test rows).
        view: the same competition as programs see it (public folder and sample submission of
            the split's view).
        split: the run's :class:`HiddenSplit`.
    """

    def __init__(self, competition: Competition, split: HiddenSplit):
        self.competition = competition
        self.split = split
        sample = Path(competition.sample_submission_path).name
        self.view = competition.model_copy(update={"public_dir": split.view_dir,
                                                   "sample_submission_path": split.view_dir / sample})
        self._answers: pd.DataFrame | None = None

    @property
    def answers(self) -> pd.DataFrame:
        """The hidden rows' answers (read once, as ``grade_submission`` reads private answers)."""
        if self._answers is None:
            self._answers = pd.read_csv(self.split.answers_path, float_precision="round_trip")
        return self._answers

    def program_errors(self, path: Path) -> list[str]:
        """Format errors of the submission at ``path`` against what the program was shown (the
        view's sample submission; :func:`swarm_evo.competition.validate_submission`)."""
        return validate_submission(path, self.view)

    def split_submission(self, workdir: Path, name: Path) -> SplitOutcome:
        """Grade the hidden rows of ``workdir/name`` (a submission :meth:`program_errors` passed)
        and replace the file by its real rows.

        The file is only rewritten once its hidden rows are graded: when grading fails, the
        program's file stays as it was.

        Raises:
            InvalidSubmissionError: the hidden rows cannot be graded (the grader's message), or
                the submission's folder is not a plain folder.
            CompetitionError: the hidden answers cannot be read or graded, or the grade is not a
                finite number: the host's error, not the program's.
        """
        path = Path(workdir) / name
        try:
            folder_mode = os.lstat(path.parent).st_mode
        except OSError as exc:
            raise InvalidSubmissionError(f"{path.parent}: {exc}") from None
        if not stat.S_ISDIR(folder_mode):
            raise InvalidSubmissionError(f"{path.parent} is not a folder")
        typed, errors = read_submission(path)
        if typed is None:
            raise InvalidSubmissionError("; ".join(errors))
        try:
            with open_program_file(path, MAX_SUBMISSION_BYTES) as fh:
                raw = fh.read()
        except OSError as exc:
            raise InvalidSubmissionError(str(exc)) from None
        text = pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False)
        try:
            answers = self.answers
        except Exception as exc:  # noqa: BLE001 - a broken split is the host's problem
            raise CompetitionError(f"{self.split.answers_path}: cannot read the hidden answers ({exc})") from exc
        id_col = self.competition.id_column
        is_hidden = normalise_ids(typed[id_col]).isin(set(normalise_ids(answers[id_col]))).to_numpy()
        try:
            raw_score = self.competition.grader.score(
                typed[is_hidden].reset_index(drop=True), answers, id_col, list(self.competition.target_columns))
        except CompetitionError:
            raise
        except ValueError as exc:  # InvalidSubmissionError and scikit-learn's errors
            raise InvalidSubmissionError(f"cannot score the submission: {exc}") from None
        if not math.isfinite(raw_score):  # issue 53, item 6: never a NaN to rank
            raise CompetitionError(f"the {self.competition.grader.name} grader gave {raw_score} on the "
                                   f"{int(is_hidden.sum())} hidden rows: no score to rank")
        real = text[~is_hidden]
        data = real.to_csv(index=False, lineterminator="\n").encode("utf-8")
        write_output_file(path.parent, path.name, data)
        return SplitOutcome(score=round(float(raw_score), SCORE_DECIMALS), hidden_rows=int(is_hidden.sum()),
                            real_rows=len(real))
