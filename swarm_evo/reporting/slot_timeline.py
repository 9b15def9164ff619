"""The slot timeline of a run (issue 52, item 6): which lane ran each step, when, and how busy the lanes were.

Every step records where and when it ran (``node.metadata.schedule``: ``lane``, ``started_s``,
the run's elapsed seconds at its start, and ``nodes_at_start``, the journal's length then;
``flows/_step.py``) and how its time split (``metadata.timings``: ``wall``, ``llm``, ``exec``).
From those:

* :func:`step_spans` — one :class:`Span` per node: lane, start, end, the model's seconds in it,
  the outcome (valid, buggy, dead) and its staleness (nodes appended while it ran);
* :func:`occupancy` — busy lane-seconds / (lanes × wall): the share of the run's slot time that
  ran steps (ShinkaEvolve and AIRA₂ report the same quantity for their evaluation pools), the
  model's share of the busy time, and the staleness;
* :func:`timeline_svg` — one row per lane: a bar per step in its outcome's colour, its model
  time (the step's first part: the program is written before it runs) drawn lighter, gaps idle.

Journals written before issue 52 have no ``schedule``: a node's end is its ``created_at`` and its
start that minus its wall time (:func:`step_spans` with ``lanes`` None), enough for the
occupancy of the epoch-barrier scheduler (``benchmarks/steady_state.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Iterable

from swarm_evo.population.node import Node

OUTCOME_COLOURS = {"valid": "#2e7d32", "buggy": "#ef6c00", "dead": "#c62828"}
MODEL_COLOUR = "#90a4ae"


@dataclass(frozen=True)
class Span:
    """One step on the timeline. Times are seconds of the run (``started_s`` scale).

    Attributes:
        step: the node's journal step; lane: the scheduler's lane (None before issue 52).
        start, end: when the step started and appended its node.
        model_s: seconds spent in model calls (``timings.llm``), at most ``end - start``.
        outcome: ``valid`` (not buggy), ``buggy`` or ``dead``.
        staleness: nodes appended between the step's start and its own append (None when unknown).
    """

    step: int
    lane: int | None
    start: float
    end: float
    model_s: float
    outcome: str
    staleness: int | None


def _outcome(node: Node) -> str:
    return "dead" if node.dead else ("buggy" if node.is_buggy else "valid")


def step_spans(nodes: Iterable[Node]) -> list[Span]:
    """:class:`Span` of every node with its timings, in step order (see the module docstring)."""
    out: list[Span] = []
    derived: list[tuple[Node, float, float]] = []
    for node in nodes:
        timings = node.metadata.get("timings") or {}
        wall = float(timings.get("wall") or 0.0)
        model = min(wall, float(timings.get("llm") or 0.0))
        schedule = node.metadata.get("schedule")
        if schedule and schedule.get("started_s") is not None:
            start = float(schedule["started_s"])
            stale = None
            if node.step is not None and schedule.get("nodes_at_start") is not None:
                stale = max(0, node.step - 1 - int(schedule["nodes_at_start"]))
            out.append(Span(node.step or 0, schedule.get("lane"), start, start + wall, model, _outcome(node), stale))
        else:
            end = datetime.fromisoformat(node.created_at).timestamp()
            derived.append((node, end - wall, end))
    if derived:
        origin = min(start for _, start, _ in derived)
        for node, start, end in derived:
            timings = node.metadata.get("timings") or {}
            model = min(end - start, float(timings.get("llm") or 0.0))
            out.append(Span(node.step or 0, None, start - origin, end - origin, model, _outcome(node), None))
    return sorted(out, key=lambda s: s.step)


def occupancy(spans: list[Span], lanes: int) -> dict:
    """``{"lanes", "wall_s", "busy_s", "occupancy", "model_share", "mean_staleness", "max_staleness"}``.

    ``wall_s``: from the first step's start to the last step's end; ``occupancy`` =
    ``busy_s / (lanes · wall_s)`` in [0, 1] (None without steps); ``model_share``: the model's
    seconds over ``busy_s``. Staleness over the spans that know it (None when none does).
    """
    if not spans or lanes <= 0:
        return {"lanes": lanes, "wall_s": 0.0, "busy_s": 0.0, "occupancy": None, "model_share": None,
                "mean_staleness": None, "max_staleness": None}
    wall = max(s.end for s in spans) - min(s.start for s in spans)
    busy = sum(s.end - s.start for s in spans)
    stale = [s.staleness for s in spans if s.staleness is not None]
    return {
        "lanes": lanes,
        "wall_s": round(wall, 3),
        "busy_s": round(busy, 3),
        "occupancy": round(busy / (lanes * wall), 4) if wall > 0 else None,
        "model_share": round(sum(s.model_s for s in spans) / busy, 4) if busy > 0 else None,
        "mean_staleness": round(sum(stale) / len(stale), 3) if stale else None,
        "max_staleness": max(stale) if stale else None,
    }


def timeline_svg(spans: list[Span], lanes: int, width: int = 900, row: int = 22) -> str:
    """An SVG of the lanes (one row each; steps without a lane go on an extra row): each step a
    bar in :data:`OUTCOME_COLOURS` with its model time lighter at its start, titled with its step,
    outcome, seconds and staleness; a caption with :func:`occupancy`."""
    rows = max(lanes, 1) + (1 if any(s.lane is None for s in spans) else 0)
    left, top = 70, 24
    height = top + rows * row + 30
    t0 = min((s.start for s in spans), default=0.0)
    t1 = max((s.end for s in spans), default=1.0)
    scale = (width - left - 10) / max(t1 - t0, 1e-9)
    stats = occupancy(spans, lanes)
    caption = (f"{len(spans)} steps on {lanes} lane(s) over {stats['wall_s']:.0f} s: occupancy "
               f"{(stats['occupancy'] or 0) * 100:.1f} %, model share of busy time {(stats['model_share'] or 0) * 100:.1f} %")
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="11">', f'<text x="4" y="14">{escape(caption)}</text>']
    for r in range(rows):
        y = top + r * row
        label = f"lane {r}" if r < max(lanes, 1) else "no lane"
        parts.append(f'<text x="4" y="{y + row * 0.65:.1f}">{label}</text>')
        parts.append(f'<line x1="{left}" y1="{y + row - 2}" x2="{width - 10}" y2="{y + row - 2}" stroke="#ddd"/>')
    for s in spans:
        r = s.lane if s.lane is not None and s.lane < max(lanes, 1) else rows - 1
        y = top + r * row + 3
        x, w = left + (s.start - t0) * scale, max(1.0, (s.end - s.start) * scale)
        title = (f"step {s.step}: {s.outcome}, {s.end - s.start:.1f} s ({s.model_s:.1f} s model)"
                 + (f", {s.staleness} node(s) appended while it ran" if s.staleness is not None else ""))
        parts.append(f'<g><title>{escape(title)}</title>'
                     f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 8}" fill="{OUTCOME_COLOURS[s.outcome]}"/>'
                     f'<rect x="{x:.1f}" y="{y}" width="{max(0.0, s.model_s * scale):.1f}" height="{row - 8}" '
                     f'fill="{MODEL_COLOUR}"/></g>')
    axis_y = top + rows * row + 14
    parts.append(f'<text x="{left}" y="{axis_y}">0 s</text><text x="{width - 60}" y="{axis_y}">{t1 - t0:.0f} s</text>')
    parts.append(f'<text x="{left + 80}" y="{axis_y}">grey: writing (model); green valid, orange buggy, red dead; '
                 'gaps: idle</text></svg>')
    return "".join(parts)


TIMELINE_FILE = "slot_timeline.svg"
"""``RUN_DIR/slot_timeline.svg``: :func:`timeline_svg` of the run, written with the final report."""


def lanes_report(nodes: Iterable[Node]) -> dict | None:
    """The run's lanes as the reports show them: :func:`occupancy` over the nodes that recorded
    their lane (``lanes`` = the highest lane + 1), plus ``steps_per_lane``; None when no node did
    (a journal from before issue 52)."""
    spans = [s for s in step_spans(nodes) if s.lane is not None]
    if not spans:
        return None
    lanes = 1 + max(s.lane for s in spans)  # type: ignore[type-var]
    per_lane = {lane: sum(1 for s in spans if s.lane == lane) for lane in range(lanes)}
    return {**occupancy(spans, lanes), "steps_per_lane": per_lane}


def lanes_lines(report: dict | None, image: str | None = None) -> list[str]:
    """The final report's ``## Lanes`` section (Markdown lines) for :func:`lanes_report`; ``image``
    the timeline's source (a ``data:`` URI or a file name), None for no picture; [] without lanes."""
    if not report:
        return []
    share = lambda v: "n/a" if v is None else f"{v * 100:.1f} %"  # noqa: E731
    lines = ["", "## Lanes", "",
             "Steps start as soon as a lane is free (issue 52); occupancy = busy lane-seconds / (lanes × wall).", "",
             "| lanes | wall (s) | busy (s) | occupancy | model share of busy time | staleness (mean / max) |",
             "|---|---|---|---|---|---|",
             f"| {report['lanes']} | {report['wall_s']} | {report['busy_s']} | {share(report['occupancy'])} | "
             f"{share(report['model_share'])} | {report['mean_staleness']} / {report['max_staleness']} |"]
    if image:
        lines += ["", f"![slot timeline]({image})"]
    return lines
