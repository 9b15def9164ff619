"""A live flow run of ours is never declared dead by our automation (issue 40, item 1).

``swarm-evo pool setup`` installs an automation that marks a flow run tagged :data:`POOL_TAG`
Crashed when its heartbeats stop for two intervals of :data:`MIN_HEARTBEAT_FREQUENCY` seconds
or more. Every deployment of prefect.yaml carries the frequency in its job variables
(``env: PREFECT_FLOWS_HEARTBEAT_FREQUENCY``), so a worker started with no extra variable is
right. A run can still come out slower — a job variable overridden at run time
(``--job-variable env=…`` replaces the whole ``env``), a deployment of this flow made outside
prefect.yaml, a served flow — and its first heartbeat would start a count it cannot meet
(Prefect's default is 180 s). :func:`guard_heartbeats` closes that gap: in a tagged flow run whose
own heartbeats are slower than the automation assumes (or off), it emits the same
``prefect.flow-run.heartbeat`` event every :data:`MIN_HEARTBEAT_FREQUENCY` seconds, through
Prefect's own ``emit_event``, until the flow's body ends, and says so once in the run's log.
A flow run whose process dies stops these heartbeats with it, so dead runs are still found.
"""

from __future__ import annotations

import contextvars
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from prefect import __version__ as prefect_version
from prefect import get_run_logger
from prefect.context import FlowRunContext
from prefect.events import emit_event
from prefect.settings import get_current_settings

POOL_TAG = "swarm-evo"
"""The tag of every deployment in prefect.yaml and every run a sweep starts: the automation of
``swarm-evo pool setup`` watches these flow runs only, never the rest of the server."""

MIN_HEARTBEAT_FREQUENCY = 30
"""Prefect 3.8.8's lower bound of ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` (a setting ``ge=30``; the
flow engine's ``MINIMUM_HEARTBEAT_INTERVAL``), the value prefect.yaml's deployments carry, and
the pace of :func:`guard_heartbeats`: fast enough for any ``--heartbeat-frequency`` the
automation may assume."""


@contextmanager
def guard_heartbeats() -> Iterator[bool]:
    """Around a flow's body: heartbeats every :data:`MIN_HEARTBEAT_FREQUENCY` seconds for a flow
    run tagged :data:`POOL_TAG` whose own heartbeats are slower or off (see the module). Yields
    whether it emits them (False: the engine's own heartbeats are fast enough, or the run is
    not one the automation watches)."""
    context = FlowRunContext.get()
    run = context.flow_run if context else None
    frequency = get_current_settings().flows.heartbeat_frequency
    if run is None or POOL_TAG not in (run.tags or []) or (frequency is not None and frequency <= MIN_HEARTBEAT_FREQUENCY):
        yield False
        return
    get_run_logger().warning(
        "this flow run's heartbeats come every %s (PREFECT_FLOWS_HEARTBEAT_FREQUENCY), slower than the %s s the "
        "dead-run automation of `swarm-evo pool setup` assumes: the run sends its own every %s s (give the "
        "deployment's job variables env PREFECT_FLOWS_HEARTBEAT_FREQUENCY=%s, as prefect.yaml does)",
        f"{frequency} s" if frequency else "never", MIN_HEARTBEAT_FREQUENCY, MIN_HEARTBEAT_FREQUENCY,
        MIN_HEARTBEAT_FREQUENCY)
    resource = {"prefect.resource.id": f"prefect.flow-run.{run.id}", "prefect.resource.name": run.name or "",
                "prefect.version": prefect_version}
    related = [{"prefect.resource.id": f"prefect.tag.{tag}", "prefect.resource.role": "tag"} for tag in run.tags]
    if run.deployment_id:
        related.append({"prefect.resource.id": f"prefect.deployment.{run.deployment_id}",
                        "prefect.resource.role": "deployment"})
    stop = threading.Event()

    def beat() -> None:
        while not stop.is_set():
            emit_event(event="prefect.flow-run.heartbeat", resource=resource, related=related)
            stop.wait(MIN_HEARTBEAT_FREQUENCY)

    # the flow's context (its settings, so its API URL) in the thread, as the engine's own heartbeat thread has
    thread = threading.Thread(target=contextvars.copy_context().run, args=(beat,), name="swarm-evo-heartbeats",
                              daemon=True)
    thread.start()
    try:
        yield True
    finally:
        stop.set()
        thread.join(timeout=5)


def heartbeats_guarded(fn: Callable) -> Callable:
    """Decorator for a flow's function (under ``@flow``): its body runs inside
    :func:`guard_heartbeats`. The signature is kept (``functools.wraps``), so Prefect sees the
    flow's parameters as they are."""

    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        with guard_heartbeats():
            return fn(*args, **kwargs)

    return guarded
