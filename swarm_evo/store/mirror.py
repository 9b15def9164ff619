"""RunMirror: keeps ``STORE/runs/<run name>/`` a copy of a run directory, in the background.

A run works in a local (scratch) run directory; the mirror uploads what changed there after
every journal append (:meth:`RunMirror.request`), every :data:`SYNC_PERIOD` seconds, and at the
end (:meth:`RunMirror.close`). One sync uploads the changed files of the directory first and
the journal last, with the journal's bytes as they were when the sync began: the store's
journal only names nodes whose files are already in the store, and it is at most the node in
flight behind the local one (issue 34).

A store that goes away leaves the run going locally: the failed sync is retried with
exponential back-off (tenacity), the mirror warns once, says when the store answers again,
and the next sync uploads everything that changed meanwhile. Nothing is deleted in the store.

What is mirrored: every regular file of the run directory except temporary files
(``.<name>.*.tmp``, the atomic writes in flight) and each node's ``working/`` folder (the
program's scratch space: models and caches the program wrote, often gigabytes). Files a
program wrote are read as :func:`~swarm_evo.sandbox.safe_read.open_program_file` does: a
symbolic link is never followed, a FIFO never blocks.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import tenacity

from swarm_evo.population.journal import JOURNAL_FILE
from swarm_evo.sandbox.safe_read import ProgramFileError, open_program_file
from swarm_evo.store.location import Store

logger = logging.getLogger(__name__)

SYNC_PERIOD = 30.0
"""Seconds between syncs when no journal append asks for one (run_state.json, the call ledger)."""

NODES_DIR = "nodes"
SKIPPED_NODE_DIRS = frozenset({"working"})
"""Folders of ``nodes/<id>/`` that are not mirrored: the program's scratch space."""


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


class RunMirror:
    """Mirror the run directory ``run_dir`` to ``target`` (``STORE/runs/<name>``).

    Use: ``mirror = RunMirror(run_dir, store.run(name)).start()``; ``mirror.request()`` after a
    journal append; ``mirror.close()`` at the end of the run. :meth:`sync_once` is the one sync,
    also usable without the thread.

    Args:
        run_dir: the local run directory.
        target: the store location it is mirrored to.
        retry_initial, retry_max: seconds of the first and the longest wait between attempts
            when the store fails (doubling: 1, 2, 4, ... 60).
        period: seconds between syncs without a request (:data:`SYNC_PERIOD`).
    """

    def __init__(self, run_dir: Path, target: Store, *, retry_initial: float = 1.0, retry_max: float = 60.0,
                 period: float = SYNC_PERIOD) -> None:
        self.run_dir = Path(run_dir)
        self.target = target
        self.stats = MirrorStats()
        self._period = period
        self._retry = (retry_initial, retry_max)
        self._sent: dict[str, tuple[int, int]] = {}  # relative path -> (size, mtime_ns) uploaded
        self._made_dirs: set[str] = set()
        self._cond = threading.Condition()
        self._requested = 0  # request generations: a sync that starts at generation g covers <= g
        self._synced = 0
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._abandon = threading.Event()  # close() gave up waiting: stop retrying
        self._failing = False
        self._thread: threading.Thread | None = None

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
            (the store is failing; the thread keeps retrying).
        """
        with self._cond:
            self._requested += 1
            wanted = self._requested
        self._wake.set()
        with self._cond:
            return self._cond.wait_for(lambda: self._synced >= wanted, timeout=timeout)

    def close(self, timeout: float = 300.0) -> bool:
        """Upload what is left and stop the thread: wait up to ``timeout`` seconds for a last
        complete sync. On False the store is behind: the local run directory holds everything
        (a warning names it; ``swarm-evo resume`` or a later run's mirror catches the store up)."""
        if self._thread is None:
            return True
        done = self.flush(timeout)
        if not done:
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
            except Exception as exc:  # abandoned by close(): the warning is close()'s
                self._note_failure(exc)
                break
            if self._failing:
                logger.warning("the store %s answers again: the run directory is mirrored", self.target.url)
                self._failing = False
            with self._cond:
                self._synced = max(self._synced, generation)
                self._cond.notify_all()

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
        """Upload every file that changed since the last sync, the journal last; returns the
        number of files uploaded.

        Raises:
            OSError and the store's own errors: an upload failed (the files uploaded before it
            count as sent; the rest, and the journal, go with the next sync).
        """
        started = time.perf_counter()
        journal = self._read_journal()  # first: the node files it names are on disk already
        uploaded = 0
        for rel, signature in self._scan():
            if rel == JOURNAL_FILE or self._sent.get(rel) == signature:
                continue
            try:
                with open_program_file(self.run_dir / rel) as source:
                    self._put(rel, source)
            except (FileNotFoundError, ProgramFileError):
                continue  # replaced or removed since the scan: the next sync sees it
            self._sent[rel] = signature
            uploaded += 1
            self.stats.bytes += signature[0]
        if journal is not None and self._sent.get(JOURNAL_FILE) != journal[1]:
            self._put(JOURNAL_FILE, journal[0])
            self._sent[JOURNAL_FILE] = journal[1]
            uploaded += 1
            self.stats.bytes += len(journal[0])
        self.stats.syncs += 1
        self.stats.files += uploaded
        self.stats.seconds += time.perf_counter() - started
        return uploaded

    def _read_journal(self) -> tuple[bytes, tuple[int, int]] | None:
        path = self.run_dir / JOURNAL_FILE
        try:
            with open(path, "rb") as fh:
                st = os.fstat(fh.fileno())
                return fh.read(), (st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            return None

    def _scan(self):
        """``(relative path, (size, mtime_ns))`` of every mirrored regular file (see the module)."""
        root = str(self.run_dir)
        for folder, dirs, files in os.walk(root):  # never follows a linked folder
            rel_folder = os.path.relpath(folder, root)
            parts = [] if rel_folder == "." else rel_folder.split(os.sep)
            if len(parts) == 2 and parts[0] == NODES_DIR:
                dirs[:] = [d for d in dirs if d not in SKIPPED_NODE_DIRS]
            for name in files:
                if name.startswith(".") and name.endswith(".tmp"):
                    continue
                path = os.path.join(folder, name)
                try:
                    st = os.lstat(path)
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    yield "/".join([*parts, name]), (st.st_size, st.st_mtime_ns)

    def _put(self, rel: str, source) -> None:
        put_object(self.target, rel, source, self._made_dirs)

def put_object(target: Store, rel: str, source: bytes | BinaryIO, made_dirs: set[str] | None = None) -> None:
    """Write ``source`` (bytes or a binary file) to ``target/rel``: through a temporary name and a
    rename on a local store (a reader never sees half a file), as one object elsewhere (an S3
    put is whole or nothing). ``made_dirs`` remembers the folders already made."""
    fs, path = target.fs, target.path(rel)
    parent = path.rsplit("/", 1)[0]
    if made_dirs is None or parent not in made_dirs:
        fs.makedirs(parent, exist_ok=True)
        if made_dirs is not None:
            made_dirs.add(parent)
    write_path = f"{parent}/.{rel.rsplit('/', 1)[-1]}.{uuid.uuid4().hex}.tmp" if target.is_local else path
    with fs.open(write_path, "wb") as out:
        if isinstance(source, bytes):
            out.write(source)
        else:
            shutil.copyfileobj(source, out)
    if write_path != path:
        os.replace(write_path, path)


def mirror_run(run_dir: Path, store: Store | None) -> RunMirror | None:
    """Start mirroring ``run_dir`` to ``STORE/runs/<run_dir's name>``; None without a store, or
    when ``run_dir`` is the store's own copy (a run resumed in place in a directory store)."""
    if store is None:
        return None
    target = store.run(Path(run_dir).name)
    if target.is_local and Path(target.root).resolve() == Path(run_dir).resolve():
        return None
    return RunMirror(run_dir, target).start()
