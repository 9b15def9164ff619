"""phase2_evolve: merge/mutate steps until the budget or time runs out (seed 000 §6; issue 52)."""

from __future__ import annotations

from prefect import flow, get_run_logger

from flows._scheduler import open_scheduler
from flows.phase2_step import phase2_step
from swarm_evo.run.session import get_session


@flow(name="phase2-evolve")
def phase2_evolve(run_dir: str) -> int:
    """Start a Phase 2 step (merge or mutate: :func:`swarm_evo.step.operations.prepare_phase2`)
    in every free lane of the run's scheduler (:mod:`flows._scheduler`) until the budget or the
    time is spent or the run stops (no drafting, decision C), and wait for every step in flight,
    Phase 1's last drafts included. Needs a non-empty valid pool. Returns the epoch a step
    starting now would belong to."""
    logger = get_run_logger()
    session = get_session(run_dir)
    journal = session.journal
    scheduler = open_scheduler(run_dir)
    if not journal.valid_pool():
        logger.warning("Phase 2 skipped: no valid node to evolve")
        return scheduler.epoch
    scheduler.run(lambda: phase2_step)
    logger.info("Phase 2 done: journal=%s valid_pool=%s", len(journal), len(journal.valid_pool()))
    return scheduler.epoch
