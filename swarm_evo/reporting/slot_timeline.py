"""The slot timeline of a run (issue 52, items 2 and 6): which lane ran each program, when, how busy the lanes were.

Each execution holds one of the run's lanes only while its program runs
(:mod:`swarm_evo.run.lanes`) and the node records it: ``metadata.schedule`` has the step's
``started_s`` and ``nodes_at_start`` (when its proposal began, the journal's length then) and
``executions`` (per attempt that ran: ``lane``, ``wait_s`` for a free lane, ``start_s``,
``end_s``, ``failed``), and ``nodes_at_exec`` (the journal's length at its first execution:
the proposal's staleness is ``nodes_at_exec - nodes_at_start``). From those:

* :func:`step_spans` — one :class:`Span` per execution: lane, start, end, outcome, the wait for
  a lane and (on a step's first execution) the proposal's staleness; with ``per="step"`` one
  span per step from its start to its append (model time included), which journals from
  before the lanes (epoch barrier, issue 52 item 1) also give: a node's end is its
  ``created_at`` and its start that minus its wall time;
* :func:`occupancy` — busy lane-seconds / (lanes × wall): the share of the run's slot time that
  ran programs (ShinkaEvolve and AIRA₂ report the same quantity for their evaluation pools), the
  model's share of the busy time (step spans), the mean wait for a lane and the staleness;
* :func:`timeline_svg` — one row per lane: a bar per execution in its outcome's colour; gaps are
  lanes idle (waiting for a proposal: the model, or nothing left to run).
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
        step: the node's journal step; lane: the lane (None for a step span from before issue 52).
        start, end: when the program (or, for a step span, the step) started and ended.
        model_s: seconds spent in model calls (``timings.llm``; step spans only, else 0).
        outcome: ``valid``, ``buggy`` (a failed attempt, or a buggy node's last) or ``dead``.
        staleness: on a step's first execution, nodes appended between its proposal's start and
            that execution; on a step span, between its start and its append (None when unknown).
        wait_s: seconds the execution waited for a free lane.
    """

    step: int
    lane: int | None
    start: float
    end: float
    model_s: float
    outcome: str
    staleness: int | None
    wait_s: float = 0.0


def _outcome(node: Node) -> str:
    return "dead" if node.dead else ("buggy" if node.is_buggy else "valid")


def _execution_spans(node: Node, schedule: dict) -> list[Span]:
    runs = schedule["executions"]
    out = []
    for k, run in enumerate(runs):
        last = k == len(runs) - 1
        outcome = _outcome(node) if last else ("buggy" if run.get("failed") else "valid")
        stale = None
        if k == 0 and schedule.get("nodes_at_start") is not None:
            stale = max(0, int(schedule.get("nodes_at_exec", run.get("nodes_at_start", 0))) - int(schedule["nodes_at_start"]))
        out.append(Span(node.step or 0, run.get("lane"), float(run["start_s"]), float(run["end_s"]), 0.0, outcome,
                        stale, float(run.get("wait_s") or 0.0)))
    return out


def step_spans(nodes: Iterable[Node], per: str = "execution") -> list[Span]:
    """:class:`Span` of every execution (``per="execution"``: nodes whose ``schedule`` records
    their executions) or of every step (``per="step"``: from the step's start to its append, for
    every node with timings), in step order (see the module docstring)."""
    out: list[Span] = []
    derived: list[tuple[Node, float, float]] = []
    for node in nodes:
        schedule = node.metadata.get("schedule") or {}
        if per == "execution":
            if schedule.get("executions"):
                out.extend(_execution_spans(node, schedule))
            continue
        timings = node.metadata.get("timings") or {}
        wall = float(timings.get("wall") or 0.0)
        model = min(wall, float(timings.get("llm") or 0.0))
        if schedule.get("started_s") is not None:
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
    return sorted(out, key=lambda s: (s.step, s.start))


def occupancy(spans: list[Span], lanes: int) -> dict:
    """``{"lanes", "wall_s", "busy_s", "occupancy", "model_share", "mean_wait_s", "mean_staleness",
    "max_staleness"}``.

    ``wall_s``: from the first span's start to the last span's end; ``occupancy`` =
    ``busy_s / (lanes · wall_s)`` in [0, 1] (None without spans); ``model_share``: the model's
    seconds over ``busy_s`` (step spans; 0 for executions, which never wait for the model);
    ``mean_wait_s``: the mean wait for a free lane. Staleness over the spans that know it
    (None when none does).
    """
    if not spans or lanes <= 0:
        return {"lanes": lanes, "wall_s": 0.0, "busy_s": 0.0, "occupancy": None, "model_share": None,
                "mean_wait_s": None, "mean_staleness": None, "max_staleness": None}
    wall = max(s.end for s in spans) - min(s.start for s in spans)
    busy = sum(s.end - s.start for s in spans)
    stale = [s.staleness for s in spans if s.staleness is not None]
    return {
        "lanes": lanes,
        "wall_s": round(wall, 3),
        "busy_s": round(busy, 3),
        "occupancy": round(busy / (lanes * wall), 4) if wall > 0 else None,
        "model_share": round(sum(s.model_s for s in spans) / busy, 4) if busy > 0 else None,
        "mean_wait_s": round(sum(s.wait_s for s in spans) / len(spans), 3),
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
    caption = (f"{len(spans)} runs on {lanes} lane(s) over {stats['wall_s']:.0f} s: occupancy "
               f"{(stats['occupancy'] or 0) * 100:.1f} %, mean wait for a lane {stats['mean_wait_s'] or 0:.1f} s")
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
        title = (f"step {s.step}: {s.outcome}, {s.end - s.start:.1f} s"
                 + (f" ({s.model_s:.1f} s model)" if s.model_s else "") + (f", waited {s.wait_s:.1f} s" if s.wait_s else "")
                 + (f", proposal {s.staleness} node(s) stale" if s.staleness is not None else ""))
        parts.append(f'<g><title>{escape(title)}</title>'
                     f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 8}" fill="{OUTCOME_COLOURS[s.outcome]}"/>'
                     f'<rect x="{x:.1f}" y="{y}" width="{max(0.0, s.model_s * scale):.1f}" height="{row - 8}" '
                     f'fill="{MODEL_COLOUR}"/></g>')
    axis_y = top + rows * row + 14
    parts.append(f'<text x="{left}" y="{axis_y}">0 s</text><text x="{width - 60}" y="{axis_y}">{t1 - t0:.0f} s</text>')
    parts.append(f'<text x="{left + 80}" y="{axis_y}">green valid, orange failed or buggy, red dead; grey: model '
                 '(step spans); gaps: idle</text></svg>')
    return "".join(parts)


TIMELINE_FILE = "slot_timeline.svg"
"""``RUN_DIR/slot_timeline.svg``: :func:`timeline_svg` of the run, written with the final report."""


def lanes_report(nodes: Iterable[Node]) -> dict | None:
    """The run's lanes as the reports show them: :func:`occupancy` over the executions the nodes
    recorded (``lanes`` = the highest lane + 1), plus ``runs_per_lane``; None when no node did
    (a journal from before issue 52)."""
    spans = [s for s in step_spans(nodes) if s.lane is not None]
    if not spans:
        return None
    lanes = 1 + max(s.lane for s in spans)  # type: ignore[type-var]
    per_lane = {lane: sum(1 for s in spans if s.lane == lane) for lane in range(lanes)}
    return {**occupancy(spans, lanes), "runs_per_lane": per_lane}


def lanes_lines(report: dict | None, image: str | None = None) -> list[str]:
    """The final report's ``## Lanes`` section (Markdown lines) for :func:`lanes_report`; ``image``
    the timeline's source (a ``data:`` URI or a file name), None for no picture; [] without lanes."""
    if not report:
        return []
    share = lambda v: "n/a" if v is None else f"{v * 100:.1f} %"  # noqa: E731
    lines = ["", "## Lanes", "",
             "A program holds a lane only while it runs; proposals are written ahead (issue 52). "
             "Occupancy = busy lane-seconds / (lanes × wall); staleness = nodes appended between a proposal's "
             "start and its execution.", "",
             "| lanes | wall (s) | busy (s) | occupancy | mean wait for a lane (s) | staleness (mean / max) |",
             "|---|---|---|---|---|---|",
             f"| {report['lanes']} | {report['wall_s']} | {report['busy_s']} | {share(report['occupancy'])} | "
             f"{report['mean_wait_s']} | {report['mean_staleness']} / {report['max_staleness']} |"]
    if image:
        lines += ["", f"![slot timeline]({image})"]
    return lines
