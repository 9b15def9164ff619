"""phase1_draft: epochs of draft steps until the valid pool reaches K (seed 000 §5, decision A)."""

from __future__ import annotations

from prefect import flow, get_run_logger

from flows._epoch import run_epoch
from flows.draft_step import draft_step
from swarm_evo.session import get_session
from tasks.agents import evolve_agents
from tasks.artifacts import publish_node_table


@flow(name="phase1-draft")
def phase1_draft(run_dir: str, first_epoch: int = 0) -> int:
    """Run whole draft epochs; after each, stop when the valid pool has ≥ K nodes (the epoch
    that just ran was the last), or at budget or time limit. Returns the global epoch count."""
    logger = get_run_logger()
    session = get_session(run_dir)
    search, budget, journal = session.config.search, session.budget, session.journal
    epoch = first_epoch
    while not session.finished:
        epoch += 1
        run_epoch(run_dir, draft_step, epoch, min(search.steps_per_epoch, budget.remaining))
        publish_node_table(run_dir)
        evolve_agents(run_dir, epoch)  # when due: every agents.evolution_interval global epochs
        valid = len(journal.valid_pool())
        logger.info(
            "Phase 1 | epoch=%s nodes=%s valid=%s dead=%s", epoch, len(journal), valid, journal.count(dead=True)
        )
        if valid >= search.phase1_target_nodes:
            break
    logger.info("Phase 1 done: journal=%s valid_pool=%s", len(journal), len(journal.valid_pool()))
    return epoch
