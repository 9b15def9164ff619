"""A Kaggle/MLE-bench competition as the search's objective (SPEC §4, §6).

A program trains on ``./input`` (the public data), prints ``Validation metric: <float>`` as its
last line and writes ``./submission/submission.csv``; the run ends by grading the best node's
submission on the private answers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

from swarm_evo.competition import (
    Competition,
    CompetitionReport,
    grade_submission,
    validate_submission,
)
from swarm_evo.competition.description import prompt_description
from swarm_evo.competition.grading import MLEBENCH_SUBMISSION_FILE
from swarm_evo.competition.text_columns import has_free_text
from swarm_evo.objective.base import Assessment
from swarm_evo.population.genes import LOCI, REQUIRED_NON_STUB
from swarm_evo.population.journal import atomic_copy, atomic_write_text
from swarm_evo.population.node import Node
from swarm_evo.prompting.data_preview import preview_data
from swarm_evo.prompting.prompts import templates_dir
from swarm_evo.sandbox import Sandbox
from swarm_evo.sandbox.workdir import remove_entry
from swarm_evo.search.debug_chain import Attempt
from swarm_evo.search.prevalidate import static_check
from swarm_evo.search.review import PARSE_STDOUT, parse_metric

SUBMISSION = Path("submission") / "submission.csv"

"""Where a program writes its submission, relative to its node directory."""


class CompetitionObjective:
    """The search's view of one competition (see :class:`swarm_evo.objective.Objective`)."""

    kind = "competition"
    loci: tuple[str, ...] = LOCI
    required_loci: tuple[str, ...] = REQUIRED_NON_STUB

    def __init__(self, competition: Competition, fetch_answers: Callable[[], object] | None = None):
        """``fetch_answers``: called before a submission is graded, to bring the private answers
        (a competition read from a store: swarm_evo/objective/load.py); None when they are local."""
        self.competition = competition
        self.fetch_answers = fetch_answers
        self.id = competition.id
        self.is_lower_better = competition.is_lower_better
        self.agent_texts_dir = templates_dir() / "agents"
        self._preview: str | None = None
        self._text_data: bool | None = None

    @property
    def public_dir(self) -> Path:
        """The public data, mounted read-only as ``./input``."""
        return self.competition.public_dir

    def prompt_view(self) -> dict[str, Any]:
        """id, name, description, metric (the grader), direction, competition type, and the
        submission's layout: the sample submission's file name, id column and target columns.

        The description is the competition's without Kaggle boilerplate (FAQ, teams, support,
        prizes, timeline, citation: :func:`swarm_evo.competition.description.prompt_description`),
        its headings demoted two levels to nest under the prompt's ``# Task``; templates bound its
        length to the model's context (``limits.description``)."""
        c = self.competition
        return {
            "kind": self.kind,
            "id": c.id,
            "name": c.name,
            "description": prompt_description(c.description, demote=2),
            "metric": c.grader.name,
            "is_lower_better": c.is_lower_better,
            "competition_type": c.competition_type,
            "sample_submission": c.sample_submission_path.name,
            "id_column": c.id_column,
            "target_columns": list(c.target_columns),
        }

    def offline_view(self) -> dict[str, Any]:
        """``{"competition": {...}}`` as docs/CONTRACTS.md describes (public paths only)."""
        c = self.competition
        return {
            "competition": {
                "id": c.id,
                "grader": c.grader.name,
                "is_lower_better": c.is_lower_better,
                "competition_type": c.competition_type,
                "public_dir": str(c.public_dir),
                "id_column": c.id_column,
                "target_columns": list(c.target_columns),
                "sample_submission": str(c.sample_submission_path),
            }
        }

    def data_preview(self) -> str:
        """The public data preview (computed once)."""
        if self._preview is None:
            self._preview = preview_data(self.competition.public_dir)
        return self._preview

    def directions(self) -> None:
        """The Evolution Log's default ML catalogue applies."""
        return None

    def has_text_data(self) -> bool:
        """A free-text column in the public train.csv (computed once;
        :func:`swarm_evo.competition.text_columns.has_free_text`)."""
        if self._text_data is None:
            self._text_data = has_free_text(self.competition.public_dir)
        return self._text_data

    def static_check(self, code: str) -> list[str]:
        """Markers, compiles, writes submission.csv, prints the metric line (seed 003)."""
        return static_check(code, self.loci)

    def execution_problems(self, result, workdir: Path) -> list[str]:
        """Why an execution counts as failed for the debug chain (empty list = success):
        an exception/timeout/OOM, a missing or invalid submission, or no finite metric line."""
        problems: list[str] = []
        if result.exc_type:
            info = result.exc_info or "the program failed"
            problems.append(info if info.startswith(result.exc_type) else f"{result.exc_type}: {info}")
        for err in validate_submission(workdir / SUBMISSION, self.competition):
            problems.append(f"submission: {err}")
        metric = parse_metric(result.stdout)
        if metric is None:
            problems.append("no final line 'Validation metric: <number>' in stdout")
        elif not math.isfinite(metric):
            problems.append(f"the validation metric is not finite ({metric})")
        return problems

    def assess(self, sandbox: Sandbox, code: str, workdir: Path, timeout: float) -> Assessment:
        """Run the program once in ``workdir`` (a stale submission is removed first)."""
        remove_entry(workdir / "submission")
        result = sandbox.execute(code, workdir, self.competition.public_dir, timeout)
        metric = parse_metric(result.stdout)
        return Assessment(
            result=result,
            problems=self.execution_problems(result, workdir),
            metric=metric if metric is not None and math.isfinite(metric) else None,
        )

    def review_facts(self, final: Attempt, workdir: Path) -> tuple[list[str], object]:
        """The submission check now, and the metric line of stdout."""
        return validate_submission(workdir / SUBMISSION, self.competition), PARSE_STDOUT

    def publish_best(self, run_dir: Path, node: Node) -> None:
        """``best_solution.py`` and ``submission/submission.csv`` of ``node``, each replaced atomically."""
        atomic_write_text(run_dir / "best_solution.py", node.code)
        atomic_copy(run_dir / "nodes" / node.id / SUBMISSION, run_dir / SUBMISSION)

    def finalize(self, run_dir: Path, handed_in: Node | None) -> CompetitionReport:
        """Grade the run's submission: ``RUN_DIR/submission/submission.csv``, the work of
        ``handed_in`` (:meth:`publish_best` copied it; ``step.persistence.publish_best`` chose
        it from :meth:`Journal.submission_candidates`: the best valid node, else the best node
        that passed every deterministic check).

        Writes ``grade_report.json`` (a report with ``submission_exists: false`` when no node
        was ever handed in); for a competition MLE-bench knows, also ``mlebench_submission.jsonl``
        (``competition_id``, ``submission_path``), the input of ``mlebench grade --submission``.
        """
        target = run_dir / SUBMISSION
        if self.fetch_answers is not None and target.is_file():
            self.fetch_answers()  # the answers reach this machine only now, outside every program's view
        report = grade_submission(target, self.competition)
        atomic_write_text(run_dir / "grade_report.json", report.to_json(indent=2))
        if self.competition.in_mlebench:  # `mlebench grade --submission RUN_DIR/mlebench_submission.jsonl`
            line = {"competition_id": self.competition.id, "submission_path": str(target.resolve())}
            atomic_write_text(run_dir / MLEBENCH_SUBMISSION_FILE, json.dumps(line) + "\n")
        return report
