"""Keep a step's outcome: append its node to the journal (and let the learning loops see it),
hand in the best work as the run goes, and the run's end (final grading, run report)."""

from __future__ import annotations

import logging

from pydantic import BaseModel

from swarm_evo.learning.agent_evolution import load_evolutions
from swarm_evo.learning.experience import record_for
from swarm_evo.learning.quality import node_quality
from swarm_evo.population.node import Node
from swarm_evo.reporting.run_report import build_run_report
from swarm_evo.reporting.run_report import write_run_report as save_run_report
from swarm_evo.run.session import RunSession
from swarm_evo.step.final_fit import FINAL_FIT_KEY, final_fit
from swarm_evo.step.limits import check_limits
from swarm_evo.step.request import OperationRequest, release_request
from swarm_evo.store.lease import SupersededError

RUN_REPORT_FILE = "run_report.json"
log = logging.getLogger(__name__)


def append_node(session: RunSession, node: Node, request: OperationRequest) -> Node:
    """Append the step's node to the journal (atomic save), commit its budget slot, and let
    the learning loops see it (SPEC §9): its quality (``metadata.quality``: percentile rank of
    its fitness among valid nodes, 0 when buggy) updates the dispatcher's EMA of its
    (agent, operation) and becomes an experience record.

    A new best node's work is handed in (:func:`publish_best`) before the journal file records
    the node, so a run killed at any moment never has a valid node on disk without its
    submission; and nothing that goes wrong in the hand-in can lose the node or its budget slot
    (issue 31): a candidate whose files cannot be copied is skipped with a warning, and any other
    error of the hand-in is logged, never raised, before the journal is saved and the slot
    committed. A run in its directory store's own folder that was taken over meanwhile writes
    neither (issue 53, item 1): the node stays out of the journal and the run stops.
    """
    with session.lock:
        node.metadata["quality"] = node_quality(session.journal, node)
        # The run's age at this node, so a resumed run's time limit continues (Budget.for_journal).
        session.journal.info["elapsed_seconds"] = round(session.budget.elapsed(), 3)
        session.journal.append(node, save=False)
        recorded = _still_the_writer(session)
        if recorded:
            try:
                publish_best(session)
            except Exception:  # noqa: BLE001 - the node and its slot come first; the next append tries again
                log.exception("handing in the best node failed after node %s; the run goes on", node.id[:8])
            try:
                session.journal.save()
            except SupersededError:  # taken over between the check and the write: nothing written
                recorded = False
        if recorded and node.agent_id:  # in the journal's order: two steps ending at once add their records in step order
            session.dispatcher.update(node.agent_id, node.operation, node.metadata["quality"], node.id)
            session.experience.add(record_for(node, node.metadata["quality"]))
    session.budget.commit(request.slot)
    release_request(session, request)
    check_limits(session)
    return node


def _still_the_writer(session: RunSession) -> bool:
    """False when the run works in its directory store's own folder and another process took the
    location over (issue 53, item 1): this copy then writes nothing more there (the session is
    superseded and starts no new step)."""
    mirror = session.mirror
    if mirror is None or not mirror.in_place:
        return True
    try:
        mirror.check_writer()
    except SupersededError:
        return False
    return True


def publish_best(session: RunSession) -> Node | None:
    """Hand in the current best work now (issue 13: a run killed from outside keeps it).

    Goes down :meth:`Journal.submission_candidates` (best first): the first candidate whose
    program and submission (problems: metrics) the objective copies to the run directory is
    the run's hand-in; nothing is copied again while it stays the first usable one. A candidate
    whose files cannot be copied (``OSError``, e.g. a node directory without its submission) is
    logged as a warning and the next one is tried (issue 31): the hand-in never raises for a
    file. Returns the handed-in node (None when no candidate could be handed in).
    """
    with session.lock:
        for node, _ in session.journal.submission_candidates():
            if node.id == session.published_best_id:
                return node
            try:
                session.objective.publish_best(session.run_dir, node)
            except OSError as exc:
                if node.id not in session.unpublishable:
                    session.unpublishable.add(node.id)
                    log.warning("node %s (step %s) cannot be handed in (%s: %s); trying the next candidate",
                                node.id[:8], node.step, type(exc).__name__, exc)
                continue
            session.published_best_id = node.id
            return node
    return None


def handed_in(session: RunSession) -> tuple[Node | None, str]:
    """The node whose work :func:`publish_best` handed in, and why it was chosen; ``(None, why)``
    when there was none to hand in, or no candidate's files could be copied."""
    candidates = session.journal.submission_candidates()
    if not candidates:
        return session.journal.submission_candidate()
    for node, why in candidates:
        if node.id == session.published_best_id:
            return node, why
    return None, f"none of the {len(candidates)} candidate node(s) could be handed in (see the run's warnings)"


def finalize_run(session: RunSession) -> tuple[Node | None, BaseModel]:
    """The objective's end of the run for the node the run hands in (:func:`publish_best`):
    with a hidden split, first its final fit on the full public data
    (:func:`swarm_evo.step.final_fit.final_fit`, issue 41); then competitions grade the hand-in
    (``grade_report.json``); problems write its program, ``best_metrics.json`` and
    ``problem_report.json``. Returns ``(handed-in node, report)``."""
    handed_in = publish_best(session)
    final_fit(session, handed_in)
    report = session.objective.finalize(session.run_dir, handed_in)
    return handed_in, report


def write_run_report(session: RunSession) -> dict:
    """Build ``RUN_DIR/run_report.json`` and return it: :func:`swarm_evo.reporting.run_report.build_run_report`
    (operations with their improvement numbers, the best lineage, agents, evolutions, Phase 2
    start; issue 17: :mod:`swarm_evo.reporting.operation_stats`) plus ``hand_in`` (``{node_id, step, reason}``),
    ``llm`` (calls, failed_calls, prompt_tokens, completion_tokens, cost_usd, seconds, by_operation,
    by_role: :mod:`swarm_evo.llm.ledger`), ``stop_reason`` (None unless the run stopped early) and, with
    a run store, ``store`` (``{url, skipped_files: {path: why}, syncs, failures}``: the files the store
    could not take, issue 40 item 4)."""
    evolutions = [record.summary() for record in load_evolutions(session.run_dir)]
    report = build_run_report(session.journal, evolutions, session.agents.ids)
    chosen, why = handed_in(session)
    report["hand_in"] = {"node_id": chosen.id if chosen else None, "step": chosen.step if chosen else None,
                         "reason": why, "final_fit": session.journal.info.get(FINAL_FIT_KEY)}
    report["llm"] = session.ledger.summary().report()  # every model call, failed and preflight ones too
    report["stop_reason"] = session.stop_reason
    if session.mirror is not None:
        stats = session.mirror.stats
        report["store"] = {"url": session.mirror.target.url, "skipped_files": dict(stats.skipped),
                           "syncs": stats.syncs, "failures": stats.failures}
    save_run_report(session.run_dir / RUN_REPORT_FILE, report)
    return report
