"""Journal: every node of a run, the run's source of truth (SPEC §5).

``RUN_DIR/journal.json`` is rewritten atomically (temporary file in the same directory, then
``os.replace``) after every append, so a crash loses at most the step in flight and a reader
never sees a half-written file. Appends are serialised by a lock, so parallel steps may share
one Journal object.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable

from swarm_evo.population.genes import (
    DEFAULT_STUB_THRESHOLD,
    LOCI,
    REQUIRED_NON_STUB,
    validate_genes,
)
from swarm_evo.population import ranking
from swarm_evo.population.node import READ_ANY_OPERATION, Node
from swarm_evo.sandbox.safe_read import open_program_file

JOURNAL_FILE = "journal.json"

RESULT_FILE = "result.json"
"""``RUN_DIR/result.json``: the main flow's return value (the run summary of
``swarm_evo.reporting.report`` plus ``run_dir``, ``epochs``, ``policy``), written at the end of a
run so that a reader on another machine (a sweep reading the run store) has it without Prefect's
result storage; the run store's mirror uploads it last, so its presence there says the store's
copy of the run's reports is final."""


class JournalError(ValueError):
    """A journal file that cannot be read, or an append that breaks the journal's rules."""


def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` through a temporary file in its folder and ``os.replace`` (atomic on
    POSIX): ``write(fh)`` fills the binary file, which is flushed and fsynced before the
    rename, so a reader (or a crash) sees the old file or the whole new one, never a part. The
    folder is created if needed; the temporary file is removed when ``write`` raises."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_write`)."""
    data = text.encode("utf-8")
    atomic_write(path, lambda fh: fh.write(data))


def atomic_copy(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` through a temporary file and ``os.replace``: a reader never
    sees a half-written file, and a crash leaves the old one.

    ``source`` may be a file a program wrote: it is opened as
    :func:`~swarm_evo.sandbox.safe_read.open_program_file` does (no link followed, never
    blocks on a FIFO).

    Raises:
        FileNotFoundError: ``source`` does not exist.
        ProgramFileError: ``source`` is not a regular file.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as dst, open_program_file(source) as src:
            shutil.copyfileobj(src, dst)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class Journal:
    """All nodes of a run, in append order, plus run-level ``info`` (competition, seed, config).

    Args:
        path: the journal file (``RUN_DIR/journal.json``); None keeps it in memory only.
        info: run-level facts written next to the nodes (JSON-serialisable).
        loci: the loci a valid node must carry (default: the 7 ML loci).
        required: the loci that must not be stubs (default: DATA and MODEL).
        stub_threshold: see :func:`swarm_evo.population.genes.is_stub`.
    """

    def __init__(
        self,
        path: Path | None = None,
        info: dict[str, Any] | None = None,
        loci: Iterable[str] = LOCI,
        stub_threshold: int = DEFAULT_STUB_THRESHOLD,
        required: Iterable[str] = REQUIRED_NON_STUB,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.info: dict[str, Any] = dict(info or {})
        self.loci = tuple(loci)
        self.required = tuple(required)
        self.stub_threshold = stub_threshold
        self._nodes: list[Node] = []
        self._by_id: dict[str, Node] = {}
        self._lock = threading.RLock()
        self.after_save: Callable[[], None] | None = None
        """Called after every write of the file (the run store's mirror asks for a sync)."""
        self.before_save: Callable[[], None] | None = None
        """Called before every write of the file; what it raises stops the write (a run in its
        directory store's own folder checks that it is still the writer: issue 53, item 1)."""

    # ----------------------------------------------------------------- persistence
    @classmethod
    def load(cls, path: Path, **kwargs: Any) -> "Journal":
        """Read a journal file written by :meth:`save`.

        Raises:
            JournalError: the file is not valid JSON or a node does not match the Node schema;
                the message names the file and the node position.
        """
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise JournalError(f"{path}: cannot read journal ({exc})") from exc
        journal = cls(path=path, info=data.get("info") or {}, **kwargs)
        for i, raw in enumerate(data.get("nodes") or []):
            try:
                node = Node.model_validate(raw, context=READ_ANY_OPERATION)  # a plug-in's nodes stay readable
            except ValueError as exc:
                raise JournalError(f"{path}: node {i + 1} is invalid: {exc}") from exc
            if node.id in journal._by_id:
                raise JournalError(f"{path}: node {i + 1} repeats id {node.id}")
            journal._nodes.append(node)
            journal._by_id[node.id] = node
        return journal

    def to_dict(self) -> dict[str, Any]:
        """The journal as written to disk: ``{"info": {...}, "nodes": [node, ...]}``."""
        with self._lock:
            return {"info": self.info, "nodes": [n.model_dump(mode="json") for n in self._nodes]}

    def save(self) -> None:
        """Rewrite the journal file atomically (no-op for an in-memory journal).

        Raises:
            whatever :attr:`before_save` raises (nothing is written then); OSError.
        """
        if self.path is None:
            return
        if self.before_save is not None:
            self.before_save()
        with self._lock:
            atomic_write_text(self.path, json.dumps(self.to_dict(), indent=1))
        if self.after_save is not None:
            self.after_save()

    # ----------------------------------------------------------------- mutation
    def append(self, node: Node, *, save: bool = True) -> Node:
        """Assign ``node.step`` (1-based journal position), add the node, save (unless ``save``
        is False: the caller saves, e.g. after handing in the node's work); return it.

        Raises:
            JournalError: a node with the same id is already in the journal.
        """
        with self._lock:
            if node.id in self._by_id:
                raise JournalError(f"node {node.id} is already in the journal")
            node.step = len(self._nodes) + 1
            self._nodes.append(node)
            self._by_id[node.id] = node
            if save:
                self.save()
            return node

    # ----------------------------------------------------------------- queries
    @property
    def nodes(self) -> list[Node]:
        """A snapshot list of the nodes in step order."""
        with self._lock:
            return list(self._nodes)

    def __len__(self) -> int:
        with self._lock:
            return len(self._nodes)

    def get(self, node_id: str) -> Node:
        """The node with this id. Raises KeyError when absent."""
        with self._lock:
            return self._by_id[node_id]

    def is_valid(self, node: Node) -> bool:
        """Valid-pool membership (SPEC §6): not buggy, not dead, and validate_genes passes."""
        return (
            not node.is_buggy
            and not node.dead
            and ranking.fitness(node) is not None
            and validate_genes(node.genes, self.loci, self.required, stub_threshold=self.stub_threshold)
        )

    def valid_pool(self) -> list[Node]:
        """The valid nodes, in step order."""
        return [n for n in self.nodes if self.is_valid(n)]

    def best_node(self) -> Node | None:
        """The valid node with the highest direction-aware fitness (earliest on ties), or None
        (:func:`swarm_evo.population.ranking.best`)."""
        return ranking.best(self.valid_pool())

    def submission_candidates(self) -> list[tuple[Node, str]]:
        """Every node the run could hand in, best first, each with why (issue 13, issue 31).

        The valid nodes by direction-aware fitness (earliest on ties; the hidden-split score
        where the run has one: :mod:`swarm_evo.population.ranking`); after them, when no node
        is valid, the nodes that passed every deterministic check (they ran, their submission is
        valid, their metric line parsed: ``metadata.facts_passed``) although the LLM reviewer
        flagged them — a strict reviewer must not leave a run without a submission. The hand-in
        (``step.persistence.publish_best``) takes the first whose files can be copied and goes
        down the list when one cannot. Empty when no node ran successfully.
        """
        pool = ranking.ranked(self.valid_pool())  # best first, earliest on ties
        if pool:
            direction = "lower" if pool[0].lower_is_better else "higher"
            basis = "hidden-split score" if pool[0].hidden_score is not None else "validation metric"
            return [(n, f"{'the best' if i == 0 else f'rank {i + 1}'} of {len(pool)} valid node(s) by {basis} "
                        f"({direction} is better)") for i, n in enumerate(pool)]
        passed = ranking.ranked(n for n in self.nodes if n.metadata.get("facts_passed") and n.metric_value is not None)
        out = []
        for i, node in enumerate(passed):
            flagged = "; ".join(r for r in (node.metadata.get("review") or {}).get("reasons", [])
                                if not r.startswith("note:"))[:500]
            rank = "has the best metric" if i == 0 else f"is rank {i + 1} by metric"
            out.append((node, f"no node passed the review; node {node.id[:8]} (step {node.step}) passed every "
                              f"deterministic check (it ran, wrote a valid submission, printed its metric) and "
                              f"{rank} of {len(passed)} such node(s); the reviewer flagged it: "
                              f"{flagged or 'buggy'}"))
        return out

    def submission_candidate(self) -> tuple[Node | None, str]:
        """The first of :meth:`submission_candidates` and why; ``(None, why)`` when no node ran
        successfully with a valid submission and a metric line."""
        candidates = self.submission_candidates()
        if not candidates:
            return None, "no node ran successfully with a valid submission and a metric line"
        return candidates[0]

    def children_of(self, node_id: str) -> list[Node]:
        """Nodes that descend from ``node_id``: its mutates and merges, and merges using its genes."""
        return [
            n
            for n in self.nodes
            if n.parent_id == node_id or node_id in n.gene_sources.values()
        ]

    def count(self, *, dead: bool | None = None, phase: int | None = None) -> int:
        """Number of nodes, optionally only dead/alive ones or one phase's."""
        return sum(
            1
            for n in self.nodes
            if (dead is None or n.dead == dead) and (phase is None or n.phase == phase)
        )
