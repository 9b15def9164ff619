"""The evolution tree of a run for people: ONE self-contained HTML file (inline CSS, JS and SVG,
no external resource, works offline) with nodes coloured by status (valid, best, buggy, dead),
parent edges, and merge edges from ``metadata.gene_sources`` (dashed, labelled by locus), a
tooltip per node (step, operation, score) and a details panel on click; and the same drawing
as a standalone SVG document (the final report shows it as an image). The best-fitness chart
and the shared colours are :mod:`swarm_evo.reporting.charts`.

Every score on the tree is the one the run selects on (:func:`swarm_evo.population.ranking.score`:
the hidden-split score where the run has one, else the validation metric), named as such
(:func:`swarm_evo.reporting.fitness_report.score_name`), with the printed metric beside it in a
run that selects on its hidden split (issue 54, item 1)."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

from swarm_evo.operators import registry
from swarm_evo.population.journal import Journal, atomic_write_text
from swarm_evo.population.node import Node
from swarm_evo.reporting.charts import STATUS_COLOURS, fmt_metric, lower_is_better, run_title
from swarm_evo.reporting.fitness_report import HIDDEN_NAME, score_name, score_text, shown_score
from swarm_evo.reporting.report import node_status

TREE_FILE = "evolution_tree.html"
DX, DY, MARGIN, RADIUS = 58, 96, 40, 14


def tree_layout(journal: Journal) -> dict[str, tuple[float, float]]:
    """Pixel centre ``(x, y)`` of every node: a tidy layout of the parent forest.

    Drafts (and nodes whose parent is not in the journal) are roots, in step order; children
    are ordered by step; a leaf takes the next column and a parent sits centred over its
    children; the row is the depth (number of parent links to the root).
    """
    nodes = journal.nodes
    ids = {n.id for n in nodes}
    children: dict[str, list[Node]] = {n.id: [] for n in nodes}
    roots: list[Node] = []
    for n in nodes:  # step order, so children lists are step-ordered too
        if n.parent_id in ids and n.parent_id != n.id:
            children[n.parent_id].append(n)
        else:
            roots.append(n)
    column: dict[str, float] = {}
    depth: dict[str, int] = {}
    next_col = 0
    for root in roots:  # iterative post-order: long mutate chains must not hit the recursion limit
        stack: list[tuple[Node, int, bool]] = [(root, 0, False)]
        while stack:
            node, d, expanded = stack.pop()
            if node.id in depth and not expanded:
                continue  # a parent cycle in a corrupt journal: draw each node once
            kids = [k for k in children[node.id] if k.id not in depth]
            if not expanded:
                depth[node.id] = d
                if kids:
                    stack.append((node, d, True))
                    stack.extend((k, d + 1, False) for k in reversed(kids))
                    continue
            placed = [column[k.id] for k in children[node.id] if k.id in column and depth.get(k.id) == d + 1]
            if placed:
                column[node.id] = (min(placed) + max(placed)) / 2
            else:
                column[node.id] = next_col
                next_col += 1
    return {nid: (MARGIN + column[nid] * DX, MARGIN + depth[nid] * DY) for nid in column}


def _node_shape(op: str, x: float, y: float, fill: str, stroke: str, width: float) -> str:
    """The SVG element of a node of operation ``op``: its ``report.shape`` (:mod:`swarm_evo.operators`)."""
    common = f'fill="{fill}" stroke="{stroke}" stroke-width="{width}"'
    r = RADIUS
    shape = registry.report_style(op).shape
    if shape == "diamond":
        pts = f"{x:.1f},{y - r - 2:.1f} {x + r + 2:.1f},{y:.1f} {x:.1f},{y + r + 2:.1f} {x - r - 2:.1f},{y:.1f}"
        return f'<polygon points="{pts}" {common}/>'
    if shape == "triangle":
        pts = f"{x:.1f},{y - r - 3:.1f} {x + r + 2:.1f},{y + r - 1:.1f} {x - r - 2:.1f},{y + r - 1:.1f}"
        return f'<polygon points="{pts}" {common}/>'
    if shape == "square":
        return f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r}" height="{2 * r}" rx="4" {common}/>'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" {common}/>'


def _tooltip(node: Node, status: str, name: str) -> str:
    lines = [
        f"step {node.step} · {node.operation} · phase {node.phase} · {status}",
        score_text(node, name) + (f" · {node.exc_type}" if node.exc_type else ""),
        f"id {node.id}",
    ]
    if node.debug_attempts:
        lines.append(f"debug attempts {node.debug_attempts}")
    if node.approach_tag:
        lines.append(node.approach_tag[:160])
    return "\n".join(lines)


def evolution_tree_svg(journal: Journal, *, standalone: bool = True) -> str:
    """The evolution tree as SVG: status-coloured nodes (shape by operation, step inside, the
    score the run selects on below, :func:`swarm_evo.population.ranking.score`; a ``<title>``
    tooltip naming it, with the printed metric beside a hidden-split score), solid parent edges
    and dashed merge edges labelled by locus.

    A merge's parent is one of its gene sources: its loci are the tooltip of the solid parent
    edge, and every other source gets a dashed curve labelled with the loci taken from it.

    ``standalone`` adds the SVG namespace (needed for a file or a data URI; inline SVG in HTML
    does not need it).
    """
    nodes = journal.nodes
    pos = tree_layout(journal)
    best = journal.best_node()
    name = score_name(journal)
    width = max((x for x, _ in pos.values()), default=0) + MARGIN + DX
    height = max((y for _, y in pos.values()), default=0) + MARGIN + 30
    ns = ' xmlns="http://www.w3.org/2000/svg"' if standalone else ""
    out = [
        f'<svg{ns} class="tree" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif" font-size="11">',
        '<rect width="100%" height="100%" fill="#ffffff"/>',
    ]
    edges, merges, shapes = [], [], []
    for n in nodes:
        if n.id not in pos:
            continue
        x, y = pos[n.id]
        by_source: dict[str, list[str]] = {}
        for locus, source in n.gene_sources.items():
            by_source.setdefault(source, []).append(str(locus))
        if n.parent_id in pos:
            px, py = pos[n.parent_id]
            inherited = by_source.get(n.parent_id)
            note = f"<title>genes {html.escape(', '.join(inherited))} from the parent</title>" if inherited else ""
            edges.append(
                f'<g class="edge parent" data-source="{n.parent_id}" data-target="{n.id}">'
                f'<line x1="{px:.1f}" y1="{py + RADIUS:.1f}" x2="{x:.1f}" y2="{y - RADIUS:.1f}" '
                f'stroke="#90a4ae" stroke-width="1.6"/>{note}</g>'
            )
        # the parent's genes travel along the solid edge; every other source gets a dashed curve
        others = [(source, loci) for source, loci in by_source.items() if source != n.parent_id and source in pos]
        for k, (source, loci) in enumerate(others):
            sx, sy = pos[source]
            # a quadratic curve bowed sideways so it never hides a straight parent edge
            mx, my = (sx + x) / 2, (sy + y) / 2
            dx, dy = x - sx, y - sy
            length = math.hypot(dx, dy) or 1.0
            bend = 24 + 8 * k
            cx, cy = mx - dy / length * bend, my + dx / length * bend
            t = 0.7  # the label sits on the curve, nearer the merge node it feeds
            lx = (1 - t) ** 2 * sx + 2 * t * (1 - t) * cx + t * t * x
            ly = (1 - t) ** 2 * sy + 2 * t * (1 - t) * cy + t * t * y
            label = html.escape(",".join(loci))
            merges.append(
                f'<g class="edge merge" data-source="{source}" data-target="{n.id}">'
                f'<path d="M{sx:.1f},{sy:.1f} Q{cx:.1f},{cy:.1f} {x:.1f},{y:.1f}" fill="none" '
                f'stroke="#8e24aa" stroke-width="1.3" stroke-dasharray="5,4" opacity="0.6"/>'
                f'<text x="{lx:.1f}" y="{ly:.1f}" fill="#6a1b9a" font-size="9" text-anchor="middle" '
                f'stroke="#ffffff" stroke-width="3" paint-order="stroke">{label}</text>'
                f'<title>genes {html.escape(", ".join(loci))} of step {journal.get(source).step} '
                f'into step {n.step}</title></g>'
            )
        status = node_status(n, best)
        stroke, sw = ("#212121", 3.0) if status == "best" else ("#37474f", 1.0)
        shapes.append(
            f'<g class="node {status}" data-id="{n.id}" data-step="{n.step}">'
            f"<title>{html.escape(_tooltip(n, status, name))}</title>"
            + _node_shape(n.operation, x, y, STATUS_COLOURS[status], stroke, sw)
            + f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle" font-weight="bold" '
            f'fill="{"#212121" if status in ("best", "valid") else "#ffffff"}">{n.step}</text>'
            f'<text x="{x:.1f}" y="{y + RADIUS + 14:.1f}" text-anchor="middle" fill="#37474f" '
            f'stroke="#ffffff" stroke-width="3" paint-order="stroke">'
            f"{html.escape(fmt_metric(shown_score(n, name)))}</text></g>"
        )
    if not nodes:
        out.append(f'<text x="{MARGIN}" y="{MARGIN}">no nodes yet</text>')
    out += edges + merges + shapes + ["</svg>"]
    return "\n".join(out)


def _node_record(journal: Journal, node: Node, best: Node | None, name: str) -> dict[str, Any]:
    """The details panel's record of ``node``: ``score`` is what the run ranks it by (named by
    ``score_name``), ``metric`` the printed validation metric, ``hidden_score`` the host's grade
    of the hidden split (None without one)."""
    return {
        "id": node.id,
        "step": node.step,
        "operation": node.operation,
        "phase": node.phase,
        "status": node_status(node, best),
        "score_name": name,
        "score": shown_score(node, name),
        "metric": node.metric_value,
        "hidden_score": node.hidden_score,
        "parent": node.parent_id,
        "gene_sources": node.gene_sources,
        "target_locus": node.metadata.get("target_locus"),
        "debug_attempts": node.debug_attempts,
        "exc_type": node.exc_type,
        "approach": node.approach_tag,
        "agent": node.agent_id,
    }


_CSS = """
body { font-family: sans-serif; margin: 0; color: #212121; }
header { padding: 10px 16px; border-bottom: 1px solid #ddd; }
h1 { font-size: 18px; margin: 0 0 4px 0; }
.legend span { display: inline-block; margin-right: 14px; font-size: 13px; }
.sw { display: inline-block; width: 12px; height: 12px; border: 1px solid #37474f;
      vertical-align: middle; margin-right: 4px; border-radius: 6px; }
#canvas { overflow: auto; border-bottom: 1px solid #ddd; max-height: 75vh; }
#canvas.fit svg { width: 100%; height: auto; }
.node { cursor: pointer; }
svg.focus .edge, svg.focus .node { opacity: 0.15; }
svg.focus .edge.on, svg.focus .node.on { opacity: 1; }
.node.selected circle, .node.selected rect, .node.selected polygon { stroke: #1565c0; stroke-width: 4; }
#details { padding: 8px 16px; font-size: 13px; white-space: pre-wrap; font-family: monospace; }
table { border-collapse: collapse; margin: 8px 16px 24px 16px; font-size: 12px; }
td, th { border: 1px solid #ddd; padding: 2px 6px; text-align: left; }
tr.best td { background: #fff8e1; }
"""

_JS = """
(function () {
  var data = JSON.parse(document.getElementById('nodes-data').textContent);
  var byId = {};
  data.forEach(function (n) { byId[n.id] = n; });
  var details = document.getElementById('details');
  function show(id) {
    var n = byId[id];
    if (!n) { return; }
    document.querySelectorAll('.node.selected').forEach(function (g) { g.classList.remove('selected'); });
    var g = document.querySelector('.node[data-id="' + id + '"]');
    if (g) { g.classList.add('selected'); }
    details.textContent = JSON.stringify(n, null, 2);
  }
  var svg = document.querySelector('svg.tree');
  function focus(id) {
    svg.classList.add('focus');
    svg.querySelectorAll('.edge').forEach(function (e) {
      var hit = e.getAttribute('data-source') === id || e.getAttribute('data-target') === id;
      e.classList.toggle('on', hit);
      if (hit) {
        svg.querySelector('.node[data-id="' + e.getAttribute('data-source') + '"]').classList.add('on');
        svg.querySelector('.node[data-id="' + e.getAttribute('data-target') + '"]').classList.add('on');
      }
    });
    svg.querySelector('.node[data-id="' + id + '"]').classList.add('on');
  }
  function unfocus() {
    svg.classList.remove('focus');
    svg.querySelectorAll('.on').forEach(function (e) { e.classList.remove('on'); });
  }
  document.querySelectorAll('.node').forEach(function (g) {
    g.addEventListener('click', function () { show(g.getAttribute('data-id')); });
    g.addEventListener('mouseenter', function () { focus(g.getAttribute('data-id')); });
    g.addEventListener('mouseleave', unfocus);
  });
  document.querySelectorAll('tr[data-id]').forEach(function (tr) {
    tr.addEventListener('click', function () { show(tr.getAttribute('data-id')); });
  });
  document.getElementById('fit').addEventListener('change', function (e) {
    document.getElementById('canvas').classList.toggle('fit', e.target.checked);
  });
})();
"""


def evolution_tree_html(journal: Journal, path: Path) -> Path:
    """Write the evolution tree as one self-contained HTML file; return ``path``.

    Inline CSS, JS and SVG only (no external URL: it opens offline, from a file). Hovering a
    node shows step, operation, phase, status and the score the run selects on (named; the
    printed metric beside a hidden-split score); clicking it (or its table row) shows the full
    record. A table of all nodes follows the drawing.
    """
    path = Path(path)
    nodes = journal.nodes
    best = journal.best_node()
    name = score_name(journal)
    hidden = name == HIDDEN_NAME
    records = [_node_record(journal, n, best, name) for n in nodes]
    counts = {s: sum(1 for r in records if r["status"] == s) for s in STATUS_COLOURS}
    merges = sum(1 for n in nodes if n.gene_sources)
    lower = lower_is_better(journal)
    title = html.escape(run_title(journal))
    legend = "".join(
        f'<span><i class="sw" style="background:{colour}"></i>{status} ({counts[status]})</span>'
        for status, colour in STATUS_COLOURS.items()
    )
    legend += (
        f"<span>{' '.join(f'{op.report.symbol} {op.name}' for op in registry.operators())}</span>"
        '<span><svg width="30" height="8"><line x1="0" y1="4" x2="30" y2="4" stroke="#90a4ae" '
        'stroke-width="2"/></svg> parent</span>'
        '<span><svg width="30" height="8"><line x1="0" y1="4" x2="30" y2="4" stroke="#8e24aa" '
        'stroke-width="2" stroke-dasharray="5,4"/></svg> genes a merge takes from a node other than its parent (labelled by locus)</span>'
    )
    rows = "".join(
        f'<tr data-id="{r["id"]}" class="{r["status"]}"><td>{r["step"]}</td><td>{r["id"][:8]}</td>'
        f'<td>{r["operation"]}</td><td>{r["phase"]}</td><td>{r["status"]}</td><td>{fmt_metric(r["score"])}</td>'
        + (f'<td>{fmt_metric(r["metric"])}</td>' if hidden else "") +
        f'<td>{(r["parent"] or "")[:8]}</td><td>{r["debug_attempts"]}</td>'
        f'<td>{html.escape((r["approach"] or "")[:100])}</td></tr>'
        for r in records
    )
    best_line = f"best: step {best.step} ({best.operation}), {score_text(best, name)}" if best else "no valid node"
    # no "<" inside the script element: no node text can open or close a tag (still valid JSON)
    payload = json.dumps(records, default=str).replace("<", "\\u003c")
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Evolution tree: {title}</title>
<style>{_CSS}</style>
</head>
<body>
<header>
<h1>Evolution tree: {title}</h1>
<div>{len(nodes)} node{"" if len(nodes) == 1 else "s"}, {merges} merge{"" if merges == 1 else "s"}; {html.escape(best_line)};
nodes are ranked by their {name}, {"lower" if lower else "higher"} is better{" (the printed validation metric is shown beside it)" if hidden else ""}.
Hover a node for its step, operation and {name} (its edges are highlighted); click it for details. <label><input type="checkbox" id="fit"> fit to width</label></div>
<div class="legend">{legend}</div>
</header>
<div id="canvas">
{evolution_tree_svg(journal, standalone=False)}
</div>
<div id="details">Click a node for its details.</div>
<table>
<tr><th>step</th><th>node</th><th>operation</th><th>phase</th><th>status</th><th>{name}</th>{"<th>printed metric</th>" if hidden else ""}
<th>parent</th><th>debug</th><th>approach</th></tr>
{rows}
</table>
<script type="application/json" id="nodes-data">{payload}</script>
<script>{_JS}</script>
</body>
</html>
"""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, page)
    return path
