"""Execution lanes (issue 52, item 2): the model never holds a slot.

A run's execution slots — ``search.parallel_workers``, or its GPU slots
(:func:`swarm_evo.sandbox.gpu_slots.execution_workers`) — are held only while a program runs.
A step writes its program (the model), has its fixes written and is reviewed (the model again)
without one; it takes a lane for each execution (:meth:`ExecutionLanes.hold`), waiting when
every lane is busy, and gives it back when the program ends. So programs of other steps run
while the model writes, and the scheduler (``flows/_scheduler.py``) keeps proposals written
ahead of the free lanes (``search.proposal_backlog``).

The scheduler runs at most ``lanes + search.proposal_backlog`` steps at once
(:func:`backlog_size`: default one per lane): while one step's program runs, another step's
program is written or reviewed; with a backlog of 0 a step holds its lane's turn from its first
model call to its append, as before issue 52. A :class:`StepTicket` carries each step's start
(the run's elapsed seconds, the journal's length then: what its proposal is written from) into
the step; each execution records its lane, its wait, its start and end and the journal's length
when it started (:class:`ExecutionRecord`: the node's ``metadata.schedule.executions``, the slot
timeline, the proposal's staleness).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, Iterator

from swarm_evo.sandbox.gpu_slots import execution_workers


@dataclass
class StepTicket:
    """One step as the scheduler sees it: when it started (``started_s``, the run's elapsed
    seconds; ``nodes_at_start``, the journal's length then: what its proposal is written from),
    and whether an execution of it has begun."""

    started_s: float = 0.0
    nodes_at_start: int = 0
    executing: bool = False

    def schedule(self) -> dict:
        """The node's ``metadata.schedule`` as the step starts: ``started_s``, ``nodes_at_start``."""
        return {"started_s": round(self.started_s, 3), "nodes_at_start": self.nodes_at_start}


CURRENT_TICKET: ContextVar[StepTicket | None] = ContextVar("swarm_evo_step_ticket", default=None)
"""The ticket of the step running in this context (set by the scheduler when it starts the step;
None outside a scheduled step, e.g. the final fit or a test)."""


@dataclass
class ExecutionRecord:
    """One execution in a lane. Times are the run's elapsed seconds (``Budget.elapsed``).

    Attributes:
        lane: the lane that ran it (0-based). wait_s: seconds spent waiting for a free lane.
        start_s, end_s: when the program started and ended. nodes_at_start: the journal's length
            when it started (a proposal's staleness is this minus the step's ``nodes_at_start``).
    """

    lane: int
    wait_s: float
    start_s: float
    end_s: float = 0.0
    nodes_at_start: int = 0

    def as_dict(self) -> dict:
        """The node's ``metadata.schedule.executions`` entry (rounded to milliseconds)."""
        return {"lane": self.lane, "wait_s": round(self.wait_s, 3), "start_s": round(self.start_s, 3),
                "end_s": round(self.end_s, 3), "nodes_at_start": self.nodes_at_start}


class ExecutionLanes:
    """``size`` lanes; each execution holds one (the lowest free) while its program runs.

    Args:
        size: the lanes (≥ 1).
        elapsed: the run's clock (seconds since its start: ``Budget.elapsed``).
        journal_length: how many nodes the journal holds now.
    """

    def __init__(self, size: int, elapsed: Callable[[], float] = time.monotonic,
                 journal_length: Callable[[], int] = lambda: 0) -> None:
        if size < 1:
            raise ValueError(f"execution lanes must be >= 1, got {size}")
        self.size = size
        self._elapsed = elapsed
        self._journal_length = journal_length
        self._cond = threading.Condition()
        self._free = list(range(size))
        self.waiting = 0

    @property
    def free(self) -> int:
        """Lanes no program holds now."""
        with self._cond:
            return len(self._free)

    @property
    def busy(self) -> int:
        """Lanes a program holds now."""
        return self.size - self.free

    @contextmanager
    def hold(self) -> Iterator[ExecutionRecord]:
        """Wait for a free lane, hold it for the ``with`` block (one program's run) and give it back.

        Marks the current step's ticket (:data:`CURRENT_TICKET`) as executing. Yields the
        :class:`ExecutionRecord`, whose ``end_s`` is set when the block ends.
        """
        asked = self._elapsed()
        with self._cond:
            self.waiting += 1
            try:
                while not self._free:
                    self._cond.wait()
                lane = self._free.pop(0)
            finally:
                self.waiting -= 1
        ticket = CURRENT_TICKET.get()
        if ticket is not None:
            ticket.executing = True
        start = self._elapsed()
        record = ExecutionRecord(lane=lane, wait_s=max(0.0, start - asked), start_s=start,
                                 nodes_at_start=self._journal_length())
        try:
            yield record
        finally:
            record.end_s = self._elapsed()
            with self._cond:
                self._free.append(lane)
                self._free.sort()
                self._cond.notify_all()


def backlog_size(config) -> int:
    """``search.proposal_backlog``, or one per execution slot when it is None.

    Args:
        config: the run's ``RunConfig``.
    """
    backlog = config.search.proposal_backlog
    return execution_workers(config) if backlog is None else backlog


def model_call_limit(config) -> int | None:
    """Model calls of a run at once (``model.max_concurrent_calls``); None: no limit beyond the
    scheduler's (at most one call per step in flight, lanes + backlog, and the agent evolution's)."""
    return config.model.max_concurrent_calls
