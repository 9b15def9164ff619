"""policy_search: the ``greedy`` and ``random`` search policies for ablations (SPEC §12).

``two_phase_evo(policy="greedy" | "random")`` runs this subflow in place of
``phase1_draft`` + ``phase2_evolve``; everything before and after it (session, sandbox, model,
grading, reports) is shared, and so is every step: the run's scheduler (``flows/_scheduler.py``:
at most ``parallel_workers`` steps at once, each started as soon as a lane is free, a budget
slot reserved per step, the time limit checked before every step), and each step is one ``run_step`` — generate (+ static check and
self-fix) → execute → inner debug chain → review → append one node. Only the choice of what
each step does differs (:mod:`swarm_evo.search.policies`):

* ``random``: every step is a ``draft_step`` (the Phase 1 draft prompt), until the budget
  (``max_steps`` nodes) or the time limit runs out.
* ``greedy`` (AIDE's ``search_policy``): first ``draft_step`` until the journal holds 5 drafts
  (no greedy step starts while those are running), then ``greedy_step`` — each step improves the best valid node
  (mutate.j2), or with probability 0.5 debugs a buggy leaf (debug.j2; debug depth ≤ 3), or
  drafts when no node is valid.

Choice documented here: the inner chained debug (``search.debug_max_attempts`` attempts per
node, SPEC §6 D) stays on for every policy, so an ablation compares search policies alone
on identical steps. AIDE itself has no inner chain (its repairs are debug nodes), so the
greedy policy here debugs the buggy leaves the chain could not fix, as extra nodes.
Agent evolution runs on the global epoch count as in the two-phase search.
"""

from __future__ import annotations

from prefect import flow, get_run_logger, task

from flows._scheduler import open_scheduler
from flows._step import run_step
from flows.draft_step import draft_step
from swarm_evo.run.session import get_session
from swarm_evo.search.policies import drafts_due
from swarm_evo.step import operations
from swarm_evo.step.request import OperationRequest
from tasks._policy import TASK_DEFAULTS


@task(name="select-greedy", **TASK_DEFAULTS)
def select_greedy(run_dir: str, slot: int) -> OperationRequest:
    """Greedy policy: draft, improve the best valid node, or debug a buggy leaf; its prompt."""
    return operations.prepare_greedy(get_session(run_dir), slot)


@flow(name="greedy-step", flow_run_name="greedy-slot{slot}")
def greedy_step(run_dir: str, slot: int, epoch: int):
    """One greedy-policy step (AIDE ``Agent.step``) taken through the shared step body (which
    ends the claim on a debugged leaf even when the step crashes)."""
    return run_step(run_dir, slot, epoch, select_greedy)


@flow(name="policy-search", flow_run_name="{policy}-search")
def policy_search(run_dir: str, policy: str) -> int:
    """Run steps of the ``greedy`` or ``random`` policy in the run's scheduler
    (:mod:`flows._scheduler`) until the budget or the time limit runs out (no other stopping
    rule). Returns the epoch a step starting now would belong to.

    Raises:
        ValueError: ``policy`` is neither ``greedy`` nor ``random``.
    """
    logger = get_run_logger()
    session = get_session(run_dir)
    budget, journal = session.budget, session.journal
    drafts_due(journal, policy, 0)  # validates the policy before any step
    scheduler = open_scheduler(run_dir)

    def choose():
        due = drafts_due(journal, policy, budget.remaining + scheduler.running(draft_step))
        if policy == "random" or due > scheduler.running(draft_step):
            return draft_step
        if due > 0:  # the opening drafts are still running: greedy steps wait for them (AIDE drafts first)
            return None
        return greedy_step

    scheduler.run(choose)
    logger.info("%s | nodes=%s valid=%s dead=%s", policy, len(journal), len(journal.valid_pool()),
                journal.count(dead=True))
    return scheduler.epoch
