"""phase1_draft: epochs of draft steps until the valid pool reaches K (seed 000 §5, decision A)."""

from __future__ import annotations

from prefect import flow, get_run_logger

from flows._epoch import run_epoch
from flows.draft_step import draft_step
from swarm_evo.population.ranking import phase1_complete
from swarm_evo.run.session import get_session
from tasks.agents import evolve_agents
from tasks.artifacts import publish_node_table


@flow(name="phase1-draft")
def phase1_draft(run_dir: str, first_epoch: int = 0, unfinished_steps: int = 0) -> int:
    """Run whole draft epochs; after each, stop when the valid pool has ≥ K nodes (the epoch
    that just ran was the last), or at budget or time limit. A resumed run first finishes its
    interrupted epoch ``first_epoch`` with its ``unfinished_steps`` (decision A). Returns the
    global epoch count."""
    logger = get_run_logger()
    session = get_session(run_dir)
    search, budget, journal = session.config.search, session.budget, session.journal
    epoch, pending = first_epoch, unfinished_steps
    while not session.finished:
        if pending:
            n_steps, pending = min(pending, budget.remaining), 0
        else:
            epoch += 1
            n_steps = min(search.steps_per_epoch, budget.remaining)
        run_epoch(run_dir, draft_step, epoch, n_steps)
        publish_node_table(run_dir)
        evolve_agents(run_dir, epoch)  # when due: every agents.evolution_interval global epochs
        valid = len(journal.valid_pool())
        logger.info(
            "Phase 1 | epoch=%s nodes=%s valid=%s dead=%s", epoch, len(journal), valid, journal.count(dead=True)
        )
        if phase1_complete(valid, search.phase1_target_nodes):
            break
    logger.info("Phase 1 done: journal=%s valid_pool=%s", len(journal), len(journal.valid_pool()))
    return epoch
