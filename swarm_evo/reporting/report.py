"""Views of a journal for people: the node table, the run summary and the final report.

Prefect artifacts (tasks/artifacts.py) and the CLI show these; the journal stays the store
(SPEC §5: "Prefect artifacts are views of the journal, not the store").
"""

from __future__ import annotations

import statistics
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel

from swarm_evo.competition import CompetitionReport
from swarm_evo.population import ranking
from swarm_evo.population.journal import Journal
from swarm_evo.llm.ledger import LLMTotals, cost_text
from swarm_evo.population.node import Node
from swarm_evo.reporting.fitness_report import fitness_lines, fitness_summary
from swarm_evo.reporting.operation_stats import best_lineage, improvements_by_operation, lineage_text


def node_status(node: Node, best: Node | None) -> str:
    """``dead``, ``buggy``, ``best`` (``node`` is the run's best node) or ``valid``."""
    if node.dead:
        return "dead"
    if node.is_buggy:
        return "buggy"
    return "best" if best is not None and best.id == node.id else "valid"


def node_table(journal: Journal) -> list[dict[str, Any]]:
    """One row per node: step, id (8 chars), phase, operation, parent, status, metric (printed),
    hidden score (None without a hidden split), debug attempts, approach tag, exec and wall seconds."""
    rows = []
    best = journal.best_node()
    for n in journal.nodes:
        timings = n.metadata.get("timings") or {}
        rows.append(
            {
                "step": n.step,
                "node": n.id[:8],
                "phase": n.phase,
                "operation": n.operation,
                "parent": (n.parent_id or "")[:8],
                "status": node_status(n, best),
                "metric": None if n.metric_value is None else round(n.metric_value, 6),
                "hidden_score": n.hidden_score,
                "debug_attempts": n.debug_attempts,
                "exc_type": n.exc_type or "",
                "approach": (n.approach_tag or "")[:80],
                "exec_s": timings.get("exec"),
                "wall_s": timings.get("wall"),
            }
        )
    return rows


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 3) if values else None


def progress_line(journal: Journal, max_steps: int, llm: LLMTotals) -> str:
    """One line for the live progress artifact: nodes of the budget, valid, best metric, and
    the model calls so far (calls, failed, tokens, cost), e.g.
    ``12/30 nodes, 9 valid, best 0.8012; LLM: 41 calls (2 failed), 310k tokens, $0.42``."""
    best = journal.best_node()
    tokens = llm.prompt_tokens + llm.completion_tokens
    cost = cost_text(llm, digits=2)
    return (f"{len(journal)}/{max_steps} nodes, {len(journal.valid_pool())} valid, best "
            f"{'-' if best is None else f'{ranking.score(best):.6g}'}; LLM: {llm.calls} calls "
            f"({llm.failed_calls} failed), {tokens / 1000:.0f}k tokens, {cost}")




def run_summary(journal: Journal, report: BaseModel | None = None, *, llm: dict | None = None,
                stop_reason: str | None = None, hand_in: tuple[Node | None, str] | None = None) -> dict[str, Any]:
    """Counts per phase and operation, valid/dead/buggy, best node, per-node time split
    (mean seconds of LLM, execution and orchestration per node), the end report:
    ``grade_report`` (a competition's CompetitionReport) or ``problem_report`` (a problem's
    ProblemReport; the other one is None), ``hand_in`` (``{node_id, step, reason}``: which
    node's submission the run handed in and why: ``hand_in`` as given, by default
    :meth:`Journal.submission_candidate`),
    ``llm`` (the ledger's totals, :meth:`swarm_evo.llm.ledger.LedgerSummary.report`),
    ``stop_reason`` (why the run stopped early, else None), ``improvements`` (per operation,
    :func:`swarm_evo.reporting.operation_stats.improvements_by_operation`), ``best_lineage``
    (:func:`swarm_evo.reporting.operation_stats.best_lineage`), ``confinement`` and ``confined``
    (what the sandbox confined, from the runtime probe; ``confined`` False: programs ran
    unconfined, ``sandbox.allow_unconfined``), ``fitness`` (what the run selected on, the printed
    metric against the hidden score: :func:`swarm_evo.reporting.fitness_report.fitness_summary`;
    ``hand_in.final_fit`` the final fit's outcome, None without one)."""
    nodes = journal.nodes
    best = journal.best_node()
    chosen, why = hand_in if hand_in is not None else journal.submission_candidate()
    per_op: dict[str, dict[str, int]] = {}
    for n in nodes:
        row = per_op.setdefault(n.operation, {"count": 0, "valid": 0, "dead": 0, "debugged": 0})
        row["count"] += 1
        row["valid"] += int(journal.is_valid(n))
        row["dead"] += int(n.dead)
        row["debugged"] += int(n.debug_attempts > 0)
    timings = [n.metadata.get("timings") or {} for n in nodes]
    split = {
        key: _mean([t[key] for t in timings if t.get(key) is not None])
        for key in ("wall", "llm", "exec", "orchestration")
    }
    dumped = None if report is None else report.model_dump(mode="json")
    is_grade = isinstance(report, CompetitionReport)
    return {
        "competition_id": journal.info.get("competition_id"),
        "problem": journal.info.get("problem"),
        "nodes": len(nodes),
        "phase1_nodes": sum(1 for n in nodes if n.phase == 1),
        "phase2_nodes": sum(1 for n in nodes if n.phase == 2),
        "valid": len(journal.valid_pool()),
        "dead": sum(1 for n in nodes if n.dead),
        "buggy": sum(1 for n in nodes if n.is_buggy),
        "operations": per_op,
        "best_node": None if best is None else {"id": best.id, "step": best.step, "metric": best.metric_value,
                                                "hidden_score": best.hidden_score,
                                                "operation": best.operation, "approach": best.approach_tag},
        "seconds_per_node": split,
        "grade_report": dumped if is_grade else None,
        "problem_report": None if is_grade else dumped,
        "hand_in": {"node_id": chosen.id if chosen else None, "step": chosen.step if chosen else None,
                    "reason": why, "final_fit": journal.info.get("final_fit")},
        "fitness": fitness_summary(journal),
        "llm": llm,
        "stop_reason": stop_reason,
        "improvements": improvements_by_operation(journal),
        "best_lineage": best_lineage(journal),
        "confinement": (journal.info.get("runtime") or {}).get("confinement"),
        "confined": (journal.info.get("runtime") or {}).get("confined", True),
    }


def _num(value: float | None, signed: bool = False) -> str:
    """A rate or gain for the report's tables: 4 significant digits, ``—`` for None."""
    if value is None:
        return "—"
    return f"{value:+.4g}" if signed else f"{value:.4g}"


def improvement_lines(summary: dict[str, Any]) -> list[str]:
    """The final report's "Where improvements come from" section (Markdown lines): one table
    row per operation (children, valid, compared with a parent, improved, improvement rate,
    mean gain over the parent, new bests) and the best node's lineage; [] for a summary
    without ``improvements``."""
    improvements = summary.get("improvements")
    if not improvements:
        return []
    lines = ["", "## Where improvements come from", "",
             "A valid child *improved* when its validation metric beats its parent's (a merge: the best "
             "of its gene sources; drafts have no parent; a child of a buggy parent is not compared). "
             "Gains are in the metric's units, positive = better whatever its direction.", "",
             "| operation | children | valid | compared | improved | improvement rate | mean gain | new bests |",
             "|---|---|---|---|---|---|---|---|"]
    for op, s in improvements.items():
        lines.append(f"| {op} | {s['children']} | {s['valid']} | {s['compared']} | {s['improved']} | "
                     f"{_num(s['improvement_rate'])} | {_num(s['mean_gain'], signed=True)} | {s['new_best']} |")
    lines += ["", f"**Best lineage:** {lineage_text(summary.get('best_lineage'))}"]
    return lines


def final_report_markdown(
    summary: dict[str, Any],
    *,
    chart: str | None = None,
    tree_image: str | None = None,
    tree_link: str | None = None,
) -> str:
    """The final report as Markdown (a Prefect markdown artifact and ``RUN_DIR/report.md``).

    Args:
        summary: :func:`run_summary`.
        chart: the best-fitness chart as an image source: a ``data:image/png;base64,...`` URI for
            the Prefect artifact (the UI cannot load the run directory's files), or the relative
            file name for ``report.md``; None leaves the section out.
        tree_image: the evolution tree as an image source (a ``data:image/svg+xml`` URI), shown
            as a static preview; None shows no preview.
        tree_link: where the interactive evolution tree (HTML) is: a relative file name becomes
            a link (``report.md``), an absolute path is shown as code to open in a browser.
    """
    lines = [f"# swarm-evo run: {summary.get('competition_id') or summary.get('problem')}", ""]
    grade = summary.get("grade_report") or summary.get("problem_report") or {}
    best = summary.get("best_node")
    if best:
        held_out = f", hidden-split score {best['hidden_score']}" if best.get("hidden_score") is not None else ""
        lines += [
            f"**Best node** step {best['step']} ({best['operation']}, `{best['id'][:8]}`): "
            f"validation metric {best['metric']}{held_out}; {best['approach'] or ''}",
            "",
        ]
    else:
        lines += ["**No valid node.**", ""]
    hand_in = summary.get("hand_in") or {}
    if hand_in.get("reason"):
        node = f"node `{hand_in['node_id'][:8]}` (step {hand_in['step']})" if hand_in.get("node_id") else "no node"
        lines += [f"**Handed in:** {node}: {hand_in['reason']}.", ""]
    if summary.get("stop_reason"):
        lines += [f"**Stopped early:** {summary['stop_reason']}.", ""]
    if summary.get("confined") is False:  # sandbox.allow_unconfined on a host that cannot confine (issue 42)
        lines += [f"**Warning: programs ran unconfined:** {summary.get('confinement')}.", ""]
    heading = "Grading report (private answers)" if summary.get("grade_report") else "Evaluation of the best program"
    lines += [f"## {heading}", "", "| field | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in grade.items() if not isinstance(v, dict)]
    lines += [
        "",
        "## Search",
        "",
        f"{summary['nodes']} nodes: {summary['phase1_nodes']} in Phase 1, {summary['phase2_nodes']} in Phase 2; "
        f"{summary['valid']} valid, {summary['buggy']} buggy, {summary['dead']} dead.",
        "",
        "| operation | count | valid | dead | debugged |",
        "|---|---|---|---|---|",
    ]
    for op, row in summary["operations"].items():
        lines.append(f"| {op} | {row['count']} | {row['valid']} | {row['dead']} | {row['debugged']} |")
    lines += improvement_lines(summary)
    lines += fitness_lines(summary.get("fitness"))
    split = summary["seconds_per_node"]
    lines += [
        "",
        "## Time per node (mean seconds)",
        "",
        "| wall | LLM | execution | orchestration |",
        "|---|---|---|---|",
        f"| {split['wall']} | {split['llm']} | {split['exec']} | {split['orchestration']} |",
    ]
    llm = summary.get("llm")
    if llm:
        lines += ["", "## Model calls", "", "| operation | calls | failed | prompt tokens | completion tokens | cost (USD) |",
                  "|---|---|---|---|---|---|"]
        for op, row in [*llm.get("by_operation", {}).items(), ("**total**", llm)]:
            cost = cost_text(row)
            lines.append(f"| {op} | {row['calls']} | {row['failed_calls']} | {row['prompt_tokens']} | "
                         f"{row['completion_tokens']} | {cost} |")
    if chart:
        lines += ["", "## Best validation metric over steps", "", f"![best validation metric over steps]({chart})"]
    if tree_image or tree_link:
        lines += ["", "## Evolution tree", ""]
        if tree_image:
            lines += [f"![evolution tree]({tree_image})", ""]
        if tree_link and PurePath(tree_link).is_absolute():
            lines.append(f"Interactive tree (hover a node for its step, operation and metric): open `{tree_link}` "
                         "in a browser.")
        elif tree_link:
            lines.append(f"Interactive tree (hover a node for its step, operation and metric): [{tree_link}]({tree_link})")
    return "\n".join(lines) + "\n"
