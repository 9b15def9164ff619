"""The garbage collector of long-lived processes (swarm_evo/run/heap.py, flows/_process_heap.py):
off while a command loads, then the heap frozen; a flow run freezes only in the process a worker
started for it."""

from __future__ import annotations

import gc
import os

import pytest

from swarm_evo.run import heap


@pytest.fixture()
def fresh_gc(monkeypatch):
    """Nothing frozen, the collector on; both restored after the test."""
    enabled = gc.isenabled()
    gc.unfreeze()
    gc.enable()
    monkeypatch.delenv("PREFECT__FLOW_RUN_ID", raising=False)
    yield
    gc.unfreeze()
    (gc.enable if enabled else gc.disable)()


def test_loading_turns_the_collector_off_then_freezes_what_the_block_left(fresh_gc):
    with heap.loading():
        assert not gc.isenabled()
        kept = [[i] for i in range(10_000)]  # what an import leaves: it lives on
    assert gc.isenabled() and gc.get_freeze_count() >= len(kept)


def test_loading_settles_when_the_block_raises_and_leaves_an_off_collector_off(fresh_gc):
    with pytest.raises(ValueError), heap.loading():
        raise ValueError("bad input")
    assert gc.isenabled() and gc.get_freeze_count() > 0
    gc.disable()
    with heap.loading():
        pass
    assert not gc.isenabled()


def test_a_flow_run_settles_only_in_the_process_started_for_it(prefect_server, fresh_gc):
    from prefect import flow
    from prefect.context import FlowRunContext

    from flows._process_heap import heap_settled

    @flow
    @heap_settled
    def run() -> int:
        return gc.get_freeze_count()

    @flow
    def started_by_a_worker() -> tuple[int, int]:
        # what a process worker does: the flow run's id in the environment of the process it starts
        os.environ["PREFECT__FLOW_RUN_ID"] = str(FlowRunContext.get().flow_run.id)
        subflow = run()  # a subflow is not the process's own flow run
        settled = heap_settled(lambda: gc.get_freeze_count())()
        return subflow, settled

    assert run() == 0, "a flow called in a process that does other work (a test, a sweep) leaves its heap alone"
    os.environ["PREFECT__FLOW_RUN_ID"] = "00000000-0000-0000-0000-000000000000"
    assert run() == 0, "a process started for another flow run"
    subflow, settled = started_by_a_worker()
    assert subflow == 0 and settled > 10_000, (subflow, settled)  # Prefect's and the project's modules
