"""The keyed views of a run in the Prefect UI that are replaced while it goes (issue 54, item 5): the
artifacts' keys and the UI's links, the node table ``<run>-nodes``, the lanes ``<run>-lanes``, the
pictures in the run directory and ``<run>-lineage`` (the best node so far, its lineage, the
best-score chart and the evolution tree), and the rule and the thread that replace them while the
run goes (:func:`update_live_views`, called by ``tasks.artifacts.update_progress`` after every node).

``tasks/artifacts.py`` imports these names (its tasks publish the same views at an epoch's and the
run's end); this module does not import it.
"""

from __future__ import annotations

import contextvars
import re
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from swarm_evo.population.node import Node
from swarm_evo.reporting import charts, evolution_tree, live, slot_timeline
from swarm_evo.reporting import report as views
from swarm_evo.run.session import get_session

_LOCK = threading.Lock()


def artifact_key(run_dir: str, kind: str) -> str:
    """``<run-dir-name>-<kind>`` reduced to Prefect's key alphabet."""
    name = re.sub(r"[^a-z0-9-]+", "-", get_session(run_dir).run_dir.name.lower()).strip("-")
    return f"{name}-{kind}"[:100]


def ui_link(path: str) -> str:
    """The Prefect UI's address of ``path`` (``runs/flow-run/<id>``, ``artifacts/key/<key>``) from
    the UI's root: artifacts are read in the UI, so a link relative to its origin holds whichever
    server shows them later (a run on the ephemeral API has a temporary address; the history is
    shown by a later ``prefect server start``)."""
    return f"/{path}"


def node_page_key(run_dir: str, node: Node) -> str:
    """The key of ``node``'s page artifact: ``<run>-node-<step>-<first 8 characters of its id>``."""
    return artifact_key(run_dir, f"node-{node.step}-{node.id[:8]}")


def step_run_name(node: Node) -> str:
    """The name a step's flow run gets once its node is appended: ``step<n>-<operation>-<id8>``
    (the journal's step, not the launch order of ``draft-slot<n>``)."""
    return f"step{node.step}-{node.operation}-{node.id[:8]}"


def node_links(run_dir: str) -> dict[str, dict[str, str]]:
    """The node table's links (:func:`swarm_evo.reporting.report.node_table`): per node appended
    in a Prefect run, ``page`` (its page artifact) and ``flow_run`` (its step's flow run), as
    Markdown links, which the UI's table renders."""
    session = get_session(run_dir)
    links: dict[str, dict[str, str]] = {}
    for node in session.journal.nodes:
        flow_run_id = (node.metadata.get("prefect") or {}).get("flow_run_id")
        if not flow_run_id:
            continue
        links[node.id] = {
            "page": f"[node {node.step}]({ui_link('artifacts/key/' + node_page_key(run_dir, node))})",
            "flow_run": f"[{step_run_name(node)}]({ui_link('runs/flow-run/' + flow_run_id)})",
        }
    return links


def node_table_artifact(run_dir: str) -> None:
    """Create (replace) the keyed node table artifact ``<run>-nodes`` (the body of
    ``tasks.artifacts.publish_node_table``, which the live views call without a task run)."""
    session = get_session(run_dir)
    create_table_artifact(
        table=views.node_table(session.journal, node_links(run_dir)),
        key=artifact_key(run_dir, "nodes"),
        description=f"Journal nodes of {session.objective.id} ({session.run_dir}); the score column is what "
        "the run selects on; exec_s_all_attempts sums every execution of a node, exec_s_last is the journal's exec_time",
    )


MAX_TREE_PREVIEW = 400_000
"""Largest evolution-tree SVG (bytes) shown inline in the final report and lineage artifacts; a larger tree
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


def lanes_svg(run_dir: str) -> str | None:
    """The run's slot timeline (:func:`swarm_evo.reporting.slot_timeline.timeline_svg`), None before
    any node recorded its lane."""
    nodes = get_session(run_dir).journal.nodes
    report = slot_timeline.lanes_report(nodes)
    if report is None:
        return None
    spans = [s for s in slot_timeline.step_spans(nodes) if s.lane is not None]
    return slot_timeline.timeline_svg(spans, report["lanes"])


def lanes_artifact(run_dir: str) -> None:
    """Create (replace) ``<run>-lanes`` (the body of ``tasks.artifacts.publish_lanes``); nothing before any node
    recorded its lane."""
    svg = lanes_svg(run_dir)
    if svg is None:
        return
    report = slot_timeline.lanes_report(get_session(run_dir).journal.nodes)
    create_markdown_artifact(
        markdown="\n".join(["# Lanes", *slot_timeline.lanes_lines(report, charts.svg_data_uri(svg))[3:]]) + "\n",
        key=artifact_key(run_dir, "lanes"),
        description=f"Lanes of {get_session(run_dir).objective.id}: occupancy {report['occupancy']}",
    )


LIVE_INTERVAL = 20.0
"""Least seconds between two versions of a run's live views (the node table ``<run>-nodes``, the
lanes ``<run>-lanes`` and the best-so-far chart with the evolution tree ``<run>-lineage``). A
version is also only made once the journal grew by :data:`swarm_evo.reporting.live.GROWTH` (5 %,
at least one node) since the last (:func:`swarm_evo.reporting.live.live_due`): Prefect keeps every
version of a keyed artifact, so a 1,000-node run makes about a hundred versions of each, not a
thousand."""


LIVE_JOIN_SECONDS = 120.0
"""Longest wait, at the end of the search, for a version of the live views still being made."""


class _LiveViews:
    """One run's live views: the top-level flow run's context (the versions are that run's
    artifacts), the journal's length and the monotonic time of the last version, and the thread
    making the current one."""

    def __init__(self, context: contextvars.Context, nodes: int, at: float) -> None:
        self.context, self.nodes, self.at = context, nodes, at
        self.thread: threading.Thread | None = None


_LIVE: dict[str, _LiveViews] = {}  # run dir -> its live views (from start_live_views)


def start_live_views(run_dir: str) -> None:
    """Start counting for the run's live views from now and the journal's length (called by
    ``tasks.artifacts.start_progress`` in the top-level flow run, whose context the versions keep)."""
    with _LOCK:
        _LIVE[run_dir] = _LiveViews(contextvars.copy_context(), len(get_session(run_dir).journal), time.monotonic())


def update_live_views(run_dir: str, final: bool = False) -> None:
    """Replace the run's live views when due (:data:`LIVE_INTERVAL`, :func:`swarm_evo.reporting.live.live_due`):
    the node table, the lanes and ``<run>-lineage`` (:func:`lineage_artifact`), on a thread of
    their own in the top-level flow run's context, so the step that triggers them does not wait
    (drawing the chart and the tree of a large run takes a second); at most one such thread per
    run, a call while it works is skipped. ``final`` (the end of the search) waits for that thread
    (at most :data:`LIVE_JOIN_SECONDS`) and starts none: the run publishes its final views itself. Nothing for a run without
    :func:`start_live_views`."""
    with _LOCK:
        state = _LIVE.get(run_dir)
        if state is None:
            return
        thread = state.thread
        if not final:
            if thread is not None and thread.is_alive():
                return
            now, nodes = time.monotonic(), len(get_session(run_dir).journal)
            if not live.live_due(nodes, state.nodes, now - state.at, LIVE_INTERVAL):
                return
            state.nodes, state.at = nodes, now
            state.thread = threading.Thread(target=state.context.copy().run, args=(_live_views, run_dir),
                                            name="live-views", daemon=True)
            state.thread.start()
            return
    if thread is not None:
        thread.join(timeout=LIVE_JOIN_SECONDS)
        if thread.is_alive():  # an API that does not answer must not hold the run's end
            get_run_logger().warning("the live views' last update still runs after %s s; the run goes on",
                                     LIVE_JOIN_SECONDS)


def _live_views(run_dir: str) -> None:
    """One version of the live views (a view must not fail the run: errors are logged)."""
    for make in (node_table_artifact, lanes_artifact, lineage_artifact):
        try:
            make(run_dir)
        except Exception as exc:  # noqa: BLE001  (a view: the journal holds the nodes)
            get_run_logger().warning("live view %s not replaced: %s: %s", make.__name__, type(exc).__name__, exc)


def lineage_artifact(run_dir: str, chart: Path | None = None, final: bool = False) -> None:
    """Create (replace) ``<run>-lineage``: the best node so far, its lineage, the best-so-far chart
    and the evolution tree (:func:`swarm_evo.reporting.live.live_markdown`; the tree inline while
    its SVG is at most :data:`MAX_TREE_PREVIEW` bytes), each node linked to its page. While the run
    goes it also rewrites ``RUN_DIR/best_fitness.png`` and ``RUN_DIR/evolution_tree.html``
    (:func:`write_run_pictures`); ``chart`` is a chart already drawn (the final report's)."""
    session = get_session(run_dir)
    journal = session.journal
    if chart is None:
        chart = write_run_pictures(run_dir).get("chart")
    svg = evolution_tree.evolution_tree_svg(journal)
    tree_file = session.run_dir / evolution_tree.TREE_FILE
    pages = {node.id: ui_link("artifacts/key/" + node_page_key(run_dir, node)) for node in journal.nodes
             if (node.metadata.get("prefect") or {}).get("flow_run_id")}
    views = {"node table": ui_link("artifacts/key/" + artifact_key(run_dir, "nodes")),
             "lanes": ui_link("artifacts/key/" + artifact_key(run_dir, "lanes"))}
    if final:
        views["final report"] = ui_link("artifacts/key/" + artifact_key(run_dir, "report"))
    markdown = live.live_markdown(
        journal, session.config.search.max_steps, pages=pages,
        chart=charts.png_data_uri(chart) if chart else None,
        tree=charts.svg_data_uri(svg) if len(svg) <= MAX_TREE_PREVIEW else None,
        tree_note=f"The tree ({len(svg) // 1000} kB of SVG) is too big to show here: open `{tree_file}`.",
        links=views, final=final, when=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    )
    create_markdown_artifact(
        markdown=markdown,
        key=artifact_key(run_dir, "lineage"),
        description=f"Best so far, its lineage, the best-score chart and the evolution tree of {session.objective.id}"
        + ("" if final else " (replaced while the run goes)"),
    )
