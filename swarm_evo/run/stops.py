"""Why a run ended before its budget, as the exceptions its main flow raises (the CLI exits 1 with
the message; each names the fix or the resume command)."""

from __future__ import annotations


class RunStoppedError(RuntimeError):
    """The run stopped because its model kept failing (``model.max_consecutive_failures``).
    Raised by the main flow after it handed in the best work so far; the CLI exits 1 with the
    message, which names the fix and the resume command."""


class RunSupersededError(RunStoppedError):
    """Another process took the run's store location over (issue 40, item 2): this copy stopped
    starting steps and uploading; raised by the main flow before it grades or reports anything.
    The message says who took over (:class:`swarm_evo.store.lease.SupersededError`)."""


class RunDeclaredDeadError(RunStoppedError):
    """The orchestrator declared the run's flow run dead (Crashed by missed heartbeats, Cancelled)
    while its process lived (issue 53, item 11): this copy started no further step, let the steps
    in flight end and be journaled, and grades nothing; raised by the main flow after its steps
    ended. The message says who declared it and when, and the resume command."""
