"""Artifact tasks: the node table, live progress and the final report (SPEC §12).

Keys are lowercase letters, digits and dashes (Prefect's rule), derived from the run
directory's name so each run has its own artifacts.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from pydantic import BaseModel

from swarm_evo.population.journal import atomic_write_text
from swarm_evo.reporting import charts, evolution_tree, operation_stats, run_report
from swarm_evo.reporting import report as views
from swarm_evo.run.session import get_session
from swarm_evo.step import persistence
from tasks._policy import TASK_DEFAULTS

PROGRESS_INTERVAL = 10.0
"""Least seconds between two updates of a run's progress artifact. One update per node (a PATCH,
≈ 20 ms) was a tenth of the orchestration per node (issue 16), and nodes of small competitions
take 2–3 s; a progress bar needs no more than one update every few seconds (the node table
follows every epoch), and the end of the search always updates it (``final=True``)."""

_PROGRESS: dict[str, list] = {}  # run dir -> [artifact id, monotonic time of the last update]
_LOCK = threading.Lock()


def artifact_key(run_dir: str, kind: str) -> str:
    """``<run-dir-name>-<kind>`` reduced to Prefect's key alphabet."""
    name = re.sub(r"[^a-z0-9-]+", "-", get_session(run_dir).run_dir.name.lower()).strip("-")
    return f"{name}-{kind}"[:100]


def start_progress(run_dir: str) -> None:
    """Create the run's progress artifact (0 %); log at WARNING when the run's prices apply to no
    call (:func:`swarm_evo.reporting.report.offline_price_note`)."""
    session = get_session(run_dir)
    note = views.offline_price_note(session.config.model)
    if note:
        get_run_logger().warning("%s", note)
    done = 100.0 * len(session.journal) / session.config.search.max_steps
    artifact_id = create_progress_artifact(
        progress=done,
        key=artifact_key(run_dir, "progress"),
        description=f"Nodes in the journal of {session.objective.id}, as % of the budget",
    )
    with _LOCK:
        _PROGRESS[run_dir] = [str(artifact_id), time.monotonic()]


def update_progress(run_dir: str, final: bool = False) -> None:
    """Set the progress artifact to the journal's share of the budget and its description to the
    progress line (nodes, valid, best, cost). Skipped when the last update is less than
    :data:`PROGRESS_INTERVAL` s old, unless ``final`` (the end of the search)."""
    with _LOCK:
        entry = _PROGRESS.get(run_dir)
        if entry is None:
            return
        now = time.monotonic()
        if not final and now - entry[1] < PROGRESS_INTERVAL:
            return
        artifact_id, entry[1] = entry[0], now
    session = get_session(run_dir)
    update_progress_artifact(
        artifact_id=artifact_id,
        progress=min(100.0, 100.0 * len(session.journal) / session.config.search.max_steps),
        description=views.progress_line(session.journal, session.config.search.max_steps,
                                        session.ledger.totals()),
    )


@task(name="publish-node-table", **TASK_DEFAULTS)
def publish_node_table(run_dir: str) -> None:
    """The node table artifact (one row per journal node)."""
    session = get_session(run_dir)
    create_table_artifact(
        table=views.node_table(session.journal),
        key=artifact_key(run_dir, "nodes"),
        description=f"Journal nodes of {session.objective.id} ({session.run_dir})",
    )


MAX_TREE_PREVIEW = 400_000
"""Largest evolution-tree SVG (bytes) shown inline in the final report artifact; a larger tree
is only linked (a huge artifact slows the UI's artifact lists)."""


def write_run_pictures(run_dir: str) -> dict[str, Path]:
    """Write ``RUN_DIR/best_fitness.png`` and ``RUN_DIR/evolution_tree.html``; return their paths
    (``chart``, ``tree``). A picture that cannot be drawn is logged and left out: it must not
    fail a finished run."""
    session = get_session(run_dir)
    out: dict[str, Path] = {}
    for name, draw, file in (
        ("chart", charts.best_fitness_chart, charts.CHART_FILE),
        ("tree", evolution_tree.evolution_tree_html, evolution_tree.TREE_FILE),
    ):
        try:
            out[name] = draw(session.journal, session.run_dir / file)
        except Exception as exc:  # a picture is a view: the run's results stand
            get_run_logger().warning("cannot draw %s: %s: %s", file, type(exc).__name__, exc)
    return out


@task(name="publish-final-report", **TASK_DEFAULTS)
def publish_final_report(run_dir: str, grade: BaseModel) -> dict:
    """The final report: ``RUN_DIR/report.md`` and a markdown artifact; returns the summary.

    Also writes ``RUN_DIR/best_fitness.png`` and ``RUN_DIR/evolution_tree.html``. The Prefect
    UI cannot load files of the run directory, so the artifact carries the chart and a preview
    of the tree inline (``data:`` URIs, which its markdown renderer shows as images) and names
    the HTML file; a link artifact ``<run>-tree`` points at the HTML file (``file://``).
    ``report.md`` refers to both files by their names.
    """
    session = get_session(run_dir)
    summary = views.run_summary(session.journal, grade, llm=session.ledger.summary().report(),
                                stop_reason=session.stop_reason, hand_in=persistence.handed_in(session))
    summary["price_note"] = views.offline_price_note(session.config.model)
    pictures = write_run_pictures(run_dir)
    chart, tree = pictures.get("chart"), pictures.get("tree")
    markdown = views.final_report_markdown(
        summary,
        chart=chart.name if chart else None,
        tree_link=tree.name if tree else None,
    )
    atomic_write_text(session.run_dir / "report.md", markdown)
    preview = None
    if tree is not None:
        svg = evolution_tree.evolution_tree_svg(session.journal)
        preview = charts.svg_data_uri(svg) if len(svg) <= MAX_TREE_PREVIEW else None
    create_markdown_artifact(
        markdown=views.final_report_markdown(
            summary,
            chart=charts.png_data_uri(chart) if chart else None,
            tree_image=preview,
            tree_link=str(tree) if tree else None,
        ),
        key=artifact_key(run_dir, "report"),
        description=f"Final report of {session.objective.id}",
    )
    if tree is not None:
        create_link_artifact(
            link=tree.resolve().as_uri(),
            link_text=str(tree),
            key=artifact_key(run_dir, "tree"),
            description=f"Evolution tree of {session.objective.id}: one self-contained HTML file "
            "(open it in a browser; browsers do not follow file:// links from a web page, so copy the address)",
        )
    return summary


def phase2_text(start: int | None) -> str:
    """``Phase 2 from step 9``, or ``Phase 2 never ran`` for a run that ended in Phase 1."""
    return "Phase 2 never ran" if start is None else f"Phase 2 from step {start}"


@task(name="publish-run-report", **TASK_DEFAULTS)
def publish_run_report(run_dir: str, report: dict) -> None:
    """The run report as table artifacts: ``<run>-operations`` (one row per operation),
    ``<run>-improvements`` (per operation: how often a valid child beat its parent, mean gain,
    new bests; issue 17) and ``<run>-agents`` (one row per agent); the JSON is
    ``RUN_DIR/run_report.json``."""
    session = get_session(run_dir)
    name = report.get("score_name") or "validation metric"
    create_table_artifact(
        table=run_report.run_report_rows(report),
        key=artifact_key(run_dir, "operations"),
        description=f"Per-operation rates of {session.objective.id}: buggy, dead, debug fixes, mean fitness "
        f"({name}, direction-aware), mean printed metric ({phase2_text(report.get('phase2_started_at_step'))})",
    )
    improvements = {op: stats for op, stats in report["operations"].items() if "improvement_rate" in stats}
    lineage = operation_stats.lineage_text(report.get("best_lineage"))
    create_table_artifact(
        table=operation_stats.improvement_rows(improvements),
        key=artifact_key(run_dir, "improvements"),
        description=f"Where improvements come from in {session.objective.id}: valid children whose {name} beats "
        f"their parent's (merges: best gene source; drafts: none); gains in the {name}; best lineage: {lineage}"[:1000],
    )
    create_table_artifact(
        table=run_report.agent_rows(report),
        key=artifact_key(run_dir, "agents"),
        description=f"Steps per agent of {session.objective.id} "
        f"({len(report.get('agent_evolutions') or [])} agent evolutions)",
    )
