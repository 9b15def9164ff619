"""Every lane busy (issue 52, item 1): steps start as soon as a lane is free, with no epoch barrier.

The end-to-end case: a real ``swarm-evo run`` against the stand-in model whose programs sleep
heavy-tailed times (``Scenario.program_seconds``), 3 lanes, 2 steps per epoch: while a long
program runs in one lane, the other lanes go on through several steps and epochs (before
issue 52 every epoch waited for its slowest program), the journal has exactly ``max_steps``
nodes, every node records its lane, start and staleness, and a lane never runs two steps at once.
The slot timeline's arithmetic is checked on journals built in memory.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest

from factories import make_node
from llm_server import SCENARIOS, run_swarm
from swarm_evo.population.node import Node
from swarm_evo.reporting.slot_timeline import occupancy, step_spans, timeline_svg
from swarm_evo.run.lanes import CURRENT_TICKET, ExecutionLanes, StepTicket

LANES = 3
STEPS = 10


@pytest.mark.slow  # a `swarm-evo` process against the stand-in server
def test_lanes_never_wait_for_the_slowest_program_nor_for_the_model(stand_in, data_dir, tmp_path, prefect_api_url):
    """3 lanes, 2 steps per epoch, proposals written 2 ahead (``search.proposal_backlog: 2``), a
    model that answers after 0.5 s and programs that sleep heavy-tailed times (one long among
    short ones): exactly ``max_steps`` nodes; a lane runs one program at a time; steps of later
    epochs start while programs of earlier ones still run (no barrier); steps start while every
    lane runs a program (written ahead) and a freed lane finds its next program written; no
    draft starts once K = 3 nodes are valid (drafts running then still count); every proposal
    records how stale it was when its program first ran."""
    stand_in.use(SCENARIOS["tidy"].with_(program_seconds=(0.6, 1.2, 0.3, 8.0), seed=3, latency=0.5))
    result = run_swarm(tmp_path, data_dir, api_base=stand_in.api_base_for("openai/stand-in"), max_steps=STEPS,
                       parallel_workers=LANES, prefect_api_url=prefect_api_url, model_config={"fault_rate": 0.0},
                       search_config={"steps_per_epoch": 2, "phase1_target_nodes": 3, "fitness": "printed",
                                      "proposal_backlog": 2})
    assert result.returncode == 0, result.output[-3000:]
    nodes = [Node.model_validate(n) for n in result.nodes]
    assert [n.step for n in nodes] == list(range(1, STEPS + 1)), "exactly max_steps nodes"
    spans = step_spans(nodes)
    assert {s.lane for s in spans} <= set(range(LANES))
    for lane in range(LANES):  # a lane runs one program at a time
        mine = sorted((s for s in spans if s.lane == lane), key=lambda s: s.start)
        assert all(a.end <= b.start + 0.05 for a, b in zip(mine, mine[1:])), mine
    ends = {}
    for s in spans:
        ends[s.step] = max(ends.get(s.step, 0.0), s.end)
    starts = {n.step: n.metadata["schedule"]["started_s"] for n in nodes}
    later = [(a.step, b.step) for a in nodes for b in nodes if b.epoch > a.epoch and starts[b.step] < ends[a.step]]
    assert later, f"a step of a later epoch starts while an earlier one's program runs (no barrier): {spans}"
    ahead = [t for t in starts.values() if sum(1 for s in spans if s.start < t < s.end) >= LANES]
    assert ahead, f"proposals are written while every lane runs a program: {starts} {spans}"
    assert min(_hand_offs(nodes)) < 0.5, "a freed lane finds its next program written"
    for node in nodes:
        schedule = node.metadata["schedule"]
        assert schedule["nodes_at_exec"] >= schedule["nodes_at_start"] and schedule["executions"]
        before = nodes[: schedule["nodes_at_start"]]  # the journal when the step started
        if node.operation == "draft":
            assert sum(not m.is_buggy for m in before) < 3, node.step
        else:
            assert sum(not m.is_buggy for m in before) >= 1, "Phase 2 needs a valid node"


def _timed(step: int, start: float, wall: float, llm: float, at_start: int, runs=(), **kw) -> Node:
    """A node whose step started at ``start`` and took ``wall`` s; ``runs``: (lane, start, end, failed)."""
    node = make_node(**kw)
    node.step = step
    node.metadata["timings"] = {"wall": wall, "llm": llm, "exec": wall - llm}
    executions = [{"lane": lane, "wait_s": 0.5, "start_s": a, "end_s": b, "nodes_at_start": at_start + 1,
                   "failed": failed} for lane, a, b, failed in runs]
    node.metadata["schedule"] = {"started_s": start, "nodes_at_start": at_start, "executions": executions,
                                 **({"nodes_at_exec": at_start + 1} if runs else {})}
    return node


def test_occupancy_counts_the_lanes_programs_and_the_proposals_staleness():
    nodes = [_timed(1, 0.0, 10.0, 2.0, 0, [(0, 2.0, 10.0, False)]),
             _timed(2, 0.0, 4.0, 1.0, 0, [(1, 1.0, 2.0, True), (1, 3.0, 4.0, False)]),
             _timed(3, 4.0, 6.0, 1.0, 1, [(1, 5.0, 10.0, False)], is_buggy=True),
             _timed(4, 10.0, 2.0, 0.5, 3, [(0, 10.5, 12.0, False)], dead=True)]
    spans = step_spans(nodes)
    assert [(s.step, s.lane, s.outcome) for s in spans] == [
        (1, 0, "valid"), (2, 1, "buggy"), (2, 1, "valid"), (3, 1, "buggy"), (4, 0, "dead")]
    stats = occupancy(spans, lanes=2)
    assert stats["wall_s"] == 11.0 and stats["busy_s"] == 16.5
    assert stats["occupancy"] == round(16.5 / 22.0, 4) and stats["mean_wait_s"] == 0.5
    assert [s.staleness for s in spans] == [1, 1, None, 1, 1] and stats["max_staleness"] == 1
    assert stats["model_share"] == 0.0, "a program never waits for the model in its lane"
    steps = occupancy(step_spans(nodes, per="step"), lanes=2)
    assert steps["busy_s"] == 22.0 and steps["model_share"] == round(4.5 / 22.0, 4)
    svg = timeline_svg(spans, lanes=2)
    assert svg.count("<rect") == 10 and "occupancy 75.0 %" in svg and "lane 1" in svg


def test_journals_before_issue_52_give_step_spans_from_their_append_times():
    t0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
    nodes = []
    for step, (end, wall) in enumerate([(5.0, 5.0), (6.0, 6.0), (12.0, 6.0)], start=1):
        node = make_node()
        node.step = step
        node.metadata["timings"] = {"wall": wall, "llm": 0.0}
        node.created_at = (t0 + timedelta(seconds=end)).isoformat()
        nodes.append(node)
    assert step_spans(nodes) == [], "no lanes recorded: no execution spans"
    spans = step_spans(nodes, per="step")
    assert [(s.start, s.end, s.lane) for s in spans] == [(0.0, 5.0, None), (0.0, 6.0, None), (6.0, 12.0, None)]
    assert occupancy(spans, lanes=2)["occupancy"] == round(17.0 / 24.0, 4)


def _hand_offs(nodes: list[Node]) -> list[float]:
    """Per lane, the gaps between one program's end and the next one's start (seconds)."""
    spans = step_spans(nodes)
    gaps = []
    for lane in {s.lane for s in spans}:
        mine = sorted((s for s in spans if s.lane == lane), key=lambda s: s.start)
        gaps += [b.start - a.end for a, b in zip(mine, mine[1:])]
    return gaps


def test_a_lane_is_held_only_while_a_program_runs():
    clock = iter(range(100))
    lanes = ExecutionLanes(2, elapsed=lambda: float(next(clock)), journal_length=lambda: 7)
    ticket = StepTicket()
    token = CURRENT_TICKET.set(ticket)
    try:
        with lanes.hold() as a, lanes.hold() as b:
            assert (a.lane, b.lane, lanes.free) == (0, 1, 0) and ticket.executing
            waited = []
            thread = threading.Thread(target=lambda: waited.append(lanes.hold().__enter__().lane))
            thread.start()
            thread.join(0.2)
            assert thread.is_alive() and lanes.waiting == 1, "a third program waits for a lane"
        thread.join(5)
        assert waited == [0] and a.nodes_at_start == 7 and a.end_s > a.start_s
    finally:
        CURRENT_TICKET.reset(token)
