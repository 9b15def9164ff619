"""The live view of a run for people (issue 54, item 5): one Markdown page with the best node so far,
its lineage, the best-so-far chart and the evolution tree, replaced while the run goes
(``tasks/artifacts.py`` publishes it as the ``<run>-lineage`` artifact), and the rule that bounds
how often the live views are replaced.

No Prefect here: the caller passes the images as ``data:`` URIs and the links as UI addresses.
"""

from __future__ import annotations

from swarm_evo.population.journal import Journal
from swarm_evo.population.node import Node
from swarm_evo.reporting.charts import lower_is_better, run_title
from swarm_evo.reporting.fitness_report import score_name, score_text

GROWTH = 0.05
"""A live view is replaced only once the journal grew by this share (at least one node) since its
last version: with the least interval between versions, a run of N nodes publishes each live view
about 20 + 20·ln(N/20) times, not N times (Prefect keeps every version of a keyed artifact)."""


def live_due(nodes_now: int, nodes_published: int, seconds_since: float, interval: float) -> bool:
    """Whether the live views are due: at least ``interval`` seconds since the last version and
    the journal grew by :data:`GROWTH` of its size (at least one node) since then."""
    grown = nodes_now - nodes_published
    return seconds_since >= interval and grown >= max(1, int(GROWTH * nodes_published))


def best_lineage(journal: Journal, node: Node | None) -> list[Node]:
    """``node`` and its ancestors by ``parent_id``, root first (a parent missing from the journal
    or a cycle ends the walk)."""
    out: list[Node] = []
    seen: set[str] = set()
    while node is not None and node.id not in seen:
        seen.add(node.id)
        out.append(node)
        try:
            node = journal.get(node.parent_id) if node.parent_id else None
        except KeyError:
            node = None
    return out[::-1]


def _link(text: str, url: str | None) -> str:
    return f"[{text}]({url})" if url else text


def live_markdown(
    journal: Journal,
    max_steps: int,
    *,
    pages: dict[str, str] | None = None,
    chart: str | None = None,
    tree: str | None = None,
    tree_note: str | None = None,
    links: dict[str, str] | None = None,
    final: bool = False,
    when: str = "",
) -> str:
    """The live page: nodes of the budget by status, the best node so far (the score the run selects
    on, named; linked to its page), its lineage (each step linked to its page), links to the other
    live views, the best-so-far chart and the evolution tree.

    Args:
        journal: the run's journal (read while the run appends: a snapshot of its nodes).
        max_steps: the run's budget in nodes.
        pages: node id -> the address of the node's page (code, diff, output, error, debug chain).
        chart: the best-so-far chart as an image source (``data:image/png;base64,...``); None: none.
        tree: the evolution tree as an image source (``data:image/svg+xml;base64,...``); None: none.
        tree_note: what to say instead of a tree that is not shown (too big to inline).
        links: label -> address of the run's other views (node table, lanes), shown in one line.
        final: the run's last version (the search ended) rather than one taken while it goes.
        when: the time of this version, as text (UTC).
    """
    pages = pages or {}
    nodes = list(journal.nodes)
    best = journal.best_node()
    name = score_name(journal)
    dead = sum(1 for n in nodes if n.dead)
    buggy = sum(1 for n in nodes if n.is_buggy and not n.dead)
    valid = len(journal.valid_pool())
    state = "final: the search ended" if final else "live: replaced while the run goes"
    lines = [
        f"# {run_title(journal)}: best so far and lineage",
        "",
        f"{len(nodes)} of {max_steps} nodes: {valid} valid, {buggy} buggy, {dead} dead ({state}"
        + (f"; {when}" if when else "") + ").",
        "",
    ]
    if best is not None:
        direction = "lower" if lower_is_better(journal) else "higher"
        lines += [
            f"**Best so far:** {_link(f'step {best.step} ({best.operation}, `{best.id[:8]}`)', pages.get(best.id))}: "
            f"{score_text(best, name)}; {direction} is better. The run ranks nodes by their {name}.",
            "",
            "**Its lineage:** " + " → ".join(
                _link(f"step {n.step} {n.operation}", pages.get(n.id)) for n in best_lineage(journal, best)),
            "",
        ]
    else:
        lines += ["**No valid node yet.**", ""]
    if links:
        lines += [" · ".join(_link(label, url) for label, url in links.items()), ""]
    if chart:
        lines += [f"## Best {name} so far", "", f"![best {name} so far]({chart})", ""]
    lines += ["## Evolution tree", ""]
    if tree:
        lines += ["Colour: valid, best (ringed), buggy, dead; shape: the operation; below each node its "
                  f"{name}. Every node's page (code, diff to its parent, output, error, debug chain) is "
                  "linked from the node table.", "", f"![evolution tree]({tree})", ""]
    else:
        lines += [tree_note or "No tree yet.", ""]
    return "\n".join(lines)
