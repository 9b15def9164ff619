"""A flow run declared dead while its process lives is never left running unseen (issue 53, item 11).

The automation of ``swarm-evo pool setup`` marks a flow run Crashed when its heartbeats stop
reaching the server for two intervals. A lagging server — the stock ``prefect server start`` on
SQLite stalls for a minute on "database is locked" — receives them late and marks a live run
Crashed; a person may also cancel a run whose worker cannot kill it (a run started with
``swarm-evo run``). Before this watch such a run went on for hours under a state that says it is
over, nobody watching it.

Both watches read the flow run's own state every :data:`STATE_CHECK_SECONDS` while the flow's
body runs (:func:`watch_own_state`, a thread with the flow's context); an API that does not
answer is not a verdict.

* **A run** (:func:`stop_when_declared_dead`): once its state is one it never sets itself
  (:data:`DECLARED_DEAD`), it logs one error naming the state, when it was set and why, and what
  the run does now, sets its state to Running named :data:`STOPPING` (with that line: the UI shows
  what the live process does, and a sweep waits for it) and calls
  :meth:`swarm_evo.run.session.RunSession.declare_dead`: no new step starts, the steps in flight
  end and are journaled, nothing is graded, the lease and the run directory are released, and
  the flow ends with
  :class:`~swarm_evo.run.session.RunDeclaredDeadError` (exit 1), its message naming the resume
  command: its final state is Failed with that message, which a sweep resumes like a crashed run
  (:func:`declared_dead_failure`). A retry of the Crashed run started meanwhile is refused by the
  run directory's lock or the store's lease (issue 53, items 1-3), never run beside it.
* **A benchmark sweep** (:func:`keep_sweep_running`): a deployment sweep marked Crashed is
  restarted by its automation :data:`flows._sweep_restart.RESTART_DELAY` seconds later, on any
  worker, unless it moved on; a live sweep stopped as a run does would end Failed and never be
  restarted, and one left alone would run beside its restart. So a live sweep marked Crashed sets
  itself back to Running, with a message saying why, within :data:`STATE_CHECK_SECONDS` (less
  than the restart delay), and logs a warning: the automation then leaves it, and the sweep goes on.
"""

from __future__ import annotations

import contextvars
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from prefect import get_run_logger
from prefect.client.orchestration import get_client
from prefect.context import FlowRunContext
from prefect.states import Running

from flows._writer_state import read_flow_run_state
from swarm_evo.run.session import RunSession

STATE_CHECK_SECONDS = 15.0
"""How often a flow run reads its own state: the automation declares a run dead after 60 s
without heartbeats (2 × 30 s) and restarts a sweep 30 s after that, so a run stops, and a sweep
is Running again, at most 15 s after the verdict, at one API call per 15 s."""

DECLARED_DEAD = frozenset({"CRASHED", "CANCELLING", "CANCELLED", "FAILED", "COMPLETED"})
"""State types a running flow's body never sets itself: set by the server, an automation or a person."""

SQLITE_HINT = ("a stock `prefect server start` on SQLite receives heartbeats late under load: use the PostgreSQL "
               "server of deployments/start-prefect-server.sh")

STOPPING = "Stopping"
"""The name of the Running state a run declared dead sets while it drains its steps in flight:
a sweep waits for it (flows/_sweep_deployment.py), the UI shows it, and it ends Failed."""

RUN_STOPS = ("The run stops cleanly: no new step starts, the steps in flight end and are journaled, nothing is "
             "graded; continue it with `swarm-evo resume {run_dir}`")
"""What a run declared dead does (:func:`stop_when_declared_dead`)."""

SWEEP_GOES_ON = ("The sweep sets itself back to Running and goes on (its automation restarts only a sweep that "
                 "stays Crashed)")
"""What a live benchmark sweep marked Crashed does (:func:`keep_sweep_running`)."""


def declared_dead_message(state, run_name: str, what_now: str) -> str:
    """The one line a flow run declared dead logs: the state, its time and message, this process,
    and ``what_now`` (what the flow does, and how to continue)."""
    when = state.timestamp.isoformat(timespec="seconds") if state.timestamp else "an unknown time"
    reason = f" ({state.message.strip()})" if state.message and state.message.strip() else ""
    hint = f"; {SQLITE_HINT}" if state.type.value == "CRASHED" else ""
    return (f"the Prefect API marked this flow run ({run_name}) {state.name} at {when}{reason} while its process "
            f"(pid {os.getpid()} on {socket.gethostname()}) is alive{hint}. {what_now}")


@contextmanager
def watch_own_state(on_verdict: Callable[[object, str], bool], what_now: str,
                    verdicts: frozenset[str] = DECLARED_DEAD) -> Iterator[None]:
    """Around a flow's body: read the flow run's state every :data:`STATE_CHECK_SECONDS`; when its
    type is in ``verdicts``, call ``on_verdict(state, line)`` with the line of
    :func:`declared_dead_message` (``what_now``), which acts and returns whether to go on watching.
    Outside a flow run nothing is watched."""
    context = FlowRunContext.get()
    run = context.flow_run if context is not None else None
    if run is None:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(STATE_CHECK_SECONDS):
            state = read_flow_run_state(str(run.id))
            if state is None or state.type.value not in verdicts:
                continue
            if not on_verdict(state, declared_dead_message(state, run.name or str(run.id), what_now)):
                return

    thread = threading.Thread(target=contextvars.copy_context().run, args=(watch,), name="swarm-evo-state-watch",
                              daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=STATE_CHECK_SECONDS + 5)


def _set_own_state(state) -> None:
    """Force the flow run of this context into ``state``; an API that does not answer is logged."""
    try:
        with get_client(sync_client=True) as client:
            client.set_flow_run_state(FlowRunContext.get().flow_run.id, state, force=True)
    except Exception as exc:  # noqa: BLE001 - a thread: the flow goes on either way
        get_run_logger().warning("could not set this flow run %s (%s: %s)", state.name, type(exc).__name__, exc)


def stop_when_declared_dead(session: RunSession):
    """:func:`watch_own_state` for a run: declared dead, it logs the line as an error and stops
    cleanly (:meth:`~RunSession.declare_dead`, :data:`RUN_STOPS`); the watch ends."""

    def stop(state, line: str) -> bool:
        get_run_logger().error(line)
        session.declare_dead(line)
        _set_own_state(Running(name=STOPPING, message=line))  # the UI says what the live process does
        return False

    return watch_own_state(stop, RUN_STOPS.format(run_dir=session.run_dir))


def keep_sweep_running():
    """:func:`watch_own_state` for a benchmark sweep: marked Crashed while alive, it sets its flow
    run back to Running (forced; the message says why) and logs the line as a warning, and goes
    on watching. Other verdicts (a cancellation) are the worker's to carry out."""

    def reclaim(state, line: str) -> bool:
        _set_own_state(Running(message=f"set back to Running by its live process: {line}"))
        get_run_logger().warning(line)
        return True

    return watch_own_state(reclaim, SWEEP_GOES_ON, verdicts=frozenset({"CRASHED"}))


def declared_dead_failure(state) -> bool:
    """Whether a final ``state`` is that of a run that stopped cleanly after being declared dead
    (Failed by :class:`~swarm_evo.run.session.RunDeclaredDeadError`): resumable like a crashed run."""
    return state.is_failed() and "RunDeclaredDeadError" in (state.message or "")
