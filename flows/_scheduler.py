"""Steady-state step scheduling (issue 52, items 1 and 2): every lane busy, the model never holding one.

Before issue 52 a run executed its steps in epochs: ``steps_per_epoch`` step subflows, at most
``parallel_workers`` at once, then a wait for **all** of them before the node table, the agent
evolution and the next epoch; the slowest program of every epoch ran alone while the other
slots waited, and a slot waited while the model wrote. Now:

* **Lanes hold programs, not steps.** The run's execution lanes (``search.parallel_workers``, or
  its GPU slots when it is given GPUs: device groups × ``sandbox.slots_per_gpu``,
  :func:`swarm_evo.sandbox.gpu_slots.execution_workers`) are held by an execution only while its
  program runs (:class:`swarm_evo.run.lanes.ExecutionLanes`, taken in
  :func:`swarm_evo.step.execution.execute_program`); a step writes its program, has its fixes
  written and is reviewed without one.
* **Proposals are written ahead.** :class:`StepScheduler` keeps up to lanes +
  ``search.proposal_backlog`` steps in flight (default: one more per lane; 0: one step per lane,
  which then waits while the model writes and reviews), each written from the journal as it is
  when the step starts; each node records the proposal's staleness (``metadata.schedule``: nodes
  appended between its start and its first execution). Model calls have their own limit (``model.max_concurrent_calls``).
  Each step still reserves its budget slot first (SPEC §6: the budget is never exceeded; the time
  limit is checked before every step: :meth:`swarm_evo.run.budget.Budget.reserve`,
  :func:`swarm_evo.step.limits.check_limits`).
* **An epoch is a count of appended nodes**: epoch ``k`` ends when the journal reaches
  ``k · steps_per_epoch`` nodes, and a step belongs to the epoch current when it starts. What
  happens at an epoch's end (the node table, the lanes artifact, the agent evolution when due)
  runs on a thread of its own while the steps go on; a step started meanwhile uses the agent
  texts current at its start (``metadata.agent_generation``). No agent evolution runs once no
  further step can start (it would pay for texts nobody uses).
* **Phases hand over without waiting**: Phase 1 stops starting drafts once K valid nodes exist
  (``keep_going``) and returns with its drafts still in flight (they still count); Phase 2's
  steps start beside them. One scheduler serves the whole run (:func:`open_scheduler`,
  :func:`close_scheduler`, which waits for every step still running).
* **What a person sees**: each execution's lane, wait and times (the slot timeline,
  :mod:`swarm_evo.reporting.slot_timeline`).

Subflows run in threads with the submitting flow's context, so Prefect records each step as a
child of the phase flow that started it.
"""

from __future__ import annotations

import contextvars
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable

from prefect import get_run_logger

from flows._subflow import subflow_context
from swarm_evo.run.lanes import CURRENT_TICKET, ExecutionLanes, StepTicket, backlog_size
from swarm_evo.run.session import get_session
from swarm_evo.step import limits
from tasks.agents import evolve_agents
from tasks.artifacts import publish_lanes, publish_node_table
from tasks.persist import DEAD

CRASHED = object()
"""What a step's future returns when its subflow raised (its budget slot went back)."""

StepChooser = Callable[[], Callable | None]
"""``choose() -> step flow | None``: the step flow the next free lane runs (``draft_step``,
``phase2_step`` ...), or None to start nothing now."""


class StepsCrashedError(RuntimeError):
    """``steps_per_epoch`` steps in a row crashed without appending a node although budget and
    time were left: a systematic fault, which retrying would repeat forever."""


def epoch_of(nodes: int, steps_per_epoch: int) -> int:
    """The epoch a step started with ``nodes`` journal nodes belongs to: ``1 + nodes // steps_per_epoch``."""
    return 1 + nodes // max(1, steps_per_epoch)


class StepScheduler:
    """The run's steps, started without a barrier and written ahead of the lanes (module docstring).
    Not for use from two flows at the same time.

    Args:
        run_dir: the open session's run directory (:func:`swarm_evo.run.session.get_session`).
    """

    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir
        self.session = get_session(run_dir)
        search = self.session.config.search
        self.lanes = self.session.lanes or ExecutionLanes(max(1, search.parallel_workers))
        self.backlog = backlog_size(self.session.config)
        self.max_in_flight = self.lanes.size + self.backlog  # one per lane, and the proposals written ahead
        self.steps_per_epoch = max(1, search.steps_per_epoch)
        self._pool = ThreadPoolExecutor(max_workers=self.max_in_flight, thread_name_prefix="step")
        self._epoch_end = ThreadPoolExecutor(max_workers=1, thread_name_prefix="epoch-end")
        self._in_flight: dict[Future, StepTicket] = {}  # future -> the step's ticket
        self._kinds: dict[Future, str] = {}  # future -> the step flow's name
        self._epoch_end_jobs: list[Future] = []
        self._epochs_ended = len(self.session.journal) // self.steps_per_epoch
        self._crashes_in_a_row = 0

    @property
    def in_flight(self) -> int:
        """Steps running now (writing, waiting for a lane, executing or being reviewed)."""
        return len(self._in_flight)

    def running(self, step_flow: Callable) -> int:
        """Steps of ``step_flow`` (by its flow name) running now."""
        name = getattr(step_flow, "name", None)
        return sum(1 for kind in self._kinds.values() if kind == name)

    @property
    def epoch(self) -> int:
        """The epoch a step starting now belongs to (:func:`epoch_of` the journal's length)."""
        return epoch_of(len(self.session.journal), self.steps_per_epoch)

    def run(self, choose: StepChooser, keep_going: Callable[[], bool] = lambda: True, wait_all: bool = True) -> None:
        """Start ``choose()``'s steps while ``keep_going()``, the run's limits and the backlog
        allow (fewer than lanes + ``search.proposal_backlog`` steps in flight); return when nothing is in flight and nothing
        can start, or, with ``wait_all`` False, as soon as ``keep_going()`` turns False (steps in
        flight go on: a later :meth:`run` or :func:`close_scheduler` collects them).

        Raises:
            StepsCrashedError: ``steps_per_epoch`` steps in a row crashed.
        """
        while True:
            self._fill(choose, keep_going)
            if not self._in_flight or (not wait_all and not keep_going()):
                return
            done, _ = wait(list(self._in_flight), return_when=FIRST_COMPLETED)
            for future in done:
                self._collect(future)

    def drain(self) -> None:
        """Wait for every step in flight and every epoch-end job (nothing new starts)."""
        while self._in_flight:
            done, _ = wait(list(self._in_flight), return_when=FIRST_COMPLETED)
            for future in done:
                self._collect(future, raise_crashes=False)
        for job in self._epoch_end_jobs:
            job.result()
        self._epoch_end_jobs.clear()

    def shutdown(self) -> None:
        """:meth:`drain`, then stop the threads."""
        try:
            self.drain()
        finally:
            self._pool.shutdown(wait=True)
            self._epoch_end.shutdown(wait=True)

    # ------------------------------------------------------------------ inside
    def _fill(self, choose: StepChooser, keep_going: Callable[[], bool]) -> None:
        session = self.session
        while len(self._in_flight) < self.max_in_flight and keep_going() and not session.finished:
            if limits.check_limits(session):  # a stop (cost, failing model) starts no new step
                return
            step_flow = choose()
            if step_flow is None:
                return
            slot = session.budget.reserve()
            if slot is None:  # budget spent or time up
                return
            ticket = StepTicket(session.budget.elapsed(), len(session.journal))
            context = contextvars.copy_context()
            context.run(CURRENT_TICKET.set, ticket)
            future = self._pool.submit(context.run, self._one_step, step_flow, slot, self.epoch)
            self._in_flight[future] = ticket
            self._kinds[future] = getattr(step_flow, "name", "")

    def _one_step(self, step_flow: Callable, slot: int, epoch: int):
        try:
            with subflow_context(self.session.config.search.subflow_heartbeats):
                state = step_flow(run_dir=self.run_dir, slot=slot, epoch=epoch, return_state=True)
            if state.is_failed() and state.name == DEAD:  # a dead node: the step did its work (issue 54, item 2)
                return state.result(raise_on_failure=False)
            return state.result()  # raises what crashed the step
        except Exception:
            get_run_logger().exception("step in slot %s crashed; its slot goes back to the budget", slot)
            try:
                self.session.budget.release(slot)
            except ValueError:  # the node was appended before the crash: the slot is used
                pass
            return CRASHED

    def _collect(self, future: Future, raise_crashes: bool = True) -> None:
        self._in_flight.pop(future)
        self._kinds.pop(future, None)
        if future.result() is CRASHED:
            self._crashes_in_a_row += 1
        else:
            self._crashes_in_a_row = 0
        self._end_epochs()
        if raise_crashes and self._crashes_in_a_row >= self.steps_per_epoch and not self.session.finished:
            raise StepsCrashedError(f"{self._crashes_in_a_row} steps in a row crashed; see the step errors above")

    def _end_epochs(self) -> None:
        """Start the end-of-epoch work of every epoch the journal completed since the last call."""
        journal = self.session.journal
        while self._epochs_ended < len(journal) // self.steps_per_epoch:
            self._epochs_ended += 1
            epoch = self._epochs_ended
            more = not self.session.finished and self.session.budget.remaining > 0
            get_run_logger().info("epoch %s ended: nodes=%s valid=%s dead=%s in flight=%s", epoch, len(journal),
                                  len(journal.valid_pool()), journal.count(dead=True), len(self._in_flight))
            job = self._epoch_end.submit(contextvars.copy_context().run, self._epoch_end_work, epoch, more)
            self._epoch_end_jobs = [j for j in self._epoch_end_jobs if not j.done()] + [job]

    def _epoch_end_work(self, epoch: int, evolve: bool) -> None:
        publish_node_table(self.run_dir)
        publish_lanes(self.run_dir)
        if evolve:
            evolve_agents(self.run_dir, epoch)  # when due: every agents.evolution_interval global epochs


_SCHEDULERS: dict[str, StepScheduler] = {}
_REGISTRY_LOCK = threading.Lock()


def open_scheduler(run_dir: str) -> StepScheduler:
    """The scheduler of the run in ``run_dir``, made on first use."""
    with _REGISTRY_LOCK:
        scheduler = _SCHEDULERS.get(run_dir)
        if scheduler is None:
            scheduler = _SCHEDULERS[run_dir] = StepScheduler(run_dir)
        return scheduler


def close_scheduler(run_dir: str) -> None:
    """Wait for the run's steps still in flight and its epoch-end work, then forget its scheduler."""
    with _REGISTRY_LOCK:
        scheduler = _SCHEDULERS.pop(run_dir, None)
    if scheduler is not None:
        scheduler.shutdown()
