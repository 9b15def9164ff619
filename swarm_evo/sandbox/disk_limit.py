"""The disk limit of one execution (issue 18; config ``sandbox.disk_limit_mb``).

A program may fill only so much of the host's disk. Two mechanisms, on both backends:

* **One file**: ``RLIMIT_FSIZE`` (local: the supervisor's ``fsize_bytes``; Docker: the
  ``fsize`` ulimit) = the limit. A write past it fails with ``EFBIG`` (Python ignores
  ``SIGXFSZ``: ``OSError: [Errno 27] File too large``); a non-Python process is killed by
  ``SIGXFSZ``. Sparse files count by their size here, so a ``truncate(10 GB)`` stops too.
* **The node directory**: a :class:`DiskWatcher` thread of the run process measures the space
  the directory takes (:func:`disk_usage_bytes`) while the program runs and stops every process
  of it once the execution has added more than the limit; the directory is measured again
  afterwards. The next measurement comes before the space left could be filled at
  :data:`ASSUMED_WRITE_RATE` (or the measured rate, if higher), every :data:`FAST_INTERVAL` s
  at the closest, so the overshoot is about what the program writes in that interval plus the
  time it takes to stop it (tests/test_hostile_disk.py measures it).

Either way the result is the program's failure :data:`DISK_LIMIT_ERROR` with one line naming
``sandbox.disk_limit_mb`` (:func:`classify_disk_limit`). Scratch space outside the directory
(``/tmp``, ``/dev/shm``) is a size-limited tmpfs on both backends, and the rest of the host is
read-only to programs.
"""

from __future__ import annotations

import logging
import os
import signal
import stat
import threading
import time
from pathlib import Path
from typing import Callable

from swarm_evo.sandbox.base import INPUT_DIR, ExecutionResult
from swarm_evo.sandbox.failure import killed_by_signal

DEFAULT_DISK_LIMIT_MB = 4096
"""Default ``sandbox.disk_limit_mb``: space (MiB) one execution may fill in its node directory."""

DISK_LIMIT_ERROR = "DiskLimitError"
"""``exc_type`` of an execution stopped at the disk limit."""

MAX_INTERVAL = 0.5
"""Longest time (s) between two measurements of the node directory."""

FAST_INTERVAL = 0.005
"""Shortest time (s) between two measurements (close to the limit): the overshoot is about what
a program writes in this time (~25 MiB at 5 GB/s) plus while it is being stopped. A walk of a
node directory of a few dozen files takes ~50 µs, so even this pace costs ~1 % of a CPU."""

ASSUMED_WRITE_RATE = 8 * 1024**3
"""Bytes/s the watcher assumes a program may write (page-cache speed: 1 MiB writes measured
5.5 GB/s on a 2-CPU host) when it has not measured more: the next measurement comes before
half the space left could be filled at that rate (with 4096 MiB left: every 0.25 s; with
80 MiB or less left: every :data:`FAST_INTERVAL`, or 5 × the walk's duration if longer)."""

WALK_COST_FACTOR = 5.0
"""The watcher waits at least this many times its last measurement's duration, so that a
directory of many files costs at most ~1/5 of a CPU."""

_MIB = 1024 * 1024

log = logging.getLogger(__name__)


def disk_usage_bytes(workdir: Path) -> int:
    """Bytes the files under ``workdir`` take: each file's apparent size or its allocated blocks
    (``st_blocks`` × 512, like ``du``), whichever is larger.

    Never follows a symlink; the top-level ``input`` (the read-only public data, a link or a
    mount) is not counted. Entries that vanish or cannot be read during the walk are skipped.
    A sparse file counts by its apparent size (issue 40, item 7): everything that reads the
    directory afterwards (the hand-in, the run store's mirror, a resume's fetch) sees that size.
    """
    total = 0
    stack = [(os.fspath(workdir), True)]
    while stack:
        path, top = stack.pop()
        try:
            entries = os.scandir(path)
        except OSError:
            continue
        with entries:
            for entry in entries:
                if top and entry.name == INPUT_DIR:
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                # a sparse file counts by its apparent size: it is read, copied, uploaded and
                # fetched at that size (issue 40, item 7: 50 sparse files of 4 GiB took no blocks)
                total += max(st.st_blocks * 512, st.st_size if stat.S_ISREG(st.st_mode) else 0)
                if stat.S_ISDIR(st.st_mode):
                    stack.append((entry.path, False))
    return total


class DiskWatcher:
    """Measure a node directory while its program runs; stop the program past the limit.

    Use as a context manager around the execution::

        with DiskWatcher(workdir, limit_bytes, on_exceed=stop_program) as watcher:
            ...run...
        watcher.tripped, watcher.peak_bytes

    The limit applies to what the execution adds: the directory is measured when the watcher
    is made (before the program starts), so files an earlier execution left there (a failed
    attempt the debug chain repairs in the same directory) do not count against the next.

    Args:
        workdir: the node directory (measured with :func:`disk_usage_bytes`).
        limit_bytes: the limit (bytes); growth above it calls ``on_exceed`` once.
        on_exceed: stops every process of the program (called from the watcher's thread).

    Attributes:
        tripped: ``on_exceed`` was called.
        tripped_at: when (``time.monotonic()``) it was called, or None.
        baseline_bytes: usage when the watcher was made (bytes).
        peak_bytes: the largest usage measured (bytes), the final measurement included.
    """

    def __init__(self, workdir: Path, limit_bytes: int, on_exceed: Callable[[], None]) -> None:
        self.workdir = Path(workdir)
        self.limit_bytes = int(limit_bytes)
        self.on_exceed = on_exceed
        self.tripped = False
        self.tripped_at: float | None = None
        self.baseline_bytes = disk_usage_bytes(self.workdir)
        self.peak_bytes = self.baseline_bytes
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="sandbox-disk-watcher", daemon=True)

    def __enter__(self) -> "DiskWatcher":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        self.measure()

    def measure(self) -> int:
        """Measure the directory now; update ``peak_bytes``; the usage in bytes."""
        usage = disk_usage_bytes(self.workdir)
        self.peak_bytes = max(self.peak_bytes, usage)
        return usage

    def written(self, usage: int | None = None) -> int:
        """Bytes added to the directory since the watcher was made (``usage`` or the peak)."""
        return max(0, (self.peak_bytes if usage is None else usage) - self.baseline_bytes)

    def _watch(self) -> None:
        previous: tuple[float, int] | None = None
        while not self._done.is_set():
            started = time.monotonic()
            usage = self.measure()
            if self.written(usage) > self.limit_bytes:
                self.tripped, self.tripped_at = True, time.monotonic()
                try:
                    self.on_exceed()
                except Exception:  # noqa: BLE001 - a thread: nobody else would see it
                    log.exception("could not stop the program in %s at the disk limit", self.workdir)
                return
            cost = time.monotonic() - started
            rate = ASSUMED_WRITE_RATE
            if previous is not None and usage > previous[1]:
                rate = max(rate, (usage - previous[1]) / max(1e-6, started - previous[0]))
            previous = (started, usage)
            # look again before the limit can be reached at that rate
            wait = min(MAX_INTERVAL, (self.limit_bytes - self.written(usage)) / rate / 2)
            self._done.wait(max(FAST_INTERVAL, WALK_COST_FACTOR * cost, wait))


def classify_disk_limit(
    result: ExecutionResult, limit_mb: int, watcher: DiskWatcher, deadline: float | None = None
) -> ExecutionResult:
    """``result`` as a :data:`DISK_LIMIT_ERROR` when the program passed the disk limit, else unchanged.

    Passed means: the watcher stopped it, the directory grew by more than the limit (final
    measurement), or a file outgrew ``RLIMIT_FSIZE`` (``exc_info``, the last traceback or
    stderr line, says ``File too large`` or ``SIGXFSZ``, or the program was killed by
    ``SIGXFSZ``: exit code -25 locally, 153 in Docker). Captured output is kept.

    Precedence with the timeout: a stop by the watcher before ``deadline`` (monotonic time the
    backend's timeout fires; None: any time) is not a timeout, so ``timed_out`` becomes False.
    When the timeout fired first (``result.timed_out`` and no earlier stop), a directory found
    over the limit is still the disk-limit failure, but ``timed_out`` stays True and
    ``exc_info`` says the time limit stopped it; a timed-out program that stayed within the
    limit stays a ``TimeoutError``.

    Args:
        result: the backend's classified result.
        limit_mb: ``sandbox.disk_limit_mb`` (MiB), named in ``exc_info``.
        watcher: the execution's watcher, exited (its final measurement done).
        deadline: when the backend's timeout fires (``time.monotonic()``), or None.
    """
    limit_bytes = limit_mb * _MIB
    too_large = False
    if result.exc_type is not None and not watcher.tripped:
        info = result.exc_info or ""
        too_large = ("File too large" in info or "SIGXFSZ" in info
                     or killed_by_signal(result.exit_code) == signal.SIGXFSZ)
    over = not too_large and (watcher.tripped or watcher.written() > limit_bytes)
    if not (over or too_large):
        return result
    stopped_first = watcher.tripped and (deadline is None or watcher.tripped_at is None
                                         or watcher.tripped_at < deadline)
    timed_out = result.timed_out and not stopped_first
    if over:
        by = "by its time limit " if timed_out else ""
        info = (
            f"the program wrote {watcher.written() / _MIB:,.0f} MiB in its directory, over "
            f"sandbox.disk_limit_mb = {limit_mb:,} MiB, and was stopped {by}"
            "(write less, or raise sandbox.disk_limit_mb)"
        )
    else:
        info = (
            f"a file outgrew sandbox.disk_limit_mb = {limit_mb:,} MiB (File too large), and the "
            "program failed (write less, or raise sandbox.disk_limit_mb)"
        )
    return result.model_copy(update={"exc_type": DISK_LIMIT_ERROR, "exc_info": info, "timed_out": timed_out})
