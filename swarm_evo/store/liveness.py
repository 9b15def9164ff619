"""Is the lease holder of a run's store location alive? (issue 53, item 3)

A resume takes the run's location over, and the writer it supersedes stops. That is right when the
writer is dead (its machine died, its flow run was declared Crashed) and wrong when it lives: a
resume typed by hand, or one that raced a run that was only slow, would stop a healthy run. So a
resume asks first, and refuses (:class:`WriterAliveError`, exit 2) while the holder is alive,
unless it is told to take over (``swarm-evo resume --take-over``, the flow parameter ``take_over``).

The holder is judged, most certain answer first:

1. on this host and in this PID namespace (containers may share a host name), by its pid: a pid
   that no longer runs (or runs a process started after the lease was taken: the pid was reused)
   is dead, whatever else says otherwise; a stale ``Running`` state of a killed process's flow
   run in a local Prefect database does not count;
2. by its flow run's state, where the Prefect API can tell (``writer_state``: the caller's lookup,
   no Prefect here): a final state (Completed, Failed, Crashed, Cancelled) is dead, any other is
   alive;
3. by the store: alive when the location changed (lease, journal, ``run_state.json``, which a
   live run rewrites every 30 s and its mirror uploads every :data:`~swarm_evo.store.mirror.SYNC_PERIOD`)
   less than :data:`LIVE_SECONDS` ago.

The holder of this process's own pid is an earlier session of this process: not alive.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from datetime import datetime

from swarm_evo.population.journal import JOURNAL_FILE
from swarm_evo.store.lease import LEASE_FILE, Lease, describe_owner, pid_namespace, read_lease
from swarm_evo.store.location import Store, StoreError

LIVE_SECONDS = 120.0
"""A holder whose store location changed less than this long ago is alive (it syncs at least every
30 s; two periods and some slack for a slow store)."""

RUN_STATE_FILE = "run_state.json"
FINAL_STATES = frozenset({"COMPLETED", "FAILED", "CRASHED", "CANCELLED"})
"""Prefect state types of a flow run that writes nothing more."""

WriterState = Callable[[str], "str | None"]
"""``flow run id -> its state type`` (``"RUNNING"``, ``"CRASHED"``, ...) or None when unknown."""


class WriterAliveError(StoreError):
    """The run's store location has a live writer: a resume now would supersede it. The message
    says who holds it, since when, why it counts as alive, and the fix (``--take-over``)."""


def _process_started(pid: int) -> float | None:
    """Epoch seconds at which ``pid`` started (Linux ``/proc``), or None."""
    try:
        fields = open(f"/proc/{pid}/stat", "rb").read().rsplit(b")", 1)[1].split()
        with open("/proc/stat", "rb") as fh:
            boot = next(int(line.split()[1]) for line in fh if line.startswith(b"btime"))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError, StopIteration):
        return None


def _since(lease: Lease) -> float | None:
    try:
        return datetime.fromisoformat(str(lease.owner.get("since"))).timestamp()
    except ValueError:
        return None


def pid_alive(pid: int, since: float | None) -> bool:
    """Whether ``pid`` runs on this host and may be the process that took a lease at ``since``
    (epoch seconds; a process started after it is another one, its pid reused)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    started = _process_started(pid)
    return not (started is not None and since is not None and started > since + 2)


def last_change(location: Store) -> float | None:
    """Epoch seconds of the newest change the store saw at ``location`` (its lease, journal or
    ``run_state.json``), or None when it has none of them."""
    location.fs.invalidate_cache()
    newest = None
    for name in (LEASE_FILE, JOURNAL_FILE, RUN_STATE_FILE):
        try:
            stamp = location.fs.modified(location.path(name)).timestamp()
        except (FileNotFoundError, NotImplementedError, AttributeError):
            continue
        newest = stamp if newest is None else max(newest, stamp)
    return newest


def holder_alive(location: Store, lease: Lease, writer_state: WriterState | None = None) -> str | None:
    """Why the holder of ``lease`` counts as alive (see the module), or None when it is not.

    Raises:
        OSError and the store's own errors: the store cannot be read.
    """
    owner = lease.owner
    pid = owner.get("pid")
    here = (owner.get("host") == socket.gethostname() and isinstance(pid, int)
            and owner.get("pidns", pid_namespace()) == pid_namespace())  # its pid means a process we can see
    if here and (pid == os.getpid() or not pid_alive(pid, _since(lease))):
        return None
    state = writer_state(owner["flow_run_id"]) if writer_state is not None and owner.get("flow_run_id") else None
    if state is not None:
        return None if state.upper() in FINAL_STATES else f"its flow run is {state.capitalize()}"
    if here:
        return f"its process (pid {pid}) runs on this host"
    changed = last_change(location)
    if changed is not None and time.time() - changed < LIVE_SECONDS:
        return f"it last wrote the store {max(0, time.time() - changed):.0f} s ago"
    return None


def check_writer(location: Store, owner: dict, *, take_over: bool = False,
                 writer_state: WriterState | None = None) -> Lease | None:
    """Before this process (``owner``: :func:`~swarm_evo.store.lease.new_owner`) takes
    ``location`` over: returns the current lease (None: none) when its holder is this process,
    is dead, or ``take_over`` is set.

    Raises:
        WriterAliveError: the holder is alive (one line: who, since when, why, the fix).
        StoreError: the store cannot be read.
    """
    try:
        lease = read_lease(location)
        if lease is None or take_over or lease.owner.get("token") == owner.get("token"):
            return lease
        why = holder_alive(location, lease, writer_state)
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(f"{location.url}: cannot read the run's lease ({type(exc).__name__}: {exc})") from None
    if why is None:
        return lease
    raise WriterAliveError(
        f"{location.url} is being written by {describe_owner(lease.owner)} ({why}): a resume now would supersede a "
        "live run; wait for it to end (or to be declared Crashed), or resume with --take-over to stop that copy "
        "and continue here")
