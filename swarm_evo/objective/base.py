"""What a run optimises: the interface between the search and its objective (SPEC §4, §11).

The two-phase search is the same for a Kaggle competition and for a program-optimisation
problem (seed 002: "circle packing, TSP and code optimisation all run through the same
architecture"). What differs is behind :class:`Objective`: the loci of the programs, what the
prompts say, how a program is run and scored, and what the end of a run writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field

from swarm_evo.population.node import Node
from swarm_evo.sandbox import ExecutionResult, Sandbox
from swarm_evo.search.debug_chain import Attempt


class Assessment(BaseModel):
    """One program run and judged.

    Fields:
        result: the sandbox execution (for problems: the candidate's first failing run, or
            its first run); the debug chain shows its output to the model.
        problems: why the program counts as failed (empty = it worked); one sentence each.
        metric: the score in the objective's own units and direction (competitions: the
            validation metric the program printed; problems: ``combined_score``); None when
            the program failed or printed none.
        evaluation: for problems, ``EvaluationResult.summary()`` (score, correct, error,
            public and auxiliary metrics); None for competitions.
        hidden_score: competitions with a hidden split (issue 41): the host's grade of the
            submission's hidden rows, in the metric's units and direction; None otherwise, or
            when the submission was not valid.
        hidden_error: the host's error when it could not grade a valid submission's hidden rows
            (issue 53, item 10: the answers or the grader, never the program's fault); the node
            records it and is not ranked.
    """

    result: ExecutionResult
    problems: list[str] = Field(default_factory=list)
    metric: float | None = None
    evaluation: dict[str, Any] | None = None
    hidden_score: float | None = None
    hidden_error: str | None = None


class Objective(Protocol):
    """A competition or a problem, as the search sees it.

    Attributes:
        kind: ``"competition"`` or ``"problem"``.
        id: the competition id or the problem name (journal ``info.competition_id`` /
            ``info.problem``, artifact descriptions).
        loci: the section names of a program, in order (7 ML loci for competitions).
        required_loci: loci that must carry real code (validate_genes).
        is_lower_better: direction of :attr:`Assessment.metric` (problems: False).
        agent_texts_dir: folder with the agents' starting texts (role.md, draft.md, ...).
    """

    kind: str
    id: str
    loci: tuple[str, ...]
    required_loci: tuple[str, ...]
    is_lower_better: bool
    agent_texts_dir: Path

    def prompt_view(self) -> dict[str, Any]:
        """The ``objective`` variable of the prompt templates (never private answers)."""
        ...

    def offline_view(self) -> dict[str, Any]:
        """The keys the offline model's context gets (``competition`` or ``problem``)."""
        ...

    def data_preview(self) -> str:
        """A preview of the public data for prompts ("" when there is no data)."""
        ...

    def directions(self) -> list[tuple[str, tuple[str, ...]]] | None:
        """Search directions for the Evolution Log (``(text, keywords)``), or None for the
        default ML catalogue."""
        ...

    def has_text_data(self) -> bool:
        """True when the inputs include free text (the Evolution Log's text-only directions)."""
        ...

    def static_check(self, code: str) -> list[str]:
        """Problems found without running the program (seed 003), phrased for the model."""
        ...

    def assess(self, sandbox: Sandbox, code: str, workdir: Path, timeout: float) -> Assessment:
        """Run ``code`` in ``workdir`` through ``sandbox`` (at most ``timeout`` s per run) and
        judge it. Raises SandboxError only when the sandbox itself fails."""
        ...

    def review_facts(self, final: Attempt, workdir: Path) -> tuple[list[str], float | None | object]:
        """``(errors, metric)`` the review decides on besides the execution of ``final``:
        competitions: the submission check and :data:`swarm_evo.search.review.PARSE_STDOUT` (the
        metric line of stdout); problems: the evaluation's error and ``combined_score``."""
        ...

    def publish_best(self, run_dir: Path, node: Node) -> None:
        """Copy ``node``'s program to ``RUN_DIR/best_solution.py`` and its product to the run
        directory (competitions: ``submission/submission.csv``; problems: ``best_metrics.json``),
        each file replaced atomically. Called every time the best node changes, so a run
        killed from outside keeps its best work (issue 13)."""
        ...

    def finalize(self, run_dir: Path, handed_in: Node | None) -> BaseModel:
        """Write the run's end products for ``handed_in`` (the node whose work
        :meth:`publish_best` put in the run directory; None when no node could be handed in)
        and return the report (competitions: a graded ``CompetitionReport``; problems: a
        ``ProblemReport``)."""
        ...
