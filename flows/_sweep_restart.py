"""A ``benchmark-sweep`` deployment flow run that crashes is restarted (issue 40, item 9).

The scheduled sweep (``benchmark-sweep/nightly``) runs for hours or days on a worker; the
worker's machine or the flow's process may die. Prefect then has the flow run Crashed (the
process worker, when the process exits with a signal; the zombie automation of
``swarm-evo pool setup``, when the machine is gone). This module's automation sends such a
flow run back to its work pool: the *same* flow run (same id, same parameters) is run again by
whichever worker takes it, and the sweep goes on where it was (flows/benchmark_sweep.py):

- its output folder is the same (an explicit ``out_dir``, or the default
  ``runs/sweeps/<its expected start, UTC>-<first 8 hex of its id>``, both fixed for the flow run),
  and so is its sweep id (``OUT/sweep.json``; on another machine the store's ``sweep.json``,
  which names the flow run: swarm_evo/sweeps/sweep_identity.py);
- so the idempotency keys of its two-phase-evo flow runs are the same: runs that finished give
  their rows, runs in flight are waited for, crashed ones are resumed; none is started twice.

The automation (:func:`restart_automation`, one per server, made by the first deployment run of
``benchmark-sweep`` that finds it missing): a *proactive* trigger that, :data:`RESTART_DELAY`
seconds after a ``prefect.flow-run.Crashed`` event of a flow run of the flow ``benchmark-sweep``
that has a deployment, unless that run moved on meanwhile (a user retried it, say), changes its
state to Scheduled (named ``AwaitingRestart``). Prefect 3.8.8 lets a deployment's flow run leave
Crashed for Scheduled (``HandleFlowTerminalStateTransitions``); the delay is needed: its process
worker crashed (``RuntimeError: this borrower is already holding one of this CapacityLimiter's
tokens``) when handed back, a second after the crash, a flow run it still held (seen here).
A sweep restarted more than ``max_resumes`` times stops with an error instead (Failed: the
automation leaves it).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import StateType
from prefect.events.actions import ChangeFlowRunState
from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture
from prefect.events.schemas.events import ResourceSpecification

from swarm_evo.sweeps.sweep import SWEEP_ROOT, SweepError

FLOW_NAME = "benchmark-sweep"
RESTART_AUTOMATION_NAME = "swarm-evo: restart crashed benchmark sweeps"
RESTART_DELAY = 30
"""Seconds between a sweep's Crashed state and its restart (see the module)."""
RESTART_STATE = "AwaitingRestart"
MOVED_ON = ("Scheduled", "AwaitingRetry", "Late", "Pending", "Running", "Retrying", "Completed", "Failed",
            "Cancelled", "Cancelling", "Paused", "Suspended")
"""States whose event within the delay means the crashed run was taken care of already."""


def restart_automation() -> AutomationCore:
    """The automation that restarts Crashed ``benchmark-sweep`` deployment flow runs (module docstring)."""
    return AutomationCore(
        name=RESTART_AUTOMATION_NAME,
        description=(f"Sends a Crashed flow run of a {FLOW_NAME} deployment back to its work pool "
                     f"{RESTART_DELAY} s after it crashed: the sweep goes on where it was and starts no run twice "
                     f"(its two-phase-evo runs have idempotency keys). Made by the first {FLOW_NAME} deployment run."),
        enabled=True,
        trigger=EventTrigger(
            after={"prefect.flow-run.Crashed"},
            expect={f"prefect.flow-run.{name}" for name in MOVED_ON},
            match=ResourceSpecification({"prefect.resource.id": "prefect.flow-run.*"}),
            match_related=[ResourceSpecification({"prefect.resource.role": "flow", "prefect.resource.name": FLOW_NAME}),
                           ResourceSpecification({"prefect.resource.role": "deployment"})],
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=RESTART_DELAY),
        ),
        actions=[ChangeFlowRunState(state=StateType.SCHEDULED, name=RESTART_STATE,
                                    message=f"the {FLOW_NAME} flow run crashed: restarting it (it goes on where it was)")],
    )


def ensure_restart_automation() -> str:
    """Create :func:`restart_automation` on this process's Prefect server unless it is there
    (updated when its rule differs); returns ``created``, ``found`` or ``updated``.

    Raises:
        prefect's client errors: the server refused (the caller logs it; the sweep goes on).
    """
    wanted = restart_automation()
    keys = {"trigger", "actions", "enabled"}
    with get_client(sync_client=True) as client:
        found = client.read_automations_by_name(RESTART_AUTOMATION_NAME)
        if not found:
            client.create_automation(wanted)
            return "created"
        if found[0].model_dump(include=keys) != wanted.model_dump(include=keys):
            client.update_automation(found[0].id, wanted)
            return "updated"
    return "found"


def default_flow_out_dir(flow_run) -> Path:
    """``runs/sweeps/<expected start, UTC YYYYmmdd-HHMMSS>-<first 8 hex of the flow run id>``:
    the default output folder of a deployment flow run of the sweep, the same when the flow run
    is restarted (Prefect sets ``expected_start_time`` once) and distinct between flow runs."""
    stamp = flow_run.expected_start_time.strftime("%Y%m%d-%H%M%S")
    return SWEEP_ROOT / f"{stamp}-{str(flow_run.id)[:8]}"


def check_restarts(flow_run_id, max_resumes: int) -> int:
    """The times this flow run was restarted (its ``run_count`` - 1, read from the server).

    Raises:
        SweepError: more than ``max_resumes``: the message says how to go on by hand.
    """
    with get_client(sync_client=True) as client:
        run_count = client.read_flow_run(flow_run_id).run_count
    restarts = max(0, run_count - 1)
    if restarts > max_resumes:
        raise SweepError(f"this {FLOW_NAME} flow run crashed and was restarted {restarts} times (max_resumes "
                         f"{max_resumes}): not going on; run it again with the same out_dir (and store) once the "
                         "cause is fixed: finished runs are kept, none is started twice")
    return restarts
