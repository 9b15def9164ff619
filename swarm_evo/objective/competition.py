"""A Kaggle/MLE-bench competition as the search's objective (SPEC §4, §6).

A program trains on ``./input`` (the public data), prints ``Validation metric: <float>`` as its
last line and writes ``./submission/submission.csv``; the run ends by grading the best node's
submission on the private answers.

With a hidden split (issue 41, :meth:`CompetitionObjective.use_hidden_split`) ``./input`` is the
run's view of the public data (:mod:`swarm_evo.competition.hidden_split`); each execution's
submission is split by the host into the hidden rows' grade (:attr:`Assessment.hidden_score`)
and the real submission (:class:`swarm_evo.competition.hidden_grading.HiddenGrader`), and the
run's hand-in may be refitted on the full public data (:meth:`CompetitionObjective.final_fit`).
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any, Callable

from swarm_evo.competition import (
    Competition,
    CompetitionError,
    CompetitionReport,
    grade_submission,
    validate_submission,
)
from swarm_evo.competition.description import prompt_description
from swarm_evo.competition.errors import InvalidSubmissionError
from swarm_evo.competition.grading import MLEBENCH_SUBMISSION_FILE
from swarm_evo.competition.hidden_grading import HiddenGrader
from swarm_evo.competition.hidden_layout import HiddenSplitUnavailable, hidden_layout
from swarm_evo.competition.hidden_split import SPLIT_DIR, HiddenSplit, write_split
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

log = logging.getLogger(__name__)

SUBMISSION = Path("submission") / "submission.csv"
FINAL_FIT_DIR = "final_fit"
"""``RUN_DIR/final_fit/``: where the chosen program runs once more on the full public data."""

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
        self.hidden: HiddenGrader | None = None

    @property
    def public_dir(self) -> Path:
        """The public data as programs see it, mounted read-only as ``./input``: the run's view
        with the hidden rows when the run has a hidden split, else the competition's own."""
        return self.hidden.split.view_dir if self.hidden is not None else self.competition.public_dir

    @property
    def program_competition(self) -> Competition:
        """The competition as programs see it (public folder and sample submission of the view
        when the run has a hidden split): what their submissions are checked against."""
        return self.hidden.view if self.hidden is not None else self.competition

    def hidden_split_unavailable(self, group_column: str | None = None, time_column: str | None = None) -> str | None:
        """Why this competition's public layout allows no hidden split, or None when it does
        (:func:`swarm_evo.competition.hidden_layout.hidden_layout`).

        Raises:
            HiddenSplitError: ``group_column`` is not a column of the training table, or
                ``time_column`` not one holding dates (issue 53, item 7).
        """
        try:
            hidden_layout(self.competition, group_column=group_column, time_column=time_column)
        except HiddenSplitUnavailable as exc:
            return str(exc)
        return None

    def use_hidden_split(self, run_dir: Path, seed: int, fraction: float, group_column: str | None = None,
                         recorded: dict | None = None, time_column: str | None = None) -> HiddenSplit:
        """Give the run its hidden split, ``RUN_DIR/hidden_split/``, and show programs its view
        from now on. The split is written every time a session opens (it is deterministic): a
        resumed run, even one fetched from the run store, whose files lost their times and
        order, gets the very same split back, checked against ``recorded`` (the journal's
        ``info["hidden_split"]``).

        Raises:
            HiddenSplitUnavailable, HiddenSplitError: no split is possible here.
            CompetitionError: the split drawn now differs from ``recorded`` (the public data
                changed since the run began, or an older swarm-evo drew it: a record without
                ``relation``; its nodes' hidden scores would not compare).
        """
        root = Path(run_dir) / SPLIT_DIR
        split = write_split(self.competition, root, seed, fraction, group_column, time_column)
        if recorded is not None and split.digest != recorded.get("digest") and "relation" not in recorded:
            raise CompetitionError(
                f"{root}: this run's hidden split was drawn by a swarm-evo older than issue 53 (hidden rows under "
                "new ids, always a random split; its record has no 'relation'), which this version no longer draws: "
                "its nodes' hidden scores would not compare with new ones. Finish the run with the swarm-evo it began "
                "with, or start a new run")
        if recorded is not None and split.digest != recorded.get("digest"):
            raise CompetitionError(
                f"{root}: the hidden split drawn from {self.competition.public_dir} now differs from the one this "
                f"run began with (digest {str(recorded.get('digest'))[:12]}, now {split.digest[:12]}): the public data "
                "changed; resume with the data the run began with, or start a new run")
        self.hidden = HiddenGrader(self.competition, split)
        self._preview = self._text_data = None
        return split

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
        """``{"competition": {...}}`` as docs/CONTRACTS.md describes (public paths only; the grader's
        facts: :meth:`swarm_evo.competition.graders.Grader.facts`)."""
        c = self.competition
        return {
            "competition": {
                "id": c.id,
                **c.grader.facts(),
                "is_lower_better": c.is_lower_better,
                "competition_type": c.competition_type,
                "public_dir": str(self.public_dir),
                "id_column": c.id_column,
                "target_columns": list(c.target_columns),
                "sample_submission": str(self.program_competition.sample_submission_path),
            }
        }

    def data_preview(self) -> str:
        """The public data preview (computed once)."""
        if self._preview is None:
            self._preview = preview_data(self.public_dir)
        return self._preview

    def directions(self) -> None:
        """The Evolution Log's default ML catalogue applies."""
        return None

    def has_text_data(self) -> bool:
        """A free-text column in the public train.csv (computed once;
        :func:`swarm_evo.competition.text_columns.has_free_text`)."""
        if self._text_data is None:
            self._text_data = has_free_text(self.public_dir)
        return self._text_data

    def static_check(self, code: str) -> list[str]:
        """Markers, compiles, writes submission.csv, prints the metric line (seed 003)."""
        return static_check(code, self.loci)

    def execution_problems(self, result, workdir: Path, submission_errors: list[str] | None = None) -> list[str]:
        """Why an execution counts as failed for the debug chain (empty list = success):
        an exception/timeout/OOM, a missing or invalid submission (``submission_errors`` when the
        caller checked it, else checked now against :attr:`program_competition`), or no finite
        metric line."""
        problems: list[str] = []
        if result.exc_type:
            info = result.exc_info or "the program failed"
            problems.append(info if info.startswith(result.exc_type) else f"{result.exc_type}: {info}")
        if submission_errors is None:
            submission_errors = validate_submission(workdir / SUBMISSION, self.program_competition)
        for err in submission_errors:
            problems.append(f"submission: {err}")
        metric = parse_metric(result.stdout)
        if metric is None:
            problems.append("no final line 'Validation metric: <number>' in stdout")
        elif not math.isfinite(metric):
            problems.append(f"the validation metric is not finite ({metric})")
        return problems

    def assess(self, sandbox: Sandbox, code: str, workdir: Path, timeout: float) -> Assessment:
        """Run the program once in ``workdir`` (a stale submission is removed first). With a
        hidden split, a valid submission is split by the host: its hidden rows graded into
        ``hidden_score``, its real rows left as the node's submission (a submission whose hidden
        rows cannot be graded is a submission problem, and stays whole; a grading that fails on the
        host's side, the answers or the grader, is :attr:`Assessment.hidden_error`: issue 53, item 10)."""
        remove_entry(workdir / "submission")
        result = sandbox.execute(code, workdir, self.public_dir, timeout)
        metric = parse_metric(result.stdout)
        errors = validate_submission(workdir / SUBMISSION, self.program_competition)
        hidden = hidden_error = None
        if self.hidden is not None and not errors:
            try:
                hidden = self.hidden.split_submission(workdir, SUBMISSION).score
            except InvalidSubmissionError as exc:
                errors = [str(exc)]
            except CompetitionError as exc:  # the host's (answers, grader): recorded, never a crashed step
                hidden_error = str(exc)[:1000]
                log.warning("%s: the host could not grade the hidden rows of the submission: %s", workdir.name, exc)
        return Assessment(
            result=result,
            problems=self.execution_problems(result, workdir, errors),
            metric=metric if metric is not None and math.isfinite(metric) else None,
            hidden_score=hidden,
            hidden_error=hidden_error,
        )

    def review_facts(self, final: Attempt, workdir: Path) -> tuple[list[str], object]:
        """The submission check now (against the competition once the host split the
        submission, else against what the program was shown), and the metric line of stdout."""
        split = final.hidden_score is not None
        return validate_submission(workdir / SUBMISSION, self.competition if split else self.program_competition), \
            PARSE_STDOUT

    def publish_best(self, run_dir: Path, node: Node) -> None:
        """``best_solution.py`` and ``submission/submission.csv`` of ``node``, each replaced atomically."""
        atomic_write_text(run_dir / "best_solution.py", node.code)
        atomic_copy(run_dir / "nodes" / node.id / SUBMISSION, run_dir / SUBMISSION)

    def final_fit(self, sandbox: Sandbox, run_dir: Path, node: Node, timeout: float) -> dict[str, Any]:
        """Run ``node``'s program once more on the competition's own public data (the hidden rows
        back in its training table: issue 41, item 4) in ``RUN_DIR/final_fit/`` (emptied first),
        at most ``timeout`` s. When it runs and writes a valid submission of the competition,
        that submission replaces ``RUN_DIR/submission/submission.csv``; otherwise the node's
        original submission stays.

        Returns ``{"status": "refit" | "original", "node_id", "seconds", "metric" (what the
        refit printed, or None), "reason" (why the original stays; None for a refit)}``.
        Raises SandboxError only when the sandbox itself fails.
        """
        workdir = Path(run_dir) / FINAL_FIT_DIR
        remove_entry(workdir)
        workdir.mkdir(parents=True)
        result = sandbox.execute(node.code, workdir, self.competition.public_dir, timeout)
        problems = self.execution_problems(result, workdir, validate_submission(workdir / SUBMISSION, self.competition))
        metric = parse_metric(result.stdout)
        outcome: dict[str, Any] = {"node_id": node.id, "seconds": round(result.exec_time or 0.0, 3),
                                   "metric": metric if metric is not None and math.isfinite(metric) else None}
        if problems:
            return {**outcome, "status": "original", "reason": "; ".join(problems)[:1000]}
        try:
            atomic_copy(workdir / SUBMISSION, Path(run_dir) / SUBMISSION)
        except OSError as exc:
            return {**outcome, "status": "original", "reason": f"its submission cannot be copied: {exc}"}
        return {**outcome, "status": "refit", "reason": None}

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
