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
from prefect.states import Crashed, Failed

BUDGET = 40
"""Far more steps than the run makes before it is marked Crashed and stops."""


def _nodes(run_dir: Path) -> list[dict]:
    try:
        return json.loads((run_dir / "journal.json").read_text())["nodes"]
    except (OSError, ValueError, KeyError):
        return []


def _running_flow_run(path: Path, parameter: str = "run_dir", timeout: float = 120.0):
    """The Running flow run whose ``parameter`` is ``path`` (a run's ``run_dir``, a sweep's ``out_dir``)."""
    deadline = time.monotonic() + timeout
    running = FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.RUNNING])))
    while time.monotonic() < deadline:
        with get_client(sync_client=True) as client:
            for run in client.read_flow_runs(flow_run_filter=running, limit=200):
                if run.parameters.get(parameter) == str(path):
                    return run
        time.sleep(0.2)
    raise AssertionError(f"no Running flow run with {parameter} {path} within {timeout} s")


def test_a_run_marked_crashed_while_it_lives_stops_cleanly_and_resumes(prefect_server, tmp_path, monkeypatch):
    from flows import _state_watch
    from flows._state_watch import STOPPING, declared_dead_failure
    from flows.two_phase_evo import two_phase_evo
    from swarm_evo.run.session import RunDeclaredDeadError

    monkeypatch.setattr(_state_watch, "STATE_CHECK_SECONDS", 0.5)  # the verdict is seen within 0.5 s, not 15
    from swarm_evo.run.session import RunSession

    at_verdict: list[int] = []  # the journal's length when the run learnt it was declared dead
    declare_dead = RunSession.declare_dead
    monkeypatch.setattr(RunSession, "declare_dead",
                        lambda self, reason: (at_verdict.append(len(self.journal)), declare_dead(self, reason))[1])
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
    in_flight = 2 + 2  # lanes + the proposal backlog (one more per lane): at most these end after the verdict
    assert len(at_verdict) == 1 and marked_at <= at_verdict[0], (marked_at, at_verdict)
    assert at_verdict[0] <= len(stopped) <= at_verdict[0] + in_flight < BUDGET, (at_verdict, len(stopped))
    assert not (run_dir / "problem_report.json").exists(), "a run declared dead grades nothing"
    with get_client(sync_client=True) as client:
        final = client.read_flow_run(flow_run.id).state
        states = sorted(client.read_flow_run_states(flow_run.id), key=lambda s: s.timestamp)
    assert final.type == StateType.FAILED and "marked this flow run" in (final.message or ""), final
    assert [(s.type.value, s.name) for s in states][-3:] == [("CRASHED", "Crashed"), ("RUNNING", STOPPING),
                                                             ("FAILED", "Failed")], states
    assert declared_dead_failure(final), "a sweep resumes it like a crashed run"
    assert not declared_dead_failure(Failed(message="Flow run encountered an exception: ValueError: x"))

    summary = two_phase_evo(resume=str(run_dir), max_steps=len(stopped) + 1)  # resumable: lock and lease are free
    assert len(_nodes(run_dir)) == len(stopped) + 1
    assert summary["problem_report"]["score"] > 0 and (run_dir / "problem_report.json").exists()



def test_a_live_sweep_marked_crashed_is_running_again_and_resumes_its_run_declared_dead(prefect_server, tmp_path,
                                                                                      monkeypatch):
    """A benchmark sweep marked Crashed while it lives would be restarted by its automation 30 s
    later, beside itself (flows/_sweep_restart.py); it sets itself back to Running first. Its run,
    marked Crashed too, stops cleanly, and the sweep resumes it: one valid row, Completed."""
    from flows import _state_watch
    from flows.benchmark_sweep import benchmark_sweep

    monkeypatch.setattr(_state_watch, "STATE_CHECK_SECONDS", 0.5)
    out = tmp_path / "sweep"
    run_dir = out / "runs" / "circle-packing-two_phase-s0"
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["summary"] = benchmark_sweep(problems=["circle-packing"], seeds=1, model="offline", max_steps=12,
                                                 out_dir=str(out), parallel_workers=2)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    sweep_run = _running_flow_run(out, parameter="out_dir")
    child = _running_flow_run(run_dir)
    deadline = time.monotonic() + 120
    while not _nodes(run_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    crashed = Crashed(message="Flow run marked as crashed due to missing heartbeats.")
    with get_client(sync_client=True) as client:  # what the dead-run automation does to both
        client.set_flow_run_state(sweep_run.id, crashed, force=True)
        client.set_flow_run_state(child.id, crashed, force=True)
    thread.join(timeout=180)
    assert "summary" in outcome, outcome
    with get_client(sync_client=True) as client:
        states = sorted(client.read_flow_run_states(sweep_run.id), key=lambda s: s.timestamp)
        child_final = client.read_flow_run(child.id).state
    names = [s.type.value for s in states]
    mark = names.index("CRASHED")
    assert names[mark + 1] == "RUNNING" and names[-1] == "COMPLETED", names
    assert "set back to Running by its live process" in states[mark + 1].message
    assert (states[mark + 1].timestamp - states[mark].timestamp).total_seconds() < 15, "before the restart (30 s)"
    assert sweep_run.id != child.id
    from flows._state_watch import declared_dead_failure

    assert declared_dead_failure(child_final), child_final
    rows = (out / "problem_reports.jsonl").read_text().splitlines()
    assert len(rows) == 1 and json.loads(rows[0])["error"] is None and json.loads(rows[0])["valid"], rows
    assert len(_nodes(run_dir)) == 12, "the resume finished the run's budget"
