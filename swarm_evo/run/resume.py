"""Resuming a run from its run directory after a crash (SPEC §5: the journal is the source of truth).

A run process can die at any moment: SIGKILL during a model call, during an execution, while
a file is being written. What survives is the run directory. The journal is rewritten
atomically (``os.replace``), so it always parses and holds exactly the nodes whose step
finished; everything else is brought back in line with it when the run is opened again:

* the step(s) in flight left a node directory (prompt, program, output) but no journal entry:
  the directory moves to ``RUN_DIR/interrupted/<node_id>/`` (kept for inspection, never
  counted) and the step is redone in a fresh slot, so the budget (``len(journal)``) counts it
  once;
* temporary files of interrupted atomic writes (``.<name>.*.tmp``) are removed;
* the run's age goes on from the larger of the journal's ``elapsed_seconds`` (written at each
  append) and ``RUN_DIR/run_state.json`` (written every 30 s while the run is open), so the
  time of a step killed long after the last append still counts
  (:func:`swarm_evo.run.budget.recorded_elapsed`);
* the experience pool and the dispatcher's EMA scores are updated after the journal append,
  so a kill in between leaves them one node behind: the missing experience records are added
  and the missing dispatcher updates applied (each node exactly once, from the quality the
  journal stored in ``node.metadata["quality"]``); a half-written experience line is dropped
  (:class:`~swarm_evo.learning.experience.ExperiencePool`);
* epochs continue from the journal's length (an epoch is a count of appended nodes, issue 52),
  the phase from whether Phase 2 nodes exist and the valid pool from the journal (the flow
  derives them; nothing to repair): Phase 1 goes on drafting until the valid pool holds K.

:func:`read_run_info` reads what a resume needs from ``RUN_DIR/journal.json`` (objective, data
directory, configuration, policy); :func:`reconcile` does the repairs. No Prefect here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from swarm_evo.config import RunConfig
from swarm_evo.learning.dispatcher import Dispatcher
from swarm_evo.learning.experience import ExperiencePool, record_for
from swarm_evo.population.journal import JOURNAL_FILE, Journal
from swarm_evo.population.node import utc_now

INTERRUPTED_DIR = "interrupted"
"""``RUN_DIR/interrupted/<node_id>/``: files of steps that were in flight when the run died."""


class RunDirectoryError(ValueError):
    """A run directory that belongs to another competition or cannot be used or resumed."""


class RunInfo(BaseModel):
    """What ``RUN_DIR/journal.json`` says about its run (``journal.info``), checked.

    Fields: ``competition_id`` or ``problem`` (exactly one), ``data_dir`` (absolute, or None
    for a problem without data), ``config`` (the run's whole configuration), ``policy``,
    ``llm_block`` (the name of the LLM settings block the run was started with, if any: the API
    key is never stored), ``nodes`` (journal length).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    competition_id: str | None = None
    problem: str | None = None
    data_dir: str | None = None
    config: RunConfig
    policy: str
    llm_block: str | None = None
    nodes: int


def recorded_policy(info: dict, nodes: int) -> str | None:
    """The search policy a journal's nodes were made with: ``info["policy"]``, or
    ``two_phase`` for nodes written before the key existed; None for a journal without nodes
    or key."""
    return info.get("policy") or ("two_phase" if nodes else None)


def check_policy(journal: Journal, policy: str) -> None:
    """Refuse to continue a journal with nodes under another search policy (SPEC §12: mixing
    policies in one run would spoil the ablation).

    Raises:
        RunDirectoryError: one line naming the journal, its policy and the fix.
    """
    previous = recorded_policy(journal.info, len(journal))
    if len(journal) and previous not in (None, policy):
        raise RunDirectoryError(
            f"{journal.path} holds a {previous} run: continue it with policy {previous} "
            "or choose another run directory (--run-dir)"
        )


def read_run_info(run_dir: Path) -> RunInfo:
    """Read and check ``run_dir/journal.json`` for a resume.

    Raises:
        RunDirectoryError: no journal there (not a run directory), the journal does not parse,
            or its ``info`` lacks the competition/problem or the configuration; one line
            naming the file and the fix.
    """
    path = Path(run_dir) / JOURNAL_FILE
    if not path.is_file():
        raise RunDirectoryError(
            f"{path} not found: {run_dir} is not a run directory (start a run with `swarm-evo run`)"
        )
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RunDirectoryError(f"{path}: cannot read the journal ({exc}); it cannot be resumed") from None
    info = raw.get("info") or {}
    if (info.get("competition_id") is None) == (info.get("problem") is None):
        raise RunDirectoryError(
            f"{path}: info names neither a competition_id nor a problem; it cannot be resumed (start a new run)"
        )
    if not isinstance(info.get("config"), dict):
        raise RunDirectoryError(f"{path}: info has no config; it cannot be resumed (start a new run)")
    try:
        config = RunConfig.model_validate(info["config"])
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RunDirectoryError(f"{path}: info.config.{where}: {first['msg']}; it cannot be resumed") from None
    nodes = raw.get("nodes") or []
    return RunInfo(
        competition_id=info.get("competition_id"),
        problem=info.get("problem"),
        data_dir=info.get("data_dir"),
        config=config,
        policy=recorded_policy(info, len(nodes)) or config.search.policy,
        llm_block=info.get("llm_block"),
        nodes=len(nodes),
    )


class ResumeReport(BaseModel):
    """What :func:`reconcile` repaired (recorded in ``journal.info["resumes"]``)."""

    model_config = ConfigDict(extra="forbid")

    nodes: int
    interrupted_nodes: list[str] = []
    temp_files_removed: int = 0
    experience_records_added: int = 0
    experience_partial_line_dropped: bool = False
    dispatcher_updates_applied: int = 0
    containers_removed: list[str] = []

    @property
    def repaired(self) -> bool:
        """True when anything was out of line with the journal."""
        return bool(
            self.interrupted_nodes or self.temp_files_removed or self.experience_records_added
            or self.experience_partial_line_dropped or self.dispatcher_updates_applied or self.containers_removed
        )


def move_interrupted_nodes(run_dir: Path, journal: Journal) -> list[str]:
    """Move ``RUN_DIR/nodes/<id>/`` directories without a journal node to ``RUN_DIR/interrupted/``.

    Returns the moved ids. A name already taken under ``interrupted/`` gets a ``-2``, ``-3``,
    ... suffix, so nothing is overwritten.
    """
    nodes_dir = Path(run_dir) / "nodes"
    if not nodes_dir.is_dir():
        return []
    known = {n.id for n in journal.nodes}
    moved = []
    for entry in sorted(nodes_dir.iterdir()):
        if not entry.is_dir() or entry.name in known:
            continue
        target = Path(run_dir) / INTERRUPTED_DIR / entry.name
        k = 2
        while target.exists():
            target = target.with_name(f"{entry.name}-{k}")
            k += 1
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(entry), str(target))
        moved.append(entry.name)
    return moved


def remove_temp_files(run_dir: Path) -> int:
    """Delete leftovers of interrupted atomic writes (``.<name>.*.tmp``) outside the node
    directories (which belong to programs); returns how many."""
    count = 0
    for path in Path(run_dir).rglob(".*.tmp"):
        rel = path.relative_to(run_dir).parts
        if rel[0] in ("nodes", INTERRUPTED_DIR) or not path.is_file():
            continue
        path.unlink()
        count += 1
    return count


def replay_learning(journal: Journal, experience: ExperiencePool, dispatcher: Dispatcher) -> tuple[int, int]:
    """Fold the journal nodes that the experience pool or the dispatcher missed into them, in
    step order, each exactly once. Returns ``(records added, dispatcher updates applied)``.

    A dispatcher state saved before it listed its applied nodes (``applied`` None) is taken
    as up to date with the journal.
    """
    recorded = experience.node_ids()
    if dispatcher.applied is None:
        dispatcher.applied = {n.id for n in journal.nodes}
    added = applied = 0
    for node in journal.nodes:
        if not node.agent_id:
            continue
        quality = float(node.metadata.get("quality") or 0.0)
        if node.id not in dispatcher.applied:
            dispatcher.update(node.agent_id, node.operation, quality, node.id)
            applied += 1
        if node.id not in recorded:
            experience.add(record_for(node, quality))
            added += 1
    return added, applied


def reconcile(
    run_dir: Path,
    journal: Journal,
    experience: ExperiencePool,
    dispatcher: Dispatcher,
    containers_removed: list[str] | None = None,
) -> ResumeReport:
    """Bring a continued run directory in line with its journal (see the module docstring).

    ``containers_removed`` lists the sandbox containers the caller removed (Docker backend).
    Appends the report to ``journal.info["resumes"]`` and saves the journal.

    Raises:
        JournalError: the journal cannot be saved.
    """
    run_dir = Path(run_dir)
    moved = move_interrupted_nodes(run_dir, journal)
    temp = remove_temp_files(run_dir)
    added, applied = replay_learning(journal, experience, dispatcher)
    report = ResumeReport(
        nodes=len(journal),
        interrupted_nodes=moved,
        temp_files_removed=temp,
        experience_records_added=added,
        experience_partial_line_dropped=experience.dropped_partial_line,
        dispatcher_updates_applied=applied,
        containers_removed=list(containers_removed or []),
    )
    journal.info.setdefault("resumes", []).append({"at": utc_now(), **report.model_dump()})
    journal.save()
    return report


__all__ = [
    "INTERRUPTED_DIR",
    "ResumeReport",
    "RunDirectoryError",
    "RunInfo",
    "check_policy",
    "recorded_policy",
    "move_interrupted_nodes",
    "read_run_info",
    "reconcile",
    "remove_temp_files",
    "replay_learning",
]
