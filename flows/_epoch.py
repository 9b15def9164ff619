"""Run one epoch of step subflows, at most ``parallel_workers`` at once, within the budget."""

from __future__ import annotations

import contextvars
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from prefect import get_run_logger

from flows._subflow import subflow_context
from swarm_evo.run.session import get_session
from swarm_evo.step import limits


def run_epoch(run_dir: str, step_flow: Callable, epoch: int, n_steps: int) -> list:
    """Start ``n_steps`` step subflows of ``step_flow``; each first reserves a budget slot and
    does not start when none is left, the time limit is reached or the run was stopped
    (:func:`swarm_evo.step.limits.check_limits`: ``max_cost_usd``, a model failing again and again;
    SPEC §6: the budget is never exceeded, the time limit is checked before every step). Subflows run in threads
    with the parent's context, so Prefect records them as children of the phase flow.
    Returns the step outcomes (None for steps that did not start or crashed)."""
    session = get_session(run_dir)
    logger = get_run_logger()

    def one_step():
        if limits.check_limits(session):  # a stop (cost, failing model) starts no new step
            return None
        slot = session.budget.reserve()
        if slot is None:
            return None
        try:
            with subflow_context(session.config.search.subflow_heartbeats):
                return step_flow(run_dir=run_dir, slot=slot, epoch=epoch)
        except Exception:
            logger.exception("step in slot %s crashed; its slot goes back to the budget", slot)
            try:
                session.budget.release(slot)
            except ValueError:  # the node was appended before the crash: the slot is used
                pass
            return None

    workers = max(1, min(session.config.search.parallel_workers, n_steps))
    before = len(session.journal)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="step") as pool:
        futures = [pool.submit(contextvars.copy_context().run, one_step) for _ in range(n_steps)]
        outcomes = [f.result() for f in futures]
    if n_steps and len(session.journal) == before and not session.finished:
        # Every step crashed: retrying would loop forever on a systematic fault.
        raise EpochCrashedError(f"all {n_steps} steps of epoch {epoch} crashed; see the step errors above")
    return outcomes


class EpochCrashedError(RuntimeError):
    """An epoch in which no step appended a node although budget and time were left."""
