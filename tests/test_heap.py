"""The garbage collector of long-lived processes (swarm_evo/run/heap.py, flows/_process_heap.py):
off while a command loads, then the heap frozen; a flow run freezes only in the process a worker
started for it. (The suite's own processes freeze their heap after collection, tests/conftest.py:
the counts here are what is added to it.)"""

from __future__ import annotations

import gc
import os

import pytest

from swarm_evo.run import heap


@pytest.fixture()
def collector(monkeypatch):
    """The collector on for the test and as it was after; no flow-run id in the environment."""
    enabled = gc.isenabled()
    gc.enable()
    monkeypatch.delenv("PREFECT__FLOW_RUN_ID", raising=False)
    yield
    (gc.enable if enabled else gc.disable)()


def test_loading_turns_the_collector_off_then_freezes_what_the_block_left(collector):
    before = gc.get_freeze_count()
    with heap.loading():
        assert not gc.isenabled()
        kept = [[i] for i in range(10_000)]  # what an import leaves: it lives on
    assert gc.isenabled() and gc.get_freeze_count() >= before + len(kept)


def test_loading_settles_when_the_block_raises_and_leaves_an_off_collector_off(collector):
    before = gc.get_freeze_count()
    with pytest.raises(ValueError), heap.loading():
        kept = [[i] for i in range(1000)]
        raise ValueError("bad input")
    assert gc.isenabled() and gc.get_freeze_count() >= before + len(kept)
    gc.disable()
    with heap.loading():
        pass
    assert not gc.isenabled()


MADE, MARGIN = 50_000, 5_000


def test_a_flow_run_settles_only_in_the_process_started_for_it(prefect_server, collector):
    from prefect import flow
    from prefect.context import FlowRunContext

    from flows._process_heap import heap_settled

    @flow
    @heap_settled
    def run() -> int:
        return gc.get_freeze_count()

    @flow
    def started_by_a_worker() -> tuple[int, int, int]:
        # what a process worker does: the flow run's id in the environment of the process it starts
        os.environ["PREFECT__FLOW_RUN_ID"] = str(FlowRunContext.get().flow_run.id)
        before = gc.get_freeze_count()
        subflow = run()  # a subflow is not the process's own flow run
        return before, subflow, heap_settled(gc.get_freeze_count)() - len(pending)

    # A settle freezes every live object made since the last one: at least the MADE of `pending`.
    # The permanent generation's count also moves on its own (frozen objects freed, a frozen
    # container untracked and tracked again): by hundreds over a long-lived test worker, so the
    # margin is a tenth of MADE.
    pending = [[i] for i in range(MADE)]  # alive until the end: what a settle would freeze
    before = gc.get_freeze_count()
    assert abs(run() - before) < MARGIN, "a flow called in a process that does other work (a test) leaves its heap alone"
    os.environ["PREFECT__FLOW_RUN_ID"] = "00000000-0000-0000-0000-000000000000"
    assert abs(run() - before) < MARGIN, "a process started for another flow run"
    before, subflow, settled = started_by_a_worker()
    assert abs(subflow - before) < MARGIN and settled > before - MARGIN, (before, subflow, settled)  # pending frozen
