"""Keep a step's outcome: append its node to the journal (and let the learning loops see it),
hand in the best work as the run goes, and the run's end (final grading, run report)."""

from __future__ import annotations

from pydantic import BaseModel

from swarm_evo.agent_evolution import load_evolutions
from swarm_evo.experience import record_for
from swarm_evo.node import Node
from swarm_evo.quality import node_quality
from swarm_evo.run_report import build_run_report
from swarm_evo.run_report import write_run_report as save_run_report
from swarm_evo.session import RunSession
from swarm_evo.step.limits import check_limits
from swarm_evo.step.request import OperationRequest, release_request

RUN_REPORT_FILE = "run_report.json"


def append_node(session: RunSession, node: Node, request: OperationRequest) -> Node:
    """Append the step's node to the journal (atomic save), commit its budget slot, and let
    the learning loops see it (SPEC §9): its quality (``metadata.quality``: percentile rank of
    its fitness among valid nodes, 0 when buggy) updates the dispatcher's EMA of its
    (agent, operation) and becomes an experience record.

    A new best node's work is handed in (:func:`publish_best`) before the journal file records
    the node: a run killed at any moment never has a valid node on disk without its submission.
    """
    with session.lock:
        node.metadata["quality"] = node_quality(session.journal, node)
        # The run's age at this node, so a resumed run's time limit continues (Budget.for_journal).
        session.journal.info["elapsed_seconds"] = round(session.budget.elapsed(), 3)
        session.journal.append(node, save=False)
        publish_best(session)
        session.journal.save()
    session.budget.commit(request.slot)
    release_request(session, request)
    if node.agent_id:
        session.dispatcher.update(node.agent_id, node.operation, node.metadata["quality"], node.id)
        session.experience.add(record_for(node, node.metadata["quality"]))
    check_limits(session)
    return node


def publish_best(session: RunSession) -> Node | None:
    """Hand in the current best work now (issue 13: a run killed from outside keeps it): when
    :meth:`Journal.submission_candidate` changed since the last call, its program and
    submission (problems: metrics) are copied to the run directory. Returns the candidate."""
    with session.lock:
        node, _ = session.journal.submission_candidate()
        if node is not None and node.id != session.published_best_id:
            session.objective.publish_best(session.run_dir, node)
            session.published_best_id = node.id
    return node


def finalize_run(session: RunSession) -> tuple[Node | None, BaseModel]:
    """The objective's end of the run for the best valid node: competitions copy its program
    and submission and grade it (``grade_report.json``); problems write its program,
    ``best_metrics.json`` and ``problem_report.json``. Returns ``(best node, report)``."""
    report = session.objective.finalize(session.run_dir, session.journal)
    return session.journal.best_node(), report


def write_run_report(session: RunSession) -> dict:
    """Build ``RUN_DIR/run_report.json`` and return it: :func:`swarm_evo.run_report.build_run_report`
    (operations with their improvement numbers, the best lineage, agents, evolutions, Phase 2
    start; issue 17: :mod:`swarm_evo.operation_stats`) plus ``hand_in`` (``{node_id, step, reason}``),
    ``llm`` (calls, failed_calls, prompt_tokens, completion_tokens, cost_usd, seconds, by_operation,
    by_role: :mod:`swarm_evo.llm.ledger`) and ``stop_reason`` (None unless the run stopped early)."""
    evolutions = [record.summary() for record in load_evolutions(session.run_dir)]
    report = build_run_report(session.journal, evolutions, session.agents.ids)
    chosen, why = session.journal.submission_candidate()
    report["hand_in"] = {"node_id": chosen.id if chosen else None, "step": chosen.step if chosen else None,
                         "reason": why}
    report["llm"] = session.ledger.summary().report()  # every model call, failed and preflight ones too
    report["stop_reason"] = session.stop_reason
    save_run_report(session.run_dir / RUN_REPORT_FILE, report)
    return report
