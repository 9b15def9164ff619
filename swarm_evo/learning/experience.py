"""The experience pool: what each step achieved, for prompts and agent evolution (SPEC §9).

One record per journal node, appended as a JSON line to ``RUN_DIR/experience.jsonl``:
``{agent_id, operation, quality, plan_summary, node_id, step, metric, exc_type, created_at}``.
Prompts get the top-k records *of their own operation* (the upstream query asked for an
operation name no record had, so its prompts never got an example); agent evolution reads an
agent's records for its statistics and its best and worst plans.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from pydantic import BaseModel, Field

from swarm_evo.learning.quality import node_quality
from swarm_evo.population.journal import Journal, atomic_write_text
from swarm_evo.population.node import Node, utc_now

EXPERIENCE_FILE = "experience.jsonl"


class ExperienceRecord(BaseModel):
    """One step's outcome. ``quality`` is :func:`swarm_evo.learning.quality.node_quality` at append time
    (prompts rank by the current one: :meth:`ExperiencePool.top_k` with the journal)."""

    agent_id: str
    operation: str
    quality: float
    plan_summary: str
    node_id: str
    step: int | None = None
    metric: float | None = None
    exc_type: str | None = None
    created_at: str = Field(default_factory=utc_now)

    @property
    def succeeded(self) -> bool:
        """The node was valid (quality > 0)."""
        return self.quality > 0


def plan_summary(node: Node, limit: int = 240) -> str:
    """A one-line summary of a node's approach: its approach tag and the plan's first sentence."""
    plan = " ".join((node.plan or "").split())
    first = plan.split(". ")[0].strip().rstrip(".")
    tag = (node.approach_tag or "").strip()
    if tag and first and tag in first:
        parts = [first]  # the plan already names the approach
    else:
        parts = [p for p in (tag, first) if p]
    text = " — ".join(dict.fromkeys(parts)) or (node.exc_type or "no plan")
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class ExperiencePool:
    """Records in ``RUN_DIR/experience.jsonl`` (loaded on open, appended per node). Thread-safe.

    A last line cut short by a crash during an append (no trailing newline, not a record) is
    dropped on open and the file rewritten (``dropped_partial_line`` tells); any other bad
    line raises ValueError naming the file and line.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._records: list[ExperienceRecord] = []
        self._lock = threading.Lock()
        self.dropped_partial_line = False
        if self.path.exists():
            text = self.path.read_text(encoding="utf-8")
            lines = text.splitlines()
            for i, line in enumerate(lines):
                if not line.strip():
                    continue
                try:
                    self._records.append(ExperienceRecord.model_validate_json(line))
                except ValueError:
                    if i == len(lines) - 1 and not text.endswith("\n"):
                        # The process died while appending this line (SIGKILL): drop it.
                        self.dropped_partial_line = True
                        break
                    raise ValueError(f"{self.path}: line {i + 1} is not an experience record") from None
            if self.dropped_partial_line:
                atomic_write_text(self.path, "".join(r.model_dump_json() + "\n" for r in self._records))

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def add(self, record: ExperienceRecord) -> None:
        """Append a record (one JSON line, flushed and fsynced)."""
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(record.model_dump_json() + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            self._records.append(record)

    def node_ids(self) -> set[str]:
        """Ids of the journal nodes that have a record."""
        with self._lock:
            return {r.node_id for r in self._records}

    def records(self, operation: str | None = None, agent_id: str | None = None) -> list[ExperienceRecord]:
        """Records in append order, optionally of one operation and/or one agent."""
        with self._lock:
            return [
                r for r in self._records
                if (operation is None or r.operation == operation) and (agent_id is None or r.agent_id == agent_id)
            ]

    def top_k(self, operation: str, k: int, journal: Journal | None = None) -> list[ExperienceRecord]:
        """The ``k`` best successful records of ``operation``: quality descending, newer first on ties.

        With ``journal``, each record's quality is recomputed now (:func:`current_quality`), so
        ranks follow the current valid pool rather than the pool when the record was appended
        (issue 13: the first valid node otherwise shows 1.00 forever); the returned records
        carry that current quality. Without it, the stored quality ranks.
        """
        records = self.records(operation=operation)
        if journal is not None:
            records = [r.model_copy(update={"quality": current_quality(journal, r)}) for r in records]
        ranked = [r for r in records if r.succeeded]
        ranked = sorted(enumerate(ranked), key=lambda item: (-item[1].quality, -item[0]))
        return [r for _, r in ranked[: max(0, k)]]

    def examples(self, operation: str, k: int, journal: Journal | None = None) -> list[dict]:
        """:meth:`top_k` as plain dicts for prompt templates (``skills/experience.j2``); pass the
        run's ``journal`` so the ranking and the quality shown are the current ones."""
        return [r.model_dump() for r in self.top_k(operation, k, journal)]


def current_quality(journal: Journal, record: ExperienceRecord) -> float:
    """The record's node quality now: :func:`swarm_evo.learning.quality.node_quality` of its journal
    node among the journal's current valid nodes (SPEC §9: percentile rank of its fitness; 0
    when buggy). A record whose node is not in the journal keeps its stored quality."""
    try:
        node = journal.get(record.node_id)
    except KeyError:
        return record.quality
    return node_quality(journal, node)


def record_for(node: Node, quality: float) -> ExperienceRecord:
    """The experience record of a journal node (its agent must be set).

    Raises:
        ValueError: the node has no agent_id.
    """
    if not node.agent_id:
        raise ValueError(f"node {node.id} has no agent_id")
    return ExperienceRecord(
        agent_id=node.agent_id,
        operation=node.operation,
        quality=quality,
        plan_summary=plan_summary(node),
        node_id=node.id,
        step=node.step,
        metric=node.metric_value,
        exc_type=node.exc_type,
    )
