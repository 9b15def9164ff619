"""RunMirror: keeps ``STORE/runs/<run name>/`` a copy of a run directory, in the background.

A run works in a local (scratch) run directory; the mirror uploads what changed there after
every journal append (:meth:`RunMirror.request`), every :data:`SYNC_PERIOD` seconds, and at the
end (:meth:`RunMirror.close`). One sync uploads the changed files of the directory first, then
the journal, with its bytes as they were when the sync began, then ``result.json``: the store's
journal only names nodes whose files are already in the store, it is at most the node in flight
behind the local one (issue 34), and a ``result.json`` in the store means the store's copy of
the run's reports is final (a sweep reads its rows from it).

One writer (issue 40, item 2): a mirror started by :func:`mirror_run` holds the location's
lease (:mod:`swarm_evo.store.lease`). It checks the lease before every sync, right before the
journal, and again before any upload when the last check began more than :data:`LEASE_RECHECK`
seconds earlier (a process frozen mid-sync, even mid-check, checks again when it thaws); once
another process has taken the location over it uploads nothing more, stops, and calls
``on_superseded`` (the run stops with the message). What no check can stop is the one request
that was in flight at the moment of a freeze; an S3 store itself refuses it for the journal and
``result.json``, written If-Match the ETag last seen (:mod:`swarm_evo.store.conditional`).

A store that goes away leaves the run going locally: the failed sync is retried with
exponential back-off (tenacity), the mirror warns once, says when the store answers again,
and the next sync uploads everything that changed meanwhile. Nothing is deleted in the store.

What is mirrored (read by :func:`~swarm_evo.store.walk.walk_files`, which follows no link at any
depth): every regular file of the run directory except temporary files (``.<name>.*.tmp``, the
atomic writes in flight) and scratch (a program's ``working/`` folder, wherever it moved). A file
the store cannot take — over ``store.max_file_mb``, a name that is not UTF-8, a key longer than
the store allows, or an upload the store keeps refusing while it answers otherwise — is skipped
and recorded (:attr:`RunMirror.skipped`, warned once, listed in the run report), and the
journal keeps moving (issue 40, item 4).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import tenacity

from swarm_evo.config import DEFAULT_MAX_FILE_MB
from swarm_evo.population.journal import JOURNAL_FILE, RESULT_FILE
from swarm_evo.sandbox.safe_read import ProgramFileError
from swarm_evo.store.lease import LEASE_FILE, Lease, SupersededError, check_lease, read_lease
from swarm_evo.store.conditional import HistoryWrites
from swarm_evo.store.location import Store, put_object
from swarm_evo.store.run_lock import LOCK_FILE
from swarm_evo.store.walk import is_temporary, printable, walk_files

logger = logging.getLogger(__name__)

SYNC_PERIOD = 30.0
"""Seconds between syncs when no journal append asks for one (run_state.json, the call ledger)."""

LEASE_RECHECK = 1.0
"""Seconds after which an upload checks the lease again (a process frozen mid-sync and thawed
learns it was superseded before its next upload)."""

OBJECT_KEY_BYTES = 1024
"""The longest object key S3 (and GCS) take, in UTF-8 bytes."""

NAME_BYTES = 255
"""The longest name of one path component on a local store (ext4, XFS)."""

FILE_ATTEMPTS = 3
"""Syncs in a row a file may fail in while the store answers, before it is skipped and recorded."""


@dataclass
class MirrorStats:
    """What a mirror did: ``syncs`` that completed, ``files`` and ``bytes`` uploaded, ``seconds``
    spent in completed syncs, ``failures`` (syncs that raised) and ``last_error``."""

    syncs: int = 0
    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    failures: int = 0
    last_error: str | None = None
    skipped: dict[str, str] = field(default_factory=dict)


class RunMirror:
    """Mirror the run directory ``run_dir`` to ``target`` (``STORE/runs/<name>``).

    Use :func:`mirror_run` (it takes the location's lease first); ``mirror.request()`` after a
    journal append; ``mirror.close()`` at the end of the run. :meth:`sync_once` is the one sync,
    also usable without the thread.

    Args:
        run_dir: the local run directory.
        target: the store location it is mirrored to.
        lease: this writer's lease of ``target`` (:func:`~swarm_evo.store.lease.take_over`);
            None: no lease is checked (a mirror of a directory nobody else writes, e.g. a benchmark).
        max_file_mb: files larger than this (MiB) are skipped and recorded (``store.max_file_mb``).
        on_superseded: called once (from the mirror's thread) with the
            :class:`~swarm_evo.store.lease.SupersededError` when another process took ``target`` over.
        derived: top-level folders not mirrored (rebuilt by every session: the hidden split).
        retry_initial, retry_max: seconds of the first and the longest wait between attempts
            when the store fails (doubling: 1, 2, 4, ... 60).
        period: seconds between syncs without a request (:data:`SYNC_PERIOD`).
        in_place: ``run_dir`` is ``target`` itself (a run in its directory store's own folder):
            nothing is uploaded, only the lease is checked, by each sync and by :meth:`check_writer`
            before every journal write (issue 53, item 1).
    """

    def __init__(self, run_dir: Path, target: Store, *, lease: Lease | None = None,
                 max_file_mb: int = DEFAULT_MAX_FILE_MB,
                 on_superseded: Callable[[SupersededError], None] | None = None, derived: tuple[str, ...] = (),
                 retry_initial: float = 1.0, retry_max: float = 60.0, period: float = SYNC_PERIOD,
                 in_place: bool = False) -> None:
        self.run_dir = Path(run_dir)
        self.in_place = in_place
        self.target = target
        self.lease = lease
        self.max_file_bytes = max_file_mb * 1024 * 1024
        self.on_superseded = on_superseded
        self.derived = frozenset(derived)
        self.superseded: SupersededError | None = None
        self.stats = MirrorStats()
        self._period = period
        self._retry = (retry_initial, retry_max)
        self._sent: dict[str, tuple[int, int]] = {}  # relative path -> (size, mtime_ns) uploaded or skipped
        self._file_failures: dict[str, int] = {}
        self._made_dirs: set[str] = set()
        self._history = HistoryWrites(target, lease)  # on S3, the journal If-Match the ETag last seen
        self._lease_checked = 0.0
        self._cond = threading.Condition()
        self._requested = 0  # request generations: a sync that starts at generation g covers <= g
        self._synced = 0
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._abandon = threading.Event()  # close() gave up waiting, or superseded: stop retrying
        self._failing = False
        self._thread: threading.Thread | None = None

    @property
    def skipped(self) -> dict[str, str]:
        """Files not mirrored, relative path -> why (over the size cap, a name the store cannot
        take, refused by the store)."""
        return dict(self.stats.skipped)

    # ------------------------------------------------------------------ the background thread
    def start(self) -> RunMirror:
        """Start the background thread (a daemon) and ask for a first sync; returns ``self``."""
        self._thread = threading.Thread(target=self._loop, name=f"store-mirror-{self.run_dir.name}", daemon=True)
        self._thread.start()
        self.request()
        return self

    def request(self) -> None:
        """Ask for a sync soon (after a journal append); returns at once."""
        with self._cond:
            self._requested += 1
        self._wake.set()

    def flush(self, timeout: float | None = None) -> bool:
        """Ask for a sync and wait until one that began after this call has completed.

        Returns:
            True when it completed within ``timeout`` seconds (None: no bound), False otherwise
            (the store is failing and the thread keeps retrying, or this writer was superseded).
        """
        with self._cond:
            self._requested += 1
            wanted = self._requested
        self._wake.set()
        with self._cond:
            return self._cond.wait_for(lambda: self._synced >= wanted or self.superseded is not None,
                                       timeout=timeout) and self.superseded is None

    def close(self, timeout: float = 300.0) -> bool:
        """Upload what is left and stop the thread: wait up to ``timeout`` seconds for a last
        complete sync. On False the store is behind: the local run directory holds everything
        (a warning names it; ``swarm-evo resume`` or a later run's mirror catches the store up),
        or this writer was superseded (nothing more is uploaded)."""
        if self._thread is None:
            return self.superseded is None
        done = self.superseded is None and self.flush(timeout)
        if not done and self.superseded is None:
            logger.warning("the store %s is behind the run directory %s (%s); the local copy is whole",
                           self.target.url, self.run_dir, self.stats.last_error)
        self._closing.set()
        self._abandon.set()
        self._wake.set()
        self._thread.join(timeout=30)
        self._thread = None
        return done

    def _loop(self) -> None:
        first, longest = self._retry
        retrying = tenacity.Retrying(
            wait=tenacity.wait_exponential(multiplier=first, min=first, max=longest),
            retry=tenacity.retry_if_not_exception_type(SupersededError),
            stop=tenacity.stop_when_event_set(self._abandon),
            before_sleep=self._on_failure,
            sleep=self._abandon.wait,  # wakes at once when close() gives up
            reraise=True,
        )
        while not self._closing.is_set():
            self._wake.wait(timeout=self._period)
            self._wake.clear()
            if self._closing.is_set():
                break
            with self._cond:
                generation = self._requested
            try:
                retrying(self.sync_once)
            except SupersededError as exc:
                self._superseded(exc)
                break
            except Exception as exc:  # abandoned by close(): the warning is close()'s
                self._note_failure(exc)
                break
            if self._failing:
                logger.warning("the store %s answers again: the run directory is mirrored", self.target.url)
                self._failing = False
            with self._cond:
                self._synced = max(self._synced, generation)
                self._cond.notify_all()

    def check_writer(self) -> None:
        """Check the lease now (before a write in place); returns while it is this writer's.

        Raises:
            SupersededError: another process took the location over (the mirror stops, once).
        """
        if self.superseded is not None:
            raise self.superseded
        try:
            self._check_lease(force=True)
        except SupersededError as exc:
            self._superseded(exc)
            raise

    def _superseded(self, exc: SupersededError) -> None:
        if self.superseded is not None:
            return
        logger.error("%s (run directory %s)", exc, self.run_dir)
        self._abandon.set()
        with self._cond:
            self.superseded = exc
            self._cond.notify_all()
        if self.on_superseded is not None:
            self.on_superseded(exc)

    def _note_failure(self, exc: BaseException) -> None:
        self.stats.failures += 1
        self.stats.last_error = " ".join(f"{type(exc).__name__}: {exc}".split())[:500]

    def _on_failure(self, state: tenacity.RetryCallState) -> None:
        self._note_failure(state.outcome.exception())
        if not self._failing:
            self._failing = True
            logger.warning("cannot write to the store %s (%s); the run goes on in %s and the store catches up "
                           "when it answers", self.target.url, self.stats.last_error, self.run_dir)

    # ------------------------------------------------------------------ one sync
    def sync_once(self) -> int:
        """Upload every file that changed since the last sync, then the journal, then
        ``result.json``; returns the number of files uploaded.

        Raises:
            SupersededError: another process holds the location's lease now; nothing more was uploaded.
            OSError and the store's own errors: an upload failed (the files uploaded before it
                count as sent; the rest, and the journal, go with the next sync).
        """
        started = time.perf_counter()
        self._check_lease(force=True)
        if self.in_place:  # the files are in the store already: the check is the sync
            self.stats.syncs += 1
            return 0
        journal = self._read_local(JOURNAL_FILE)  # first: the node files it names are on disk already
        result = self._read_local(RESULT_FILE)
        uploaded = 0
        for entry in walk_files(self.run_dir, skip_top=self.derived):
            rel, signature = entry.rel, entry.signature
            if rel in (JOURNAL_FILE, RESULT_FILE, LEASE_FILE, LOCK_FILE) or self._sent.get(rel) == signature or is_temporary(rel):
                continue
            reason = self._refusal(rel, entry.size)
            if reason is not None:
                self._skip(rel, signature, reason)
                continue
            try:
                with entry.open() as source:  # at most the size checked: a file grown since goes up cut
                    self._put(rel, source, limit=entry.size)
            except (FileNotFoundError, ProgramFileError):
                continue  # replaced or removed since the scan: the next sync sees it
            except SupersededError:
                raise
            except Exception as exc:
                self._file_failed(rel, signature, exc)
                continue
            self._file_failures.pop(rel, None)
            self._sent[rel] = signature
            uploaded += 1
            self.stats.bytes += signature[0]
        for name, local in ((JOURNAL_FILE, journal), (RESULT_FILE, result)):
            if local is not None and self._sent.get(name) != local[1]:
                self._check_lease(force=True)  # right before: the journal is the run's history
                if not self._history.put(name, local[0]):  # False: a store without conditions
                    self._put(name, local[0])
                self._sent[name] = local[1]
                uploaded += 1
                self.stats.bytes += len(local[0])
        self.stats.syncs += 1
        self.stats.files += uploaded
        self.stats.seconds += time.perf_counter() - started
        return uploaded

    def _check_lease(self, force: bool = False) -> None:
        """The lease is still this writer's (forced, or when the last check *began* more than
        :data:`LEASE_RECHECK` seconds ago: a process frozen in the middle of a check, or between a
        check and an upload, checks again when it thaws instead of trusting what it read before).

        Raises:
            SupersededError: it is not.
        """
        if self.lease is None or (not force and time.monotonic() - self._lease_checked < LEASE_RECHECK):
            return
        began = time.monotonic()
        check_lease(self.target, self.lease)
        self._lease_checked = began

    def _refusal(self, rel: str, size: int) -> str | None:
        """Why the store cannot take ``rel`` of ``size`` bytes, or None."""
        if size > self.max_file_bytes:
            return (f"{size / 2**20:,.0f} MiB, over store.max_file_mb = {self.max_file_bytes // 2**20} "
                    "(raise it to mirror such files)")
        try:
            key = self.target.path(rel).encode("utf-8")
        except UnicodeEncodeError:
            return "its name is not UTF-8, which the store's keys must be"
        if self.target.is_local:
            if max(len(part) for part in rel.encode("utf-8").split(b"/")) > NAME_BYTES:
                return f"a name longer than {NAME_BYTES} bytes"
        elif len(key) > OBJECT_KEY_BYTES:
            return f"its key would be {len(key)} bytes, over the store's {OBJECT_KEY_BYTES}"
        return None

    def _skip(self, rel: str, signature: tuple[int, int], reason: str) -> None:
        self._sent[rel] = signature  # not tried again until it changes
        shown = printable(rel)  # a program chose the name: no lone surrogate reaches a log or a report
        if self.stats.skipped.get(shown) != reason:
            logger.warning("not mirrored to %s: %s (%s)", self.target.url, shown, reason)
        self.stats.skipped[shown] = reason

    def _file_failed(self, rel: str, signature: tuple[int, int], exc: Exception) -> None:
        """One file's upload failed: skipped and recorded after :data:`FILE_ATTEMPTS` syncs in a
        row while the store answers otherwise; re-raised (the whole sync is retried) before that
        or when the store itself does not answer."""
        try:
            read_lease(self.target)  # does the store answer at all? (a GET: no cached listing)
        except Exception:
            raise exc from None
        failures = self._file_failures.get(rel, 0) + 1
        self._file_failures[rel] = failures
        if failures < FILE_ATTEMPTS:
            raise exc
        self._file_failures.pop(rel, None)
        self._skip(rel, signature, "the store refused it " + " ".join(f"({type(exc).__name__}: {exc})".split())[:300])

    def _read_local(self, name: str) -> tuple[bytes, tuple[int, int]] | None:
        path = self.run_dir / name
        try:
            with open(path, "rb") as fh:
                st = os.fstat(fh.fileno())
                return fh.read(), (st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            return None

    def _put(self, rel: str, source, limit: int | None = None) -> None:
        self._check_lease()  # right before every upload; only the request in flight can outlive a freeze
        put_object(self.target, rel, source, self._made_dirs, limit=limit)

