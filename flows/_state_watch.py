"""A run declared dead while it lives says so and stops (issue 53, item 11).

The automation of ``swarm-evo pool setup`` marks a flow run Crashed when its heartbeats stop
reaching the server for two intervals. A lagging server — the stock ``prefect server start`` on
SQLite stalls for a minute on "database is locked" — receives them late and marks a live run
Crashed; a person may also cancel a run whose worker cannot kill it (a run started with
``swarm-evo run``). Before this watch such a run went on for hours under a state that says it is
over, nobody watching it, and a sweep's restart could start a second copy beside it.

:func:`stop_when_declared_dead` asks the API for the run's own state every
:data:`STATE_CHECK_SECONDS` while the flow's body runs. Once the state is one the run did not set
itself (:data:`DECLARED_DEAD`, or any state but the Running one its engine set: the run retried
or restarted for another process meanwhile), it logs one error naming the state, who set it and when, and what
the run does now, and calls :meth:`swarm_evo.run.session.RunSession.declare_dead`: no new step
starts, the steps in flight end and are journaled, nothing is graded, the lease and the run
directory are released, and the flow ends with
:class:`~swarm_evo.run.session.RunDeclaredDeadError` (exit 1), its message naming the resume
command. The final state the engine then proposes (Failed, with that message) replaces Crashed
(Prefect 3.8's ``HandleFlowTerminalStateTransitions`` lets a flow run leave Crashed for Failed).
An API that does not answer is not a verdict: the run goes on.
"""

from __future__ import annotations

import contextvars
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from prefect import get_run_logger
from prefect.context import FlowRunContext

from flows._writer_state import read_flow_run_state
from swarm_evo.run.session import RunSession

STATE_CHECK_SECONDS = 15.0
"""How often a run reads its own flow-run state: the automation declares a run dead after 60 s
without heartbeats (2 × 30 s), so a run stops at most 15 s after the verdict, at one API call per
15 s."""

DECLARED_DEAD = frozenset({"CRASHED", "CANCELLING", "CANCELLED", "FAILED", "COMPLETED"})
"""State types a running flow's body never sets itself: set by the server, an automation or a person."""

SQLITE_HINT = ("a stock `prefect server start` on SQLite receives heartbeats late under load: use the PostgreSQL "
               "server of deployments/start-prefect-server.sh")


def declared_dead_message(state, run_name: str, run_dir: str) -> str:
    """The one line a run declared dead logs and ends with: the state, its time and message, this
    process, what the run does and the resume command."""
    when = state.timestamp.isoformat(timespec="seconds") if state.timestamp else "an unknown time"
    reason = f" ({state.message.strip()})" if state.message and state.message.strip() else ""
    hint = f"; {SQLITE_HINT}" if state.type.value == "CRASHED" else ""
    return (f"the Prefect API marked this flow run ({run_name}) {state.name} at {when}{reason} while its process "
            f"(pid {os.getpid()} on {socket.gethostname()}) is alive{hint}. The run stops cleanly: no new step "
            f"starts, the steps in flight end and are journaled, nothing is graded; continue it with "
            f"`swarm-evo resume {run_dir}`")


def _taken_from_us(state, own_state_id) -> bool:
    """Whether ``state`` (the server's) says the run is no longer this process's: a state in
    :data:`DECLARED_DEAD`, or any state other than the Running state this process's engine set
    (a Crashed run retried or restarted — Scheduled, Pending, Running again — for another process)."""
    return state.type.value in DECLARED_DEAD or (own_state_id is not None and state.id != own_state_id)


@contextmanager
def stop_when_declared_dead(session: RunSession) -> Iterator[None]:
    """Around a flow's body: read the flow run's state every :data:`STATE_CHECK_SECONDS` (a thread
    with the flow's context) and :meth:`~RunSession.declare_dead` the session once it is not the
    state this process set (:func:`_taken_from_us`; module docstring). Outside a flow run: nothing
    is watched."""
    context = FlowRunContext.get()
    run = context.flow_run if context is not None else None
    if run is None:
        yield
        return
    own_state_id = run.state.id if run.state is not None else None
    done = threading.Event()

    def watch() -> None:
        while not done.wait(STATE_CHECK_SECONDS):
            state = read_flow_run_state(str(run.id))
            if state is None or not _taken_from_us(state, own_state_id):
                continue
            message = declared_dead_message(state, run.name or str(run.id), str(session.run_dir))
            get_run_logger().error(message)
            session.declare_dead(message)
            return

    thread = threading.Thread(target=contextvars.copy_context().run, args=(watch,), name="swarm-evo-state-watch",
                              daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=STATE_CHECK_SECONDS + 5)
