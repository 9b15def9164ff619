"""How far the programs' printed metrics can be trusted (issue 41, item 3).

In a run with a hidden split every valid node has two scores: the validation metric its
program printed (the program's own signal) and the host's grade of the hidden rows (what the
search selects on). :func:`fitness_summary` says how well the first ranks the nodes against the
second (Spearman's rank correlation over every node with both, direction-aware) and lists
the nodes whose printed metric misled most (the largest overstatement,
:func:`swarm_evo.population.ranking.printed_gap`). ``run_report.json`` (key ``fitness``) and the
final report show it.
"""

from __future__ import annotations

import math
from typing import Any

from swarm_evo.population import ranking
from swarm_evo.population.journal import Journal
from swarm_evo.population.node import Node

MISLEADING_SHOWN = 5
"""How many of the most misleading nodes the summary lists."""

HIDDEN_NAME = "hidden-split score"
"""What every view calls the score of a run that selects on its hidden split (issue 54, item 1)."""
PRINTED_NAME = "validation metric"
"""What every view calls the score of a run that selects on the metric the programs printed."""


def selects_on_hidden(journal: Journal) -> bool:
    """Whether the run ranks its nodes by their hidden-split score
    (:func:`swarm_evo.population.ranking.fitness`): the journal says it selected on its hidden
    split (``info["fitness"]["source"] == "hidden"``), or some node has a hidden score (the
    ranking uses it wherever a node has one)."""
    if (journal.info.get("fitness") or {}).get("source") == "hidden":
        return True
    return any(n.hidden_score is not None for n in journal.nodes)


def score_name(journal: Journal) -> str:
    """The name of the score the run selects on, for every view a person reads
    (:data:`HIDDEN_NAME` or :data:`PRINTED_NAME`)."""
    return HIDDEN_NAME if selects_on_hidden(journal) else PRINTED_NAME


def fmt_score(value: float | None) -> str:
    """A score for labels, tooltips and report lines: 4 significant digits, ``—`` for None."""
    return "—" if value is None else f"{value:.4g}"


def shown_score(node: Node, name: str) -> float | None:
    """The score a view shows for ``node`` under ``name`` (:func:`score_name`): what the run ranks it
    by (:func:`swarm_evo.population.ranking.score`), except that in a run selecting on its hidden
    split a node without a hidden score (a buggy one) shows none rather than its printed metric
    under the hidden score's name."""
    if name == HIDDEN_NAME and node.hidden_score is None:
        return None
    return ranking.score(node)


def score_text(node: Node, name: str) -> str:
    """The node's score as a person should read it: ``hidden-split score 0.1552 (printed metric
    0.1003)`` in a run that selects on its hidden split (``name`` :data:`HIDDEN_NAME`; the score is
    :func:`shown_score`), else ``validation metric 0.1003``."""
    if name == HIDDEN_NAME:
        return f"{name} {fmt_score(shown_score(node, name))} (printed metric {fmt_score(node.metric_value)})"
    return f"{name} {fmt_score(node.metric_value)}"


def fitness_summary(journal: Journal) -> dict[str, Any]:
    """``{"source", "why", "hidden_split", "final_fit", "scored", "spearman", "misleading",
    "most_misleading"}``:

    * ``source`` / ``why`` — what the run selected on (``journal.info["fitness"]``; ``printed``
      for runs before issue 41), ``hidden_split`` its record, ``final_fit`` the final fit's;
    * ``scored`` — nodes (any status) with both a printed metric and a hidden score;
    * ``spearman`` — Spearman's rho of printed and hidden fitness over them (None with fewer
      than 3, or when either is constant): 1 = the printed metric ranks the nodes exactly as the
      hidden rows do;
    * ``misleading`` — how many of them :func:`~swarm_evo.population.ranking.printed_misleads`;
    * ``most_misleading`` — up to :data:`MISLEADING_SHOWN` nodes whose printed metric overstates
      the hidden score, largest gap first: ``{node_id, step, operation, printed, hidden, gap}``.
    """
    from scipy.stats import spearmanr

    info = journal.info.get("fitness") or {}
    both = [n for n in journal.nodes if n.printed_fitness is not None and n.hidden_fitness is not None]
    rho = None
    if len(both) >= 3:
        value = spearmanr([n.printed_fitness for n in both], [n.hidden_fitness for n in both]).statistic
        rho = None if value is None or math.isnan(value) else round(float(value), 4)
    over = sorted((n for n in both if (ranking.printed_gap(n) or 0) > 0), key=lambda n: ranking.printed_gap(n) or 0,
                  reverse=True)
    return {
        "source": info.get("source", "printed"),
        "why": info.get("why"),
        "hidden_split": journal.info.get("hidden_split"),
        "final_fit": journal.info.get("final_fit"),
        "scored": len(both),
        "spearman": rho,
        "misleading": sum(1 for n in both if ranking.printed_misleads(n)),
        "most_misleading": [{"node_id": n.id, "step": n.step, "operation": n.operation, "printed": n.metric_value,
                             "hidden": n.hidden_score, "gap": round(ranking.printed_gap(n) or 0.0, 6)}
                            for n in over[:MISLEADING_SHOWN]],
    }


def _final_fit_line(fit: dict[str, Any] | None) -> str | None:
    if not fit:
        return None
    if fit["status"] == "refit":
        return (f"**Final fit:** node `{fit['node_id'][:8]}` was trained again on the full training data "
                f"({fit['seconds']} s); that submission is handed in.")
    return (f"**Final fit:** {'not run' if fit['status'] == 'skipped' else 'failed'} for node "
            f"`{fit['node_id'][:8]}` ({fit['reason']}); its original submission is handed in.")


def fitness_lines(summary: dict[str, Any] | None) -> list[str]:
    """The final report's "Fitness" section (Markdown lines) from :func:`fitness_summary`; []
    for ``None``."""
    if not summary:
        return []
    lines = ["", "## Fitness", "", f"Selected on: **{summary['source']}**" + (f" ({summary['why']})." if summary.get("why")
                                                                          else ".")]
    if summary.get("scored"):
        rho = summary.get("spearman")
        lines += ["", f"{summary['scored']} node(s) have both a printed metric and a hidden score; the printed metric "
                      f"ranks them with Spearman rho {'—' if rho is None else rho} against the hidden score; "
                      f"{summary['misleading']} overstate it by more than {ranking.MISLEAD_SHARE:.0%}."]
        if summary.get("most_misleading"):
            lines += ["", "| step | node | operation | printed | hidden | gap |", "|---|---|---|---|---|---|"]
            lines += [f"| {m['step']} | `{m['node_id'][:8]}` | {m['operation']} | {m['printed']} | {m['hidden']} | "
                      f"{m['gap']:+.4g} |" for m in summary["most_misleading"]]
    fit = _final_fit_line(summary.get("final_fit"))
    if fit:
        lines += ["", fit]
    return lines
