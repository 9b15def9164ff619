"""A memory cgroup per local execution (issue 42, item 4; config ``sandbox.memory_limit_mb``).

``RLIMIT_DATA`` bounds one process: a program that forks (joblib, multiprocessing,
``n_jobs=-1``) gets the limit once per child, files in its private ``/tmp``, ``/var/tmp`` and
``/dev/shm`` (tmpfs, memory) are not counted, and when the host runs out of memory its OOM
killer may pick another step's program. A memory cgroup counts what the whole execution uses:
every process it starts, and the tmpfs pages it writes (the kernel charges them to the cgroup of
the writer). The kernel's OOM killer then acts inside the cgroup only, and the cgroup's own
counter says whether *this* execution had a process killed for memory.

Where the cgroup is made: :mod:`.cgroup_home` (v1 or v2, as root or delegated; else the
per-process ``RLIMIT_DATA`` with one warning per run).

The supervisor joins the cgroup before it forks (``cgroup_procs`` in its config), so nothing of
the execution runs outside it. An :class:`OomWatcher` of the run process stops the whole
execution at its first OOM kill (v1 kills one process; its siblings would go on).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Callable

from swarm_evo.sandbox.base import ExecutionResult, SandboxError
from swarm_evo.sandbox.cgroup_home import CgroupHome, cgroup_home, new_cgroup, read_counter, remove_cgroup, write_file

log = logging.getLogger(__name__)

POLL_SECONDS = 0.1
"""How often an :class:`OomWatcher` reads the cgroup's OOM-kill counter."""


class ExecutionCgroup:
    """One execution's memory cgroup, limited to ``limit_bytes`` (swap included).

    Make it before the supervisor starts, give the supervisor :attr:`procs_file` (it joins
    before forking), read :meth:`oom_kills` afterwards, then :meth:`remove`.

    Raises (constructor):
        OSError: the directory or a limit could not be written.
    """

    def __init__(self, home: CgroupHome, limit_bytes: int) -> None:
        self.home = home
        self.limit_bytes = int(limit_bytes)
        self.path = new_cgroup(home)
        try:
            if home.version == 1:
                write_file(self.path / "memory.limit_in_bytes", str(self.limit_bytes))
                if (self.path / "memory.memsw.limit_in_bytes").exists():  # swap accounted: none beyond the limit
                    write_file(self.path / "memory.memsw.limit_in_bytes", str(self.limit_bytes))
            else:
                write_file(self.path / "memory.max", str(self.limit_bytes))
                if (self.path / "memory.swap.max").exists():
                    write_file(self.path / "memory.swap.max", "0")
                if (self.path / "memory.oom.group").exists():
                    write_file(self.path / "memory.oom.group", "1")
        except OSError:
            self.remove()
            raise

    @property
    def procs_file(self) -> str:
        """``cgroup.procs`` of the cgroup: a process writes its pid there to join."""
        return str(self.path / "cgroup.procs")

    def limit_reached(self) -> bool:
        """Whether the execution's usage reached the limit (v1: the peak ``memory[.memsw].max_usage_in_bytes``
        within a page of it; v2: ``max`` or ``oom`` events in ``memory.events``): an OOM kill without
        it came from the host running out of memory."""
        if self.home.version == 2:
            return self._counter("memory.events", "max") > 0 or self._counter("memory.events", "oom") > 0
        peak = max(self._counter("memory.max_usage_in_bytes", None), self._counter("memory.memsw.max_usage_in_bytes", None))
        return peak >= self.limit_bytes - 4096

    def _counter(self, name: str, key: str | None) -> int:
        return read_counter(self.path, name, key)

    def oom_kills(self) -> int:
        """Processes of this execution the OOM killer killed (v1 ``memory.oom_control``, v2
        ``memory.events``: ``oom_kill``); 0 when the counter cannot be read."""
        return self._counter("memory.oom_control" if self.home.version == 1 else "memory.events", "oom_kill")

    def remove(self) -> None:
        """Remove the cgroup once its processes are gone (:func:`.cgroup_home.remove_cgroup`)."""
        remove_cgroup(self.path)


class OomWatcher:
    """Stop an execution at the first OOM kill in its cgroup (a thread; context manager).

    Args:
        cgroup: the execution's cgroup.
        on_oom: stops every process of the execution (called once, from the watcher's thread).
    """

    def __init__(self, cgroup: ExecutionCgroup, on_oom: Callable[[], None]) -> None:
        self.cgroup = cgroup
        self.on_oom = on_oom
        self.tripped = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="sandbox-oom-watcher", daemon=True)

    def __enter__(self) -> "OomWatcher":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._done.wait(POLL_SECONDS):
            if self.cgroup.oom_kills() > 0:
                self.tripped = True
                try:
                    self.on_oom()
                except Exception:  # noqa: BLE001 - a thread: nobody else would see it
                    log.exception("could not stop the execution in %s after an OOM kill", self.cgroup.path)
                return


_MIB = 1024 * 1024


class ExecutionMemory:
    """The memory limit of one local execution: an :class:`ExecutionCgroup` where this process
    has a :func:`cgroup_home`, else ``warn`` (called with one line; the caller warns once per
    run). Each process keeps ``RLIMIT_DATA`` = the limit either way: one process that allocates
    past it gets Python's ``MemoryError`` with its traceback, as before the cgroup.

    Raises (constructor):
        SandboxError: a cgroup home exists but the execution's cgroup could not be made.
    """

    def __init__(self, limit_mb: int, warn: Callable[[str], None]) -> None:
        self.limit_mb = int(limit_mb)
        self.cgroup: ExecutionCgroup | None = None
        self._counters: tuple[int, bool] | None = None  # (OOM kills, limit reached), read once it ended
        home = cgroup_home()
        if isinstance(home, str):
            warn(f"no memory cgroup ({home}): sandbox.memory_limit_mb ({self.limit_mb} MiB) bounds each process "
                 "(RLIMIT_DATA), not an execution's processes and /tmp, /var/tmp, /dev/shm files together")
            return
        try:
            self.cgroup = ExecutionCgroup(home, self.limit_mb * _MIB)
        except OSError as exc:
            raise SandboxError(f"cannot make the execution's memory cgroup in {home.path}: {exc}") from exc

    @property
    def procs_file(self) -> str | None:
        """The cgroup's ``cgroup.procs`` the supervisor joins first, or None."""
        return self.cgroup.procs_file if self.cgroup is not None else None

    def watch(self, on_oom: Callable[[], None]):
        """A context in which the first OOM kill calls ``on_oom`` (:class:`OomWatcher`)."""
        return OomWatcher(self.cgroup, on_oom) if self.cgroup is not None else contextlib.nullcontext()

    def _ended(self) -> tuple[int, bool]:
        if self._counters is None:
            self._counters = (self.cgroup.oom_kills(), self.cgroup.limit_reached())
        return self._counters

    @property
    def oom_killed(self) -> bool:
        """Whether the OOM killer killed a process of this execution (always False without a
        cgroup). Read once the execution's processes are gone; the answer is kept."""
        return self.cgroup is not None and self._ended()[0] > 0

    def classify(self, result: ExecutionResult) -> ExecutionResult:
        """``result`` judged with the cgroup's counters: an OOM kill makes it ``MemoryError`` with a
        line naming ``sandbox.memory_limit_mb`` (also when the program survived it: it was stopped);
        a ``SIGKILL`` the OOM killer did not send is a ``ProcessError``, not a guessed
        ``MemoryError``. Without a cgroup, unchanged."""
        if self.cgroup is None:
            return result
        if self.oom_killed:
            if self._ended()[1]:
                info = (f"the out-of-memory killer stopped the program: its processes and its /tmp, /var/tmp and "
                        f"/dev/shm files together passed sandbox.memory_limit_mb = {self.limit_mb:,} MiB (use less "
                        "memory or fewer worker processes, or raise sandbox.memory_limit_mb)")
            else:
                info = "the host ran out of memory and its out-of-memory killer stopped the program"
            return result.model_copy(update={"exc_type": "MemoryError", "exc_info": info, "timed_out": False})
        if result.exc_type == "MemoryError" and (result.exc_info or "").startswith("Process was killed by SIGKILL"):
            return result.model_copy(update={"exc_type": "ProcessError", "exc_info": (
                f"Process was killed by SIGKILL (exit code {result.exit_code}), not by the out-of-memory killer.")})
        return result

    def close(self) -> None:
        """Read the counters and remove the cgroup (the execution's processes are gone)."""
        if self.cgroup is not None:
            self._ended()
            self.cgroup.remove()
