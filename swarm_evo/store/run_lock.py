"""One process per run directory (issue 53, item 2).

A second process that opened a run directory whose run still lives (a second ``swarm-evo
resume``, a sweep's resume on the same machine) would reconcile it under the live run: move its
in-flight node folders, delete its temporary files, rebuild the hidden view under running
programs. So a session holds ``RUN_DIR/run.lock`` for its whole life: an exclusive POSIX record
lock (``fcntl.lockf``), which local file systems and NFSv4 (through the server's lock manager)
both honour and the kernel releases when the process dies, however it dies. The file holds who
took it (host, pid, since), for the second opener's message; it is never mirrored nor fetched.
The holder removes it as it lets go (a killed process leaves it, unlocked); an opener that locked
a file removed meanwhile tries again on the one at the path, so two processes never both hold it.

POSIX locks belong to a process, not to a file descriptor: a second lock of the same file in the
same process would succeed, and closing any descriptor of it would drop the lock. So this process
keeps one descriptor per run directory (:data:`_HELD`) and a session opened again here (a test, a
resume in the same process) takes the lock on from the previous one instead of locking twice.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from swarm_evo.store.location import StoreError

logger = logging.getLogger(__name__)

LOCK_FILE = "run.lock"
"""``RUN_DIR/run.lock``: held by the one process that has the run directory open."""

_HELD: dict[str, tuple[int | None, str]] = {}  # resolved run dir -> (descriptor, token of the current holder)
_GUARD = threading.Lock()


class RunDirectoryBusyError(StoreError):
    """Another process has the run directory open (its session holds ``RUN_DIR/run.lock``); the
    message names it (host, pid, since) and the fix."""


@dataclass(frozen=True)
class RunDirLock:
    """This process's hold on a run directory (:func:`lock_run_dir`); :meth:`release` at the end."""

    run_dir: Path
    token: str

    def release(self) -> None:
        """Let the run directory go (no-op when a later session of this process took it on)."""
        key = str(self.run_dir)
        with _GUARD:
            held = _HELD.get(key)
            if held is None or held[1] != self.token:
                return
            del _HELD[key]
        if held[0] is not None:
            try:  # removed while still held: an opener that finds it gone makes a new one (see lock_run_dir)
                os.unlink(self.run_dir / LOCK_FILE)
            except OSError:
                pass
            os.close(held[0])  # closing the descriptor drops the lock


def _busy(run_dir: Path, holder: dict) -> RunDirectoryBusyError:
    who = f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}"
    since = f" since {holder['since']}" if holder.get("since") else ""
    return RunDirectoryBusyError(
        f"{run_dir} is open in another process ({who}{since}; it holds {run_dir / LOCK_FILE}): one process per run "
        f"directory, so this one changes nothing there; wait for that process to end or stop it (kill "
        f"{holder.get('pid', 'PID')} on {holder.get('host', 'its host')}), then resume the run")


def _holder(fd: int) -> dict:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _try_lock(fd: int, run_dir: Path) -> bool:
    """Lock ``fd``; False when the file system gives no locks (warned); raises when it is held."""
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            holder = _holder(fd)
            os.close(fd)
            raise _busy(run_dir, holder) from None
        if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
            logger.warning("cannot lock %s (%s): this file system gives no locks, so nothing stops a second "
                           "process from opening the run directory", run_dir / LOCK_FILE, exc)
            return False
        os.close(fd)
        raise
    return True


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def lock_run_dir(run_dir: Path) -> RunDirLock:
    """Hold ``run_dir`` (an existing directory) for this process until :meth:`RunDirLock.release`
    or the process's end; a session opened again in this process takes the hold on.

    Raises:
        RunDirectoryBusyError: another process holds it (the message names host, pid and since).
        OSError: the lock file cannot be made.
    """
    run_dir = Path(run_dir).resolve()
    key, token = str(run_dir), uuid.uuid4().hex
    with _GUARD:
        if key in _HELD:
            _HELD[key] = (_HELD[key][0], token)
            return RunDirLock(run_dir, token)
        while True:
            fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            locked = _try_lock(fd, run_dir)
            if not locked or _same_file(fd, run_dir / LOCK_FILE):
                break
            os.close(fd)  # locked a file its holder removed as it let go: lock the one at the path now
        holder = {"host": socket.gethostname(), "pid": os.getpid(),
                  "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        _HELD[key] = (fd if locked else None, token)
        if not locked:
            os.close(fd)
    return RunDirLock(run_dir, token)


def check_free(run_dir: Path) -> None:
    """Whether ``run_dir`` may be changed by this process now (before a resume moves it aside or
    fetches into it): returns when no other process holds it, or it does not exist.

    Raises:
        RunDirectoryBusyError: another process holds it.
    """
    run_dir = Path(run_dir).resolve()
    path = run_dir / LOCK_FILE
    with _GUARD:
        if str(run_dir) in _HELD or not path.is_file():
            return
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        if _try_lock(fd, run_dir):
            fcntl.lockf(fd, fcntl.LOCK_UN)
        os.close(fd)
