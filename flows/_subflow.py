"""Subflows (phase flows, steps, debug attempts) without Prefect's flow-run heartbeats (issue 16).

Prefect 3.8's flow engine starts a heartbeat thread for every flow run and, for sync flows,
joins it on exit; its loop sleeps in whole seconds, so each subflow waited up to 1 s at its end
(``benchmarks/orchestration_overhead.py``: 1.29 s of orchestration per node with heartbeats,
0.47 s without). Heartbeats let a worker's zombie detection find a *top-level* flow run whose
process died; a subflow runs in its parent's process and dies with it, so for phase flows, steps
and debug attempts they buy nothing (a phase flow's join alone added up to 1 s at the end of
Phase 1). The top-level ``two-phase-evo`` run keeps them.

``search.subflow_heartbeats: true`` gives subflows their heartbeats back.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager, nullcontext

from prefect.context import SettingsContext, get_settings_context
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY

_QUIET: dict[int, tuple[object, object]] = {}
_LOCK = threading.Lock()


def subflow_context(heartbeats: bool) -> AbstractContextManager:
    """The context to call a subflow (phase flow, step, debug attempt) in: the current Prefect settings
    with ``flows.heartbeat_frequency`` None, unless ``heartbeats`` (then nothing changes).

    The quiet settings are built once per settings object (≈ 30 ms each) and entered as a
    :class:`prefect.context.SettingsContext`, a context variable: other threads and the
    parent flow run keep theirs. Inside a quiet subflow (a step calling a debug attempt) the
    settings are already quiet: nothing changes."""
    if heartbeats:
        return nullcontext()
    current = get_settings_context()
    if current.settings.flows.heartbeat_frequency is None:
        return nullcontext()
    with _LOCK:
        entry = _QUIET.get(id(current.settings))
        if entry is None or entry[0] is not current.settings:
            quiet = current.settings.copy_with_update(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})
            entry = _QUIET[id(current.settings)] = (current.settings, quiet)
    return SettingsContext(profile=current.profile, settings=entry[1])
