"""Heartbeats where they help (issue 16): with Prefect's flow-run heartbeats on, the top-level
``two-phase-evo`` run still sends them (a worker's zombie detection needs them) while its
subflows (the phase flows, steps and debug attempts), which live and die in its process, send
none."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import yaml
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterStartTime
from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter
from prefect.events.worker import EventsWorker
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

from swarm_evo.competition import prepare_competition


def _heartbeat_resources(expected: str, timeout: float = 30.0) -> set[str]:
    """Flow-run ids (``prefect.flow-run.<id>``) of the heartbeat events the API holds, once
    ``expected`` is among them or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        EventsWorker.drain_all(timeout=10)
        found: set[str] = set()
        with get_client(sync_client=True) as client:
            page = client.read_events(EventFilter(event=EventNameFilter(name=["prefect.flow-run.heartbeat"])),
                                      limit=50)
            while True:
                found |= {event.resource.id for event in page.events}
                if not page.next_page:
                    break
                page = client.read_events_page(page.next_page)
        if expected in found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def _flow_runs(names: set[str], since: datetime) -> dict[str, list[str]]:
    """Flow-run resource ids by flow name, of the runs started after ``since``: this test's own
    (the pytest worker's session API also holds the runs of the tests before it, and its first
    200 runs need not include this one)."""
    started_after = FlowRunFilter(start_time=FlowRunFilterStartTime(after_=since))
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=started_after, limit=200)
        flows = {f.id: f.name for f in client.read_flows(limit=200)}
    out: dict[str, list[str]] = {}
    for run in runs:
        name = flows.get(run.flow_id)
        if name in names:
            out.setdefault(name, []).append(f"prefect.flow-run.{run.id}")
    return out


def test_top_level_run_sends_heartbeats_and_its_subflows_do_not(prefect_server, tmp_path):
    from flows.two_phase_evo import two_phase_evo

    data = tmp_path / "data"
    prepare_competition("sklearn-breast-cancer", None, data)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"search": {"steps_per_epoch": 2, "phase1_target_nodes": 1,
                                                 "parallel_workers": 1, "debug_max_attempts": 1},
                                      "model": {"fault_rate": 1.0, "repair_rate": 1.0}}))
    since = datetime.now(timezone.utc)
    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: 30}):
        summary = two_phase_evo(competition_id="sklearn-breast-cancer", data_dir=str(data),
                                run_dir=str(tmp_path / "run"), max_steps=3, seed=0, config_path=str(config))
    assert summary["nodes"] == 3
    runs = _flow_runs({"two-phase-evo", "phase1-draft", "phase2-evolve", "draft-step", "phase2-step", "debug-attempt"},
                      since)
    top = runs["two-phase-evo"]
    assert len(top) == 1, top
    beats = _heartbeat_resources(expected=top[-1])
    assert set(top) & beats, "the top-level flow run sent no heartbeat"
    assert runs.get("phase1-draft") and runs.get("phase2-evolve")
    subflows = [run for name, ids in runs.items() if name != "two-phase-evo" for run in ids]
    assert runs.get("debug-attempt"), "every draft had a planted fault: debug-attempt subflows ran"
    assert not set(subflows) & beats, "phase, step or debug-attempt subflows sent heartbeats"


def test_a_tagged_run_without_fast_heartbeats_sends_its_own_and_an_untagged_one_does_not(prefect_server):
    """Issue 40 item 1: a flow run tagged ``swarm-evo`` whose engine heartbeats are off (a
    deployment's job variables overridden, a served flow) emits ``prefect.flow-run.heartbeat``
    itself, related to its tag as the automation of ``swarm-evo pool setup`` matches it, and says
    so in its log; the same flow untagged is left alone."""
    from prefect import flow, tags
    from prefect.context import FlowRunContext

    from flows._heartbeat_guard import POOL_TAG, guard_heartbeats, heartbeats_guarded

    @flow(name="guarded-probe")
    @heartbeats_guarded
    def probe() -> tuple[str, bool]:
        with guard_heartbeats() as inner:  # the decorator's guard is already beating: report whether it would
            pass
        return str(FlowRunContext.get().flow_run.id), inner

    since = datetime.now(timezone.utc)
    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        with tags(POOL_TAG):
            tagged, tagged_guarded = probe()
        untagged, untagged_guarded = probe()
    assert tagged_guarded and not untagged_guarded
    beats = _heartbeat_resources(expected=f"prefect.flow-run.{tagged}")
    assert f"prefect.flow-run.{tagged}" in beats, "the tagged run sent no heartbeat of its own"
    assert f"prefect.flow-run.{untagged}" not in beats
    with get_client(sync_client=True) as client:
        page = client.read_events(EventFilter(event=EventNameFilter(name=["prefect.flow-run.heartbeat"]),
                                              resource=EventResourceFilter(id=[f"prefect.flow-run.{tagged}"])), limit=5)
    event = page.events[0]
    assert f"prefect.tag.{POOL_TAG}" in {r.id for r in event.related}, event.related
    assert since <= event.occurred
