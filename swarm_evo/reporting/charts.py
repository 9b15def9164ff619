"""Pictures of a run for people: the best-fitness chart (PNG), and what the evolution tree
(:mod:`swarm_evo.reporting.evolution_tree`) shares with it (status and operation colours, titles).

No Prefect here: ``tasks/artifacts.py`` writes these files into the run directory at the end
of a run and publishes them (the chart inside the final report, the tree from an artifact).

- :func:`best_fitness_chart` draws, with matplotlib's Agg backend (no display needed), the best
  score so far over the steps (the validation metric, or the hidden-split score the run
  selected on: :func:`swarm_evo.population.ranking.score`), every valid node's score as a point (by operation),
  each new best ringed in its operation's colour (which operation produced it: issue 17),
  buggy and dead nodes as marks along the bottom, and the Phase 1 / Phase 2 boundary.
"""

from __future__ import annotations

import base64
import math
from pathlib import Path

from swarm_evo.operators import registry
from swarm_evo.population import ranking
from swarm_evo.population.journal import Journal
from swarm_evo.reporting import fitness_report
from swarm_evo.reporting.operation_stats import new_best_nodes


CHART_FILE = "best_fitness.png"

CHART_SIZE = (900, 480)
"""Pixel size (width, height) of the best-fitness chart."""

STATUS_COLOURS = {"valid": "#43a047", "best": "#fbc02d", "buggy": "#e53935", "dead": "#616161"}
"""Fill colour per node status (swarm_evo.reporting.report.node_status)."""


def operation_colour(operation: str) -> str:
    """The chart colour of ``operation`` (its ``report.colour`` in :mod:`swarm_evo.operators`)."""
    return registry.report_style(operation).colour


def lower_is_better(journal: Journal) -> bool:
    """The run's metric direction: from the first node with a metric, else ``info``, else False."""
    for node in journal.nodes:
        if node.metric_value is not None:
            return node.lower_is_better
    return bool(journal.info.get("lower_is_better", False))


def run_title(journal: Journal) -> str:
    """The competition id or problem name of the run (``run`` when the journal has neither)."""
    return str(journal.info.get("competition_id") or journal.info.get("problem") or "run")


def phase2_start(journal: Journal) -> int | None:
    """The step of the first Phase 2 node, or None while the run is in Phase 1."""
    return min((n.step for n in journal.nodes if n.phase == 2 and n.step is not None), default=None)


def best_so_far(journal: Journal) -> list[tuple[int, float | None]]:
    """``(step, best valid score up to and including that step)`` for every node, in step order;
    None until the first valid node. The score is the one the run selects on
    (:func:`swarm_evo.population.ranking.score`: the hidden-split score where the run has one,
    else the validation metric); "best" follows the metric's direction."""
    nodes = journal.nodes
    series = ranking.best_so_far(nodes, [journal.is_valid(n) for n in nodes])
    return [(step, None if top is None else ranking.to_metric(top, node.lower_is_better))
            for (step, top), node in zip(series, nodes)]


def score_name(journal: Journal) -> str:
    """What the chart plots: ``hidden-split score`` when the run selects on its hidden split
    (issue 41), else ``validation metric`` (the metric the programs printed):
    :func:`swarm_evo.reporting.fitness_report.score_name`, the name every view uses."""
    return fitness_report.score_name(journal)


def fmt_metric(value: float | None) -> str:
    """A metric for labels and tooltips: 4 significant digits, a dash when there is none."""
    return "—" if value is None else f"{value:.4g}"


# ---------------------------------------------------------------------------- the chart
def best_fitness_chart(journal: Journal, path: Path) -> Path:
    """Write the best-fitness-over-steps chart as a PNG of :data:`CHART_SIZE` pixels; return ``path``.

    The y axis is the score the run selects on (:func:`score_name`: the hidden-split score or the
    validation metric) in the metric's own direction (the label says which, and whether lower or
    higher is better); the line is the best valid score so far, the points are the valid nodes
    (marker and colour by operation: its ``report`` style in :mod:`swarm_evo.operators`; the best
    node is a star), every node that raised the best
    so far (:func:`swarm_evo.reporting.operation_stats.new_best_nodes`) carries a large ring in its
    operation's colour and its operation's initial above it (legend "new best by <op>"),
    buggy and dead nodes are marks along the bottom, and a dashed line marks where Phase 2 starts.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path = Path(path)
    nodes = journal.nodes
    lower = lower_is_better(journal)
    best = journal.best_node()
    width, height = CHART_SIZE
    fig = Figure(figsize=(width / 100, height / 100), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    what = score_name(journal)
    ax.set_title(f"{run_title(journal)}: best {what} over {len(nodes)} steps", fontsize=11)
    ax.set_xlabel("step (journal order)")
    ax.set_ylabel(f"{what} ({'lower' if lower else 'higher'} is better)")
    ax.grid(True, alpha=0.3)

    series = best_so_far(journal)
    steps = [s for s, _ in series]
    ax.plot(steps, [math.nan if v is None else v for _, v in series], drawstyle="steps-post",
            color="#212121", linewidth=2, label="best so far", zorder=3)
    operations = registry.operators()
    for op in operations:
        pts = [(n.step, ranking.score(n)) for n in nodes if n.operation == op.name and journal.is_valid(n)]
        if pts:
            ax.scatter(*zip(*pts), marker=op.report.marker, s=30,
                       color=op.report.colour, alpha=0.85, label=f"valid {op.name}", zorder=4)
    improvers = new_best_nodes(journal)
    for op in operations:
        pts = [(n.step, ranking.score(n)) for n in improvers if n.operation == op.name]
        if pts:
            ax.scatter(*zip(*pts), marker="o", s=170, facecolors="none", linewidths=2.2,
                       edgecolors=op.report.colour, label=f"new best by {op.name}", zorder=4)
    for n in improvers:
        ax.annotate(n.operation[:2], (n.step, ranking.score(n)), textcoords="offset points", xytext=(0, 9),
                    ha="center", fontsize=7, color=operation_colour(n.operation), zorder=6)
    invalid = [(n.step, ranking.score(n)) for n in nodes
               if ranking.score(n) is not None and not n.is_buggy and not n.dead and not journal.is_valid(n)]
    if invalid:
        ax.scatter(*zip(*invalid), marker="o", s=30, facecolors="none", edgecolors="#9e9e9e",
                   label="not valid (genes)", zorder=4)
    if best is not None:
        ax.scatter([best.step], [ranking.score(best)], marker="*", s=260, color=STATUS_COLOURS["best"],
                   edgecolors="#212121", linewidths=0.8, label=f"best (step {best.step})", zorder=5)
    rug = ax.get_xaxis_transform()  # x in data, y in axes fractions
    buggy = [n.step for n in nodes if n.is_buggy and not n.dead]
    dead = [n.step for n in nodes if n.dead]
    if buggy:
        ax.scatter(buggy, [0.03] * len(buggy), transform=rug, marker="x", s=36,
                   color=STATUS_COLOURS["buggy"], label="buggy", zorder=4)
    if dead:
        ax.scatter(dead, [0.03] * len(dead), transform=rug, marker="X", s=44,
                   color=STATUS_COLOURS["dead"], label="dead", zorder=4)
    if nodes:  # headroom: the phase labels above the points, the buggy/dead marks below them
        low, high = ax.get_ylim()
        span = (high - low) or 1.0
        ax.set_ylim(low - 0.08 * span, high + 0.12 * span)
    start2 = phase2_start(journal)
    if start2 is not None:
        ax.axvline(start2 - 0.5, color="#5e35b1", linestyle="--", linewidth=1.2)
        ax.axvspan(start2 - 0.5, max(steps) + 0.5, color="#5e35b1", alpha=0.05)
        ax.text(start2 - 0.5, 0.98, "  Phase 2 →", transform=rug, va="top", ha="left",
                fontsize=9, color="#5e35b1")
        ax.text(start2 - 0.5, 0.98, "← Phase 1  ", transform=rug, va="top", ha="right",
                fontsize=9, color="#5e35b1")
    if not nodes:
        ax.text(0.5, 0.5, "no nodes yet", transform=ax.transAxes, ha="center", va="center")
    else:
        ax.set_xlim(0.5, max(steps) + 0.5)
        ax.xaxis.get_major_locator().set_params(integer=True)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    return path


def png_data_uri(path: Path) -> str:
    """``data:image/png;base64,...`` of a PNG file (for an inline Markdown image)."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def svg_data_uri(svg: str) -> str:
    """``data:image/svg+xml;base64,...`` of an SVG document (for an inline Markdown image)."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")

