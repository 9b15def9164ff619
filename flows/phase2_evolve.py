"""phase2_evolve: epochs of merge/mutate steps until the budget or time runs out (seed 000 §6)."""

from __future__ import annotations

from prefect import flow, get_run_logger

from flows._epoch import run_epoch
from flows.phase2_step import phase2_step
from swarm_evo.run.session import get_session
from tasks.agents import evolve_agents
from tasks.artifacts import publish_node_table


@flow(name="phase2-evolve")
def phase2_evolve(run_dir: str, first_epoch: int = 0) -> int:
    """Run epochs of min(steps_per_epoch, remaining) Phase 2 steps (no drafting, decision C).
    Needs a non-empty valid pool. Returns the global epoch count."""
    logger = get_run_logger()
    session = get_session(run_dir)
    search, budget, journal = session.config.search, session.budget, session.journal
    epoch = first_epoch
    if not journal.valid_pool():
        logger.warning("Phase 2 skipped: no valid node to evolve")
        return epoch
    while not session.finished:
        epoch += 1
        run_epoch(run_dir, phase2_step, epoch, min(search.steps_per_epoch, budget.remaining))
        publish_node_table(run_dir)
        evolve_agents(run_dir, epoch)  # when due: every agents.evolution_interval global epochs
        logger.info("Phase 2 | epoch=%s nodes=%s valid=%s", epoch, len(journal), len(journal.valid_pool()))
    return epoch
