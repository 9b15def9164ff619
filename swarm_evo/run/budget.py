"""Budget: the run's node count and time limit (SPEC §6, seed 000 decisions I and J).

* Node budget (I, J): ``max_steps`` journal nodes shared by both phases; dead and alive nodes
  both count, debug attempts do not (they never reach the journal).
* Parallel steps reserve a slot before they start (:meth:`Budget.reserve`) and commit it when
  their node is appended, so ``used + in_flight`` never exceeds ``max_steps`` however many
  steps run at once.
* Time limit: checked before every step (``reserve`` refuses when time is up) and passed down
  as each execution's timeout (:meth:`Budget.exec_timeout`), so no execution overruns the
  run's deadline.
* Resume: construct with ``used = len(journal)`` (or :meth:`Budget.for_journal`), so the
  budget continues from the journal.
* Time across crashes (issue 31): while a run is open, :class:`ElapsedRecorder` rewrites
  ``RUN_DIR/run_state.json`` with the run's elapsed seconds every :data:`RUN_STATE_INTERVAL` s,
  so a killed process loses at most that much of its time; a resume starts from
  :func:`recorded_elapsed` (the larger of that file and the journal's ``elapsed_seconds``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from swarm_evo.population.journal import atomic_write_text

log = logging.getLogger(__name__)

RUN_STATE_FILE = "run_state.json"
"""``RUN_DIR/run_state.json``: ``{"elapsed_seconds": float, "updated_at": ISO time}``, rewritten
atomically by :class:`ElapsedRecorder`."""

RUN_STATE_INTERVAL = 30.0
"""Seconds between two writes of :data:`RUN_STATE_FILE`: the most run time a crash can lose.
A constant, not a setting: one small atomic write per interval costs nothing worth tuning."""


class Budget:
    """Thread-safe node budget and deadline of one run.

    Args:
        max_steps: total journal nodes allowed (both phases).
        used: nodes already in the journal (resume).
        time_limit: wall-clock limit in seconds from ``started_at``; None for no limit.
        started_at: ``clock()`` value when the run started; default: now.
        clock: monotonic clock in seconds (injectable for tests).
    """

    def __init__(
        self,
        max_steps: int,
        used: int = 0,
        time_limit: float | None = None,
        started_at: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_steps < 0:
            raise ValueError(f"max_steps must be >= 0, got {max_steps}")
        if used < 0:
            raise ValueError(f"used must be >= 0, got {used}")
        if time_limit is not None and time_limit < 0:
            raise ValueError(f"time_limit must be >= 0, got {time_limit}")
        self.max_steps = max_steps
        self.time_limit = time_limit
        self.clock = clock
        self.started_at = clock() if started_at is None else started_at
        self._used = used
        self._in_flight: set[int] = set()
        self._lock = threading.Lock()

    @classmethod
    def for_journal(
        cls,
        journal_len: int,
        max_steps: int,
        time_limit: float | None = None,
        elapsed: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> "Budget":
        """A budget resuming a run with ``journal_len`` nodes that had already run ``elapsed`` s."""
        return cls(max_steps, used=journal_len, time_limit=time_limit,
                   started_at=clock() - elapsed, clock=clock)

    # ----------------------------------------------------------------- slots
    def reserve(self) -> int | None:
        """Reserve one step; return its 1-based slot number, or None when the budget or time is up.

        The slot is ``used + in_flight + 1`` (the smallest free number above ``used`` if that one
        is still held after a release); slot numbers are unique among reservations in flight and
        never exceed ``max_steps``.
        """
        with self._lock:
            if self._used + len(self._in_flight) >= self.max_steps or self.time_up():
                return None
            slot = self._used + len(self._in_flight) + 1
            if slot in self._in_flight:
                slot = next(s for s in range(self._used + 1, self.max_steps + 1)
                            if s not in self._in_flight)
            self._in_flight.add(slot)
            return slot

    def commit(self, slot: int) -> None:
        """The reserved step appended its node: it now counts as used.

        Raises:
            ValueError: ``slot`` is not a reservation in flight.
        """
        with self._lock:
            self._take(slot)
            self._used += 1

    def release(self, slot: int) -> None:
        """The reserved step was abandoned before appending a node: free the slot.

        Raises:
            ValueError: ``slot`` is not a reservation in flight.
        """
        with self._lock:
            self._take(slot)

    def _take(self, slot: int) -> None:
        if slot not in self._in_flight:
            raise ValueError(f"slot {slot} is not reserved")
        self._in_flight.remove(slot)

    # ----------------------------------------------------------------- state
    @property
    def used(self) -> int:
        """Nodes counted against the budget (journal nodes)."""
        with self._lock:
            return self._used

    @property
    def in_flight(self) -> int:
        """Reserved steps not yet committed or released."""
        with self._lock:
            return len(self._in_flight)

    @property
    def remaining(self) -> int:
        """Steps that can still be reserved: ``max_steps − used − in_flight`` (never below 0)."""
        with self._lock:
            return max(0, self.max_steps - self._used - len(self._in_flight))

    @property
    def exhausted(self) -> bool:
        """True when no step can be reserved because of the node budget (see :meth:`time_up`)."""
        return self.remaining <= 0

    @property
    def done(self) -> bool:
        """True when no new step may start: budget exhausted or time up."""
        return self.exhausted or self.time_up()

    def elapsed(self) -> float:
        """Seconds since ``started_at``."""
        return self.clock() - self.started_at

    def time_left(self) -> float | None:
        """Seconds until the deadline (≥ 0), or None without a time limit."""
        if self.time_limit is None:
            return None
        return max(0.0, self.time_limit - self.elapsed())

    def time_up(self) -> bool:
        """True when the time limit is set and reached."""
        left = self.time_left()
        return left is not None and left <= 0

    def exec_timeout(self, exec_timeout: float) -> float:
        """An execution's timeout: ``min(exec_timeout, time_left)``, so it ends by the deadline.

        Returns 0 when time is up; callers should not start an execution then.
        """
        left = self.time_left()
        return exec_timeout if left is None else min(exec_timeout, left)

    def __repr__(self) -> str:
        return (f"Budget(max_steps={self.max_steps}, used={self.used}, in_flight={self.in_flight}, "
                f"time_left={self.time_left()})")


def recorded_elapsed(run_dir: Path, journal_info: dict) -> float:
    """Seconds a run had already run when it stopped or died: the larger of
    ``journal_info["elapsed_seconds"]`` (written at each append) and ``RUN_DIR/run_state.json``
    (written every :data:`RUN_STATE_INTERVAL` s); 0.0 when neither has it. A missing or
    unreadable run-state file counts as 0 (never raises)."""
    journal = float(journal_info.get("elapsed_seconds") or 0.0)
    try:
        state = json.loads((Path(run_dir) / RUN_STATE_FILE).read_text(encoding="utf-8"))
        saved = float(state.get("elapsed_seconds") or 0.0)
    except (OSError, ValueError, TypeError, AttributeError):
        saved = 0.0
    return max(journal, saved)


class ElapsedRecorder:
    """Keeps ``RUN_DIR/run_state.json`` up to date with ``budget.elapsed()`` while a run is open.

    :meth:`start` writes the file at once and starts a daemon thread (it never keeps a process
    alive) that rewrites it every ``interval`` s; the thread writes a last time and ends on
    :meth:`stop`, or by itself once ``done()`` is true (the run can start no step and has none
    in flight: no more time to count). The session opens and closes it
    (:func:`swarm_evo.run.session.open_session`, :func:`~swarm_evo.run.session.close_session`).
    Write errors are logged, never raised; a run directory that disappeared ends the thread
    (it is never created again).

    Args:
        budget: the run's budget (its clock).
        path: the file to write (``RUN_DIR/run_state.json``).
        interval: seconds between writes; default :data:`RUN_STATE_INTERVAL`.
        done: called before each write; True ends the thread after a last write.
    """

    def __init__(self, budget: Budget, path: Path, interval: float | None = None,
                 done: Callable[[], bool] | None = None) -> None:
        self.budget = budget
        self.path = Path(path)
        self.interval = RUN_STATE_INTERVAL if interval is None else float(interval)
        self.done = done or (lambda: False)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"run-state-{self.path.parent.name}", daemon=True)

    def start(self) -> "ElapsedRecorder":
        """Write the file now and start the thread; returns self."""
        self.write()
        self._thread.start()
        return self

    def write(self) -> bool:
        """Write the elapsed seconds now (atomic replace). False when the run directory is gone."""
        if not self.path.parent.is_dir():
            return False
        state = {"elapsed_seconds": round(self.budget.elapsed(), 3),
                 "updated_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        try:
            atomic_write_text(self.path, json.dumps(state))
        except OSError as exc:
            log.warning("cannot write %s: %s", self.path, exc)
        return True

    def stop(self) -> None:
        """End the thread after a last write (waits for it; a no-op when it already ended)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    @property
    def running(self) -> bool:
        """True while the thread runs."""
        return self._thread.is_alive()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            if self.done() or not self.write():
                break
        self.write()
