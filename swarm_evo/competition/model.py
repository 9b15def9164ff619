"""The ``Competition`` model: where a prepared competition's files are and how it is graded.

Layout (MLE-bench's): ``<data_dir>/<id>/prepared/public/`` holds what the agent sees
(train/test files, ``sample_submission.csv``, ``description.md``);
``<data_dir>/<id>/prepared/private/`` holds the answers, which the agent never sees.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from .graders import Grader, get_grader


class Competition(BaseModel):
    """A loaded competition (see ``load_competition``).

    Attributes:
        id, name, competition_type, awards_medals: as in MLE-bench's config.yaml.
        grader_name: MLE-bench grader name; ``grader`` gives the ``Grader``.
        data_dir: the competition folder ``<data_dir>/<id>``.
        public_dir, private_dir: ``<data_dir>/<id>/prepared/{public,private}``.
        answers_path: private answers CSV (only graders read it).
        sample_submission_path: public sample submission CSV.
        description: competition text for the agent ("" if none).
        id_column: first column of the sample submission.
        target_columns: the sample submission's other columns.
        leaderboard_path: ``<data_dir>/<id>/leaderboard.csv`` if present, else None.
        in_mlebench: MLE-bench knows this competition id (a built-in taken from MLE-bench, or a
            config.yaml that is MLE-bench's: read from a checkout or naming an
            ``mlebench.competitions.*`` grade function), so its runs may go into MLE-bench's
            files (``mlebench_submission.jsonl``, the run-group report).
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    competition_type: str = "simple"
    awards_medals: bool = False
    grader_name: str
    data_dir: Path
    public_dir: Path
    private_dir: Path
    answers_path: Path
    sample_submission_path: Path
    description: str = ""
    id_column: str
    target_columns: list[str]
    leaderboard_path: Path | None = None
    in_mlebench: bool = False

    @property
    def grader(self) -> Grader:
        """The ``Grader`` named by ``grader_name``."""
        return get_grader(self.grader_name)

    @property
    def is_lower_better(self) -> bool:
        """Direction of the grader's metric."""
        return self.grader.is_lower_better
