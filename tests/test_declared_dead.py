"""A live run is never left running under a state that says it is over (issue 53, item 11).

On the stock SQLite server a 200-step deployment run was marked Crashed by the dead-run
automation while its process lived (the server received its heartbeats late), and ran on for
hours that nobody saw. Now the run reads its own state (flows/_state_watch.py): marked Crashed,
it says so in one error line, starts no new step, lets the steps in flight end, grades nothing,
ends Failed with the resume command, and ``resume`` continues it. The verdict here is set
through the API of a real Prefect server, as the automation sets it.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import yaml
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType
from prefect.client.schemas.objects import StateType
from prefect.states import Crashed

BUDGET = 40
"""Far more steps than the run makes before it is marked Crashed and stops."""


def _nodes(run_dir: Path) -> list[dict]:
    try:
        return json.loads((run_dir / "journal.json").read_text())["nodes"]
    except (OSError, ValueError, KeyError):
        return []


def _running_flow_run(run_dir: Path, timeout: float = 120.0):
    """The Running ``two-phase-evo`` flow run whose ``run_dir`` parameter is ``run_dir``."""
    deadline = time.monotonic() + timeout
    running = FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.RUNNING])))
    while time.monotonic() < deadline:
        with get_client(sync_client=True) as client:
            for run in client.read_flow_runs(flow_run_filter=running, limit=200):
                if run.parameters.get("run_dir") == str(run_dir):
                    return run
        time.sleep(0.5)
    raise AssertionError(f"no Running flow run of {run_dir} within {timeout} s")


def test_a_run_marked_crashed_while_it_lives_stops_cleanly_and_resumes(prefect_server, tmp_path, monkeypatch):
    from flows import _state_watch
    from flows.two_phase_evo import two_phase_evo
    from swarm_evo.run.session import RunDeclaredDeadError

    monkeypatch.setattr(_state_watch, "STATE_CHECK_SECONDS", 0.5)  # the verdict is seen within 0.5 s, not 15
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"search": {"parallel_workers": 2, "steps_per_epoch": 4}}))
    run_dir = tmp_path / "run"
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["summary"] = two_phase_evo(problem="circle-packing", run_dir=str(run_dir), model="offline",
                                               max_steps=BUDGET, seed=0, config_path=str(config))
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    flow_run = _running_flow_run(run_dir)
    deadline = time.monotonic() + 120
    while not _nodes(run_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _nodes(run_dir), "the run appends its first node"
    with get_client(sync_client=True) as client:  # what the dead-run automation does
        client.set_flow_run_state(flow_run.id, Crashed(message="Flow run marked as crashed due to missing heartbeats."),
                                  force=True)
    marked_at = len(_nodes(run_dir))
    thread.join(timeout=180)
    assert not thread.is_alive(), "the run stopped"

    error = outcome.get("error")
    assert isinstance(error, RunDeclaredDeadError), outcome
    message = str(error)
    assert "marked this flow run" in message and "Crashed at" in message and "missing heartbeats" in message
    assert "is alive" in message and "deployments/start-prefect-server.sh" in message
    assert f"swarm-evo resume {run_dir}" in message
    stopped = _nodes(run_dir)
    in_flight = 2 + 2  # lanes + the proposal backlog (one more per lane) were running when it was marked
    assert marked_at <= len(stopped) <= marked_at + in_flight < BUDGET, (marked_at, len(stopped))
    assert not (run_dir / "problem_report.json").exists(), "a run declared dead grades nothing"
    with get_client(sync_client=True) as client:
        final = client.read_flow_run(flow_run.id).state
    assert final.type == StateType.FAILED and "marked this flow run" in (final.message or ""), final

    summary = two_phase_evo(resume=str(run_dir), max_steps=len(stopped) + 1)  # resumable: lock and lease are free
    assert len(_nodes(run_dir)) == len(stopped) + 1
    assert summary["problem_report"]["score"] > 0 and (run_dir / "problem_report.json").exists()


def test_only_the_running_state_this_process_set_keeps_the_run_going():
    """What the watch reads as "no longer ours" (flows/_state_watch.py): a verdict (Crashed,
    Cancelling, Failed ...) or any state other than the Running state its engine set, such as a
    Crashed run retried or restarted (Scheduled, Pending, Running again) for another process."""
    from prefect.states import AwaitingRetry, Cancelling, Completed, Pending, Running

    from flows._state_watch import _taken_from_us

    ours = Running()
    assert not _taken_from_us(ours, ours.id)
    assert not _taken_from_us(ours, None)  # an engine without a state object: verdicts only
    for state in (Crashed(), Cancelling(), Completed(), AwaitingRetry(), Pending(), Running()):
        assert _taken_from_us(state, ours.id), state.name
    assert not _taken_from_us(Running(), None) and _taken_from_us(Crashed(), None)
