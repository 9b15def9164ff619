"""A process limit per local execution (issue 53, item 9; config ``sandbox.pids_limit``).

``RLIMIT_NPROC`` counts every process and thread of the program's *user*: as root the local
backend runs every program as ``nobody``, so the executions running at once share one count,
and a program that forks up to its limit makes an innocent program beside it fail its next
``fork`` (or thread start) with ``EAGAIN``. The kernel's pids controller counts one cgroup's
tasks instead: each execution gets ``pids.max`` = ``pids_limit`` (+ :data:`SUPERVISOR_TASKS`
for the supervisor and the namespace's init) in a cgroup of its own, made where its memory
cgroup is made (:mod:`.cgroup_home`: v1's ``pids`` hierarchy, or v2's one cgroup holding both
limits), and joined by the supervisor before it forks. Processes and threads past the limit
fail with ``EAGAIN`` (Python: ``BlockingIOError`` / ``RuntimeError: can't start new thread``);
the node's error then names ``sandbox.pids_limit`` (:meth:`ExecutionPids.classify`, from the
cgroup's ``pids.events`` counter). Where no pids cgroup can be made, ``RLIMIT_NPROC`` stays
(the processes the user already has + ``pids_limit``; not enforced for root), with one
warning per run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from swarm_evo.sandbox.base import ExecutionResult, SandboxError
from swarm_evo.sandbox.cgroup_home import cgroup_home, new_cgroup, read_counter, remove_cgroup, write_file
from swarm_evo.sandbox.memory_cgroup import ExecutionMemory

SUPERVISOR_TASKS = 2
"""Tasks of an execution that are not the program's: the supervisor and the PID namespace's
init; added to ``pids_limit`` so that the program and its descendants get all of it."""


class ExecutionPids:
    """The process limit of one local execution: ``pids.max`` in a pids cgroup where this
    process has a :func:`.cgroup_home.cgroup_home` for ``pids`` (in ``memory``'s execution
    cgroup when both controllers share a v2 hierarchy), else ``warn`` (called with one line; the
    caller warns once per run) and :attr:`rlimit_nproc` True.

    Args:
        limit: processes and threads the program may have at once (``sandbox.pids_limit``).
        warn: called once with the reason when no pids cgroup can be had.
        memory: the execution's memory limit, made first (its cgroup is reused on v2).

    Raises (constructor):
        SandboxError: a pids cgroup home exists but the execution's cgroup could not be made.
    """

    def __init__(self, limit: int, warn: Callable[[str], None], memory: ExecutionMemory) -> None:
        self.limit = int(limit)
        self.path: Path | None = None
        self._own = False  # whether self.path is ours to remove (not the memory cgroup)
        self._hits: int | None = None
        home = cgroup_home("pids")
        if isinstance(home, str):
            warn(f"no pids cgroup ({home}): sandbox.pids_limit ({self.limit}) bounds the processes of the "
                 "programs' user (RLIMIT_NPROC, shared by the programs running at once; none for root), not "
                 "each execution's")
            return
        shared = memory.cgroup
        try:
            if shared is not None and shared.home.version == 2 and shared.home.path == home.path:
                self.path = shared.path
            else:
                self.path, self._own = new_cgroup(home), True
            write_file(self.path / "pids.max", str(self.limit + SUPERVISOR_TASKS))
        except OSError as exc:
            self.close()
            raise SandboxError(f"cannot make the execution's pids cgroup in {home.path}: {exc}") from exc

    @property
    def rlimit_nproc(self) -> bool:
        """True when no cgroup bounds the execution: the supervisor sets ``RLIMIT_NPROC`` instead."""
        return self.path is None

    @property
    def procs_file(self) -> str | None:
        """The pids cgroup's ``cgroup.procs`` for the supervisor to join, or None (no cgroup, or the
        memory cgroup's own, which it joins anyway)."""
        return str(self.path / "cgroup.procs") if self._own else None

    def limit_hits(self) -> int:
        """Forks and thread starts refused at the limit (``pids.events``: ``max``); 0 without a cgroup.
        Read once the execution ended; the answer is kept."""
        if self._hits is None:
            self._hits = read_counter(self.path, "pids.events", "max") if self.path is not None else 0
        return self._hits

    def classify(self, result: ExecutionResult) -> ExecutionResult:
        """``result`` with a line naming ``sandbox.pids_limit`` added to its error when the program
        failed and the kernel refused it a process or thread at the limit; else unchanged."""
        if result.ok or self.limit_hits() == 0:
            return result
        note = (f"the program reached sandbox.pids_limit = {self.limit} processes and threads: the kernel refused "
                f"{self.limit_hits()} fork or thread start(s) (EAGAIN); use fewer worker processes or threads "
                "(n_jobs), or raise sandbox.pids_limit")
        info = f"{result.exc_info}\n{note}" if result.exc_info else note
        return result.model_copy(update={"exc_info": info})

    def close(self) -> None:
        """Read the counter and remove the cgroup when it is ours (the execution's processes are gone)."""
        if self.path is not None:
            self.limit_hits()
            if self._own:
                remove_cgroup(self.path)
