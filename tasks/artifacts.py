"""Artifact tasks: the node table, live progress and the final report (SPEC §12).

Keys are lowercase letters, digits and dashes (Prefect's rule), derived from the run
directory's name so each run has its own artifacts.
"""

from __future__ import annotations

import threading
import time

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
from swarm_evo.population.node import Node
from swarm_evo.reporting import charts, evolution_tree, node_page, operation_stats, run_report, slot_timeline
from swarm_evo.reporting import report as views
from swarm_evo.run.session import get_session
from swarm_evo.step import persistence
from tasks._policy import TASK_DEFAULTS
from tasks.live_views import (  # noqa: F401  (keys, links and views: importers use them from here)
    LIVE_INTERVAL,
    MAX_TREE_PREVIEW,
    artifact_key,
    lanes_artifact,
    lanes_svg,
    lineage_artifact,
    node_links,
    node_page_key,
    node_table_artifact,
    start_live_views,
    step_run_name,
    ui_link,
    update_live_views,
    write_run_pictures,
)

PROGRESS_INTERVAL = 10.0
"""Least seconds between two updates of a run's progress artifact. One update per node (a PATCH,
≈ 20 ms) was a tenth of the orchestration per node (issue 16), and nodes of small competitions
take 2–3 s; a progress bar needs no more than one update every few seconds (the node table
follows every epoch), and the end of the search always updates it (``final=True``)."""

_PROGRESS: dict[str, list] = {}  # run dir -> [artifact id, monotonic time of the last update]
_LOCK = threading.Lock()


def run_tags(run_dir: str) -> list[str]:
    """Tags that tell runs apart in the UI's list: ``competition:<id>`` (or ``problem:<name>``),
    ``seed:<n>``, ``policy:<search policy>``."""
    session = get_session(run_dir)
    info = session.journal.info
    what = f"competition:{info['competition_id']}" if info.get("competition_id") else f"problem:{session.objective.id}"
    return [what, f"seed:{session.config.seed}", f"policy:{session.config.search.policy}"]


def label_run(run_dir: str) -> None:
    """Name the current (top-level) flow run after the run directory, unless its name already
    starts with it (a sweep names its runs so, a resumed one ``<name>-resume<k>``), and add
    :func:`run_tags` (issue 54, item 4). Nothing outside a flow run; a failure is logged."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run

    flow_run_id = flow_run.get_id()
    if not flow_run_id:
        return
    name = get_session(run_dir).run_dir.name
    current = flow_run.get_name() or ""
    tags = list(dict.fromkeys([*(flow_run.get_tags() or []), *run_tags(run_dir)]))
    try:
        with get_client(sync_client=True) as client:
            client.update_flow_run(flow_run_id, name=None if current.startswith(name) else name, tags=tags)
    except Exception as exc:  # noqa: BLE001  (a label: the run goes on)
        get_run_logger().warning("cannot name the run's flow run: %s: %s", type(exc).__name__, exc)


def start_progress(run_dir: str) -> None:
    """Create the run's progress artifact (0 %); log at WARNING when the run's prices apply to no
    call (:func:`swarm_evo.reporting.report.offline_price_note`); name and tag the run's flow run
    (:func:`label_run`)."""
    session = get_session(run_dir)
    note = views.offline_price_note(session.config.model)
    if note:
        get_run_logger().warning("%s", note)
    label_run(run_dir)
    done = 100.0 * len(session.journal) / session.config.search.max_steps
    artifact_id = create_progress_artifact(
        progress=done,
        key=artifact_key(run_dir, "progress"),
        description=f"Nodes in the journal of {session.objective.id}, as % of the budget",
    )
    with _LOCK:
        _PROGRESS[run_dir] = [str(artifact_id), time.monotonic()]
    start_live_views(run_dir)


def update_progress(run_dir: str, final: bool = False) -> None:
    """Set the progress artifact to the journal's share of the budget and its description to the
    progress line (nodes, valid, best, cost). Skipped when the last update is less than
    :data:`PROGRESS_INTERVAL` s old, unless ``final`` (the end of the search). The steps call it
    after every node they append, so it also replaces the live views when they are due
    (:func:`update_live_views`)."""
    update_live_views(run_dir, final=final)
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


def publish_node_page(run_dir: str, node: Node) -> str | None:
    """Publish ``node``'s page (:func:`swarm_evo.reporting.node_page.node_page_markdown`: facts,
    error, output tail, diff to its parent or per gene source, debug chain, code) as a markdown
    artifact (:func:`node_page_key`), linked to the step's flow run; return its key. Called
    when the node is appended (tasks/persist.py); a page that cannot be published is logged at
    WARNING and left out (None): a view must not fail the step."""
    session = get_session(run_dir)
    key = node_page_key(run_dir, node)
    flow_run_id = (node.metadata.get("prefect") or {}).get("flow_run_id")
    try:
        create_markdown_artifact(
            markdown=node_page.node_page_markdown(
                session.journal, node, flow_run_url=ui_link(f"runs/flow-run/{flow_run_id}") if flow_run_id else None),
            key=key,
            description=f"Node step {node.step} ({node.operation}) of {session.objective.id}: code, diff, output, debug chain",
        )
    except Exception as exc:  # noqa: BLE001  (a view: the journal holds the node)
        get_run_logger().warning("cannot publish the page of node %s: %s: %s", node.id[:8], type(exc).__name__, exc)
        return None
    return key


def label_step_run(node: Node) -> None:
    """Rename the current (step) flow run :func:`step_run_name` and tag it ``node:<id8>`` and
    ``step:<n>`` (issue 54, item 4); nothing outside a flow run. A failure is logged, never raised."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run

    flow_run_id = flow_run.get_id()
    if not flow_run_id:
        return
    tags = list(dict.fromkeys([*(flow_run.get_tags() or []), f"node:{node.id[:8]}", f"step:{node.step}"]))
    try:
        with get_client(sync_client=True) as client:
            client.update_flow_run(flow_run_id, name=step_run_name(node), tags=tags)
    except Exception as exc:  # noqa: BLE001  (a label: the run goes on)
        get_run_logger().warning("cannot rename the step's flow run: %s: %s", type(exc).__name__, exc)


@task(name="publish-node-table", **TASK_DEFAULTS)
def publish_node_table(run_dir: str) -> None:
    """The node table artifact (one row per journal node; each row links the node's page and its
    step's flow run: :func:`node_links`)."""
    node_table_artifact(run_dir)


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
    timeline = lanes_svg(run_dir)
    if timeline is not None:
        atomic_write_text(session.run_dir / slot_timeline.TIMELINE_FILE, timeline)
    markdown = views.final_report_markdown(
        summary,
        chart=chart.name if chart else None,
        tree_link=tree.name if tree else None,
        timeline=slot_timeline.TIMELINE_FILE if timeline else None,
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
            timeline=charts.svg_data_uri(timeline) if timeline else None,
        ),
        key=artifact_key(run_dir, "report"),
        description=f"Final report of {session.objective.id}",
    )
    lineage_artifact(run_dir, chart=chart, final=True)
    if tree is not None:
        create_link_artifact(
            link=tree.resolve().as_uri(),
            link_text=str(tree),
            key=artifact_key(run_dir, "tree"),
            description=f"Evolution tree of {session.objective.id}: one self-contained HTML file "
            "(open it in a browser; browsers do not follow file:// links from a web page, so copy the address)",
        )
    return summary


@task(name="publish-lanes", **TASK_DEFAULTS)
def publish_lanes(run_dir: str) -> None:
    """The markdown artifact ``<run>-lanes``: the lanes' occupancy and the slot timeline so far
    (issue 52, item 6), replaced at every epoch's end while the run goes (the scheduler's
    epoch-end thread), with the live views (:func:`update_live_views`) and once more at its end:
    one keyed artifact per run."""
    lanes_artifact(run_dir)


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
