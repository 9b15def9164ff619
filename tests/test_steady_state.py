"""Every lane busy (issue 52, item 1): steps start as soon as a lane is free, with no epoch barrier.

The end-to-end case: a real ``swarm-evo run`` against the stand-in model whose programs sleep
heavy-tailed times (``Scenario.program_seconds``), 3 lanes, 2 steps per epoch: while a long
program runs in one lane, the other lanes go on through several steps and epochs (before
issue 52 every epoch waited for its slowest program), the journal has exactly ``max_steps``
nodes, every node records its lane, start and staleness, and a lane never runs two steps at once.
The slot timeline's arithmetic is checked on journals built in memory.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from factories import make_node
from llm_server import SCENARIOS, run_swarm
from swarm_evo.population.node import Node
from swarm_evo.reporting.slot_timeline import occupancy, step_spans, timeline_svg

LANES = 3
STEPS = 10


@pytest.mark.slow  # a `swarm-evo` process against the stand-in server
def test_lanes_never_wait_for_the_slowest_program(stand_in, data_dir, tmp_path, prefect_api_url):
    # program k sleeps seconds[k] before it trains: one long program among short ones
    stand_in.use(SCENARIOS["tidy"].with_(program_seconds=(0.4, 1.4, 0.2, 9.0), seed=3))
    result = run_swarm(tmp_path, data_dir, api_base=stand_in.api_base_for("openai/stand-in"), max_steps=STEPS,
                       parallel_workers=LANES, prefect_api_url=prefect_api_url,
                       search_config={"steps_per_epoch": 2, "phase1_target_nodes": 3, "fitness": "printed"})
    assert result.returncode == 0, result.output[-3000:]
    nodes = [Node.model_validate(n) for n in result.nodes]
    assert [n.step for n in nodes] == list(range(1, STEPS + 1)), "exactly max_steps nodes"
    spans = step_spans(nodes)
    assert {s.lane for s in spans} == set(range(LANES))
    for lane in range(LANES):  # a lane runs one step at a time
        mine = sorted((s for s in spans if s.lane == lane), key=lambda s: s.start)
        assert all(a.end <= b.start + 0.05 for a, b in zip(mine, mine[1:])), mine
    epoch = {n.step: n.epoch for n in nodes}
    # while a step runs, another lane finishes a step of a later epoch: nobody waited for the slow one
    overtaken = [(slow, fast) for slow in spans for fast in spans
                 if fast.lane != slow.lane and slow.start < fast.start and fast.end < slow.end
                 and epoch[fast.step] > epoch[slow.step]]
    assert overtaken, f"no step of a later epoch ran while an earlier one was running (a barrier?): {spans}"
    slow, fast = overtaken[0]
    assert slow.staleness >= 1 and all(s.staleness is not None for s in spans)
    for node in nodes:  # no draft starts once K = 3 nodes are valid; drafts running then still count
        before = nodes[: node.metadata["schedule"]["nodes_at_start"]]
        if node.operation == "draft":
            assert sum(not m.is_buggy for m in before) < 3, node.step
        else:
            assert sum(not m.is_buggy for m in before) >= 1, "Phase 2 needs a valid node"


def _timed(step: int, lane: int | None, start: float, wall: float, llm: float, at_start: int, **kw) -> Node:
    node = make_node(**kw)
    node.step = step
    node.metadata["timings"] = {"wall": wall, "llm": llm, "exec": wall - llm}
    if lane is not None:
        node.metadata["schedule"] = {"lane": lane, "started_s": start, "nodes_at_start": at_start}
    return node


def test_occupancy_is_busy_lane_seconds_over_lanes_times_wall():
    nodes = [_timed(1, 0, 0.0, 10.0, 2.0, 0), _timed(2, 1, 0.0, 4.0, 1.0, 0),
             _timed(3, 1, 4.0, 6.0, 1.0, 1, is_buggy=True), _timed(4, 0, 10.0, 2.0, 0.5, 3, dead=True)]
    spans = step_spans(nodes)
    stats = occupancy(spans, lanes=2)
    assert stats["wall_s"] == 12.0 and stats["busy_s"] == 22.0
    assert stats["occupancy"] == round(22.0 / 24.0, 4) and stats["model_share"] == round(4.5 / 22.0, 4)
    assert [s.staleness for s in spans] == [0, 1, 1, 0] and stats["max_staleness"] == 1
    assert [s.outcome for s in spans] == ["valid", "valid", "buggy", "dead"]
    svg = timeline_svg(spans, lanes=2)
    assert svg.count("<rect") == 8 and "occupancy 91.7 %" in svg and "lane 1" in svg


def test_journals_before_issue_52_give_spans_from_their_append_times():
    t0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
    nodes = []
    for step, (end, wall) in enumerate([(5.0, 5.0), (6.0, 6.0), (12.0, 6.0)], start=1):
        node = _timed(step, None, 0.0, wall, 0.0, 0)
        node.created_at = (t0 + timedelta(seconds=end)).isoformat()
        nodes.append(node)
    spans = step_spans(nodes)
    assert [(s.start, s.end, s.lane) for s in spans] == [(0.0, 5.0, None), (0.0, 6.0, None), (6.0, 12.0, None)]
    assert occupancy(spans, lanes=2)["occupancy"] == round(17.0 / 24.0, 4)
