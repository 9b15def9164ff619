"""phase1_draft: draft steps until the valid pool reaches K (seed 000 §5, decision A; issue 52)."""

from __future__ import annotations

from prefect import flow, get_run_logger

from flows._scheduler import open_scheduler
from flows.draft_step import draft_step
from swarm_evo.population.ranking import phase1_complete
from swarm_evo.run.session import get_session


@flow(name="phase1-draft")
def phase1_draft(run_dir: str) -> int:
    """Start a draft in every free lane of the run's scheduler (:mod:`flows._scheduler`) until
    the valid pool holds K nodes (``search.phase1_target_nodes``; the rule of
    :func:`~swarm_evo.population.ranking.phase1_complete`), the budget or the time is spent, or
    the run stops. Drafts still running when K is reached go on and count (Phase 2 starts in
    the lanes that are free); no new draft starts. A resumed run goes on drafting from its
    journal. Returns the epoch a step starting now would belong to."""
    logger = get_run_logger()
    session = get_session(run_dir)
    journal, target = session.journal, session.config.search.phase1_target_nodes
    scheduler = open_scheduler(run_dir)
    scheduler.run(lambda: draft_step, keep_going=lambda: not phase1_complete(len(journal.valid_pool()), target),
                  wait_all=False)
    logger.info("Phase 1 done: journal=%s valid_pool=%s drafts still running=%s", len(journal),
                len(journal.valid_pool()), scheduler.in_flight)
    return scheduler.epoch
