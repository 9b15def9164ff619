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
from swarm_evo.reporting.slot_timeline import lanes_lines, lanes_report
from swarm_evo.reporting.fitness_report import (HIDDEN_NAME, PRINTED_NAME, fitness_lines, fitness_summary, fmt_score,
                                                score_name, shown_score)
from swarm_evo.reporting.operation_stats import (best_lineage, improvements_by_operation, lineage_text,
                                                 printed_gains_by_operation)


def node_status(node: Node, best: Node | None) -> str:
    """``dead``, ``buggy``, ``best`` (``node`` is the run's best node) or ``valid``."""
    if node.dead:
        return "dead"
    if node.is_buggy:
        return "buggy"
    return "best" if best is not None and best.id == node.id else "valid"


def score_column(name: str) -> str:
    """The node table's column of the score the run selects on: ``hidden_split_score`` or
    ``validation_metric`` (:func:`swarm_evo.reporting.fitness_report.score_name`)."""
    return name.replace("-", "_").replace(" ", "_")


def _rounded(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


def node_table(journal: Journal, links: dict[str, dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """One row per node: step, id (8 chars), phase, operation, parent, status, the score the run
    selects on under its own name (``hidden_split_score``, with ``printed_metric`` beside it, in
    a run that selects on its hidden split; else ``validation_metric``: :func:`score_column`),
    debug attempts, exception type, approach tag, ``exec_s_all_attempts`` (the program's
    seconds summed over every execution of the node: its first run and each debug attempt;
    the journal's ``exec_time`` is the last execution's alone), ``exec_s_last`` (that
    ``exec_time``), ``wall_s`` (the whole step), ``tokens`` (prompt + completion tokens of the
    node's model calls) and ``cost_usd`` (their cost; None when a call had no price).

    ``links`` (``{node id: {column: markdown}}``, from the Prefect side: the step's flow run,
    the node's page) adds those columns to the rows of the nodes it names, the same columns to
    every row (empty where a node has none)."""
    rows = []
    best = journal.best_node()
    name = score_name(journal)
    hidden = name == HIDDEN_NAME
    extra = list(dict.fromkeys(col for cols in (links or {}).values() for col in cols))
    for n in journal.nodes:
        timings = n.metadata.get("timings") or {}
        usage = n.llm_usage
        row: dict[str, Any] = {
            "step": n.step,
            "node": n.id[:8],
            "phase": n.phase,
            "operation": n.operation,
            "parent": (n.parent_id or "")[:8],
            "status": node_status(n, best),
            score_column(name): _rounded(shown_score(n, name)),
        }
        if hidden:
            row["printed_metric"] = _rounded(n.metric_value)
        row.update({
            "debug_attempts": n.debug_attempts,
            "exc_type": n.exc_type or "",
            "approach": (n.approach_tag or "")[:80],
            "exec_s_all_attempts": timings.get("exec"),
            "exec_s_last": _rounded(n.exec_time, 3),
            "wall_s": timings.get("wall"),
            "tokens": usage.prompt_tokens + usage.completion_tokens,
            "cost_usd": _rounded(usage.cost),
        })
        mine = (links or {}).get(n.id) or {}
        row.update({col: mine.get(col, "") for col in extra})
        rows.append(row)
    return rows


def offline_price_note(model: Any) -> str | None:
    """A sentence when prices are configured (``model.input_cost_per_token`` /
    ``output_cost_per_token``) but every model of the run (``name``, ``review_name``,
    ``evolution_name``) is the built-in offline model, which is free: the prices apply to no call
    and the cost stays $0 (issue 54, item 7). None otherwise. ``model`` is the run's
    :class:`swarm_evo.config.ModelConfig`."""
    if getattr(model, "input_cost_per_token", None) is None and getattr(model, "output_cost_per_token", None) is None:
        return None
    names = [model.name, getattr(model, "review_name", None) or model.name,
             getattr(model, "evolution_name", None) or model.name]
    if not all(n == "offline" or str(n).startswith("offline/") for n in names):
        return None
    return (f"model.input_cost_per_token / output_cost_per_token are set ({model.input_cost_per_token} / "
            f"{model.output_cost_per_token} USD per token), but every model of this run is the built-in offline "
            "model, which is free: the prices apply to no call and the cost stays $0")


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 3) if values else None


def progress_line(journal: Journal, max_steps: int, llm: LLMTotals) -> str:
    """One line for the live progress artifact: nodes of the budget, valid, the best node's
    score (named: the hidden-split score with the printed metric beside it, or the validation
    metric), and the model calls so far (calls, failed, tokens, cost), e.g.
    ``12/30 nodes, 9 valid, best hidden-split score 0.8012 (printed 0.8133); LLM: 41 calls (2 failed), 310k tokens, $0.42``."""
    best = journal.best_node()
    tokens = llm.prompt_tokens + llm.completion_tokens
    cost = cost_text(llm, digits=2)
    name = score_name(journal)
    if best is None:
        shown = "-"
    elif name == HIDDEN_NAME:
        shown = f"{name} {ranking.score(best):.6g} (printed {fmt_score(best.metric_value)})"
    else:
        shown = f"{name} {ranking.score(best):.6g}"
    return (f"{len(journal)}/{max_steps} nodes, {len(journal.valid_pool())} valid, best "
            f"{shown}; LLM: {llm.calls} calls "
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
    ``hand_in.final_fit`` the final fit's outcome, None without one), ``score_name`` (what the
    run selects on, by name: :func:`swarm_evo.reporting.fitness_report.score_name`; the best
    node's ``score`` is that score) and ``printed_gains`` (per operation, the mean gain of the
    printed metric over the same parents:
    :func:`swarm_evo.reporting.operation_stats.printed_gains_by_operation`) and ``lanes`` (the
    scheduler's lanes: occupancy, model share, staleness:
    :func:`swarm_evo.reporting.slot_timeline.lanes_report`; None for journals before issue 52)."""
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
        "score_name": score_name(journal),
        "best_node": None if best is None else {"id": best.id, "step": best.step, "metric": best.metric_value,
                                                "hidden_score": best.hidden_score, "score": ranking.score(best),
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
        "printed_gains": printed_gains_by_operation(journal),
        "best_lineage": best_lineage(journal),
        "confinement": (journal.info.get("runtime") or {}).get("confinement"),
        "confined": (journal.info.get("runtime") or {}).get("confined", True),
        "lanes": lanes_report(nodes),
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
    name = summary.get("score_name") or PRINTED_NAME
    hidden = name == HIDDEN_NAME
    printed = summary.get("printed_gains") or {}
    beside = (" The last column is the mean gain of the printed validation metric over the same parents: "
              "where the two disagree, the program's own validation misjudged the change." if hidden else "")
    lines = ["", "## Where improvements come from", "",
             f"A valid child *improved* when its {name} (what the run selects on) beats its parent's (a merge: "
             "the best of its gene sources; drafts have no parent; a child of a buggy parent is not compared). "
             f"Gains are in the metric's units, positive = better whatever its direction.{beside}", "",
             f"| operation | children | valid | compared | improved | improvement rate | mean gain ({name}) | new bests |"
             + (" mean gain (printed metric) |" if hidden else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|" if hidden else "")]
    for op, s in improvements.items():
        lines.append(f"| {op} | {s['children']} | {s['valid']} | {s['compared']} | {s['improved']} | "
                     f"{_num(s['improvement_rate'])} | {_num(s['mean_gain'], signed=True)} | {s['new_best']} |"
                     + (f" {_num(printed.get(op), signed=True)} |" if hidden else ""))
    lines += ["", f"**Best lineage:** {lineage_text(summary.get('best_lineage'))}"]
    return lines


def final_report_markdown(
    summary: dict[str, Any],
    *,
    chart: str | None = None,
    tree_image: str | None = None,
    tree_link: str | None = None,
    timeline: str | None = None,
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
        timeline: the slot timeline as an image source (a ``data:`` URI or the file name), shown
            in the ``## Lanes`` section (:func:`swarm_evo.reporting.slot_timeline.lanes_lines`).
    """
    lines = [f"# swarm-evo run: {summary.get('competition_id') or summary.get('problem')}", ""]
    grade = summary.get("grade_report") or summary.get("problem_report") or {}
    best = summary.get("best_node")
    name = summary.get("score_name") or (HIDDEN_NAME if (best or {}).get("hidden_score") is not None else PRINTED_NAME)
    if best:
        if name == HIDDEN_NAME:
            scores = f"{name} {best['hidden_score']} (selected on; printed validation metric {best['metric']})"
        else:
            scores = f"{name} {best['metric']}"
        lines += [
            f"**Best node** step {best['step']} ({best['operation']}, `{best['id'][:8]}`): "
            f"{scores}; {best['approach'] or ''}",
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
    if summary.get("price_note"):
        lines += ["", f"**Note:** {summary['price_note']}."]
    lines += lanes_lines(summary.get("lanes"), timeline)
    if chart:
        lines += ["", f"## Best {name} over steps", "", f"![best {name} over steps]({chart})"]
    if tree_image or tree_link:
        lines += ["", "## Evolution tree", ""]
        if tree_image:
            lines += [f"![evolution tree]({tree_image})", ""]
        if tree_link and PurePath(tree_link).is_absolute():
            lines.append(f"Interactive tree (hover a node for its step, operation and {name}): open `{tree_link}` "
                         "in a browser.")
        elif tree_link:
            lines.append(f"Interactive tree (hover a node for its step, operation and {name}): [{tree_link}]({tree_link})")
    return "\n".join(lines) + "\n"
