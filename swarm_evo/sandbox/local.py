"""Local-process sandbox backend: a fresh Python process per execution (SPEC §10).

The program runs as ``python solution.py`` with the node directory as cwd, in its own session
and process group (``start_new_session=True``) so that a timeout kills it *and* every child it
spawned (SIGKILL to the group). stdout/stderr go to files in the node directory and are read
back bounded; the environment is scrubbed of secrets; an optional address-space limit
(``RLIMIT_AS``) turns runaway allocations into ``MemoryError``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping

from swarm_evo.sandbox.base import (
    DEFAULT_MAX_OUTPUT_BYTES,
    SOLUTION_FILE,
    STDERR_FILE,
    STDOUT_FILE,
    ExecutionResult,
    SandboxError,
    build_result,
    prepare_workdir,
    scrub_env,
)

# Sets RLIMIT_AS and then replaces itself with the real interpreter running solution.py, so
# the limit applies without a preexec_fn (which is unsafe when the caller runs threads).
_LIMIT_LAUNCHER = (
    "import os, resource, sys\n"
    "limit = int(sys.argv[1])\n"
    "resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
    "os.execv(sys.executable, [sys.executable] + sys.argv[2:])\n"
)


class LocalSandbox:
    """Run programs as local processes (the embedded default backend of SPEC §10).

    Args:
        max_output_bytes: cap on each of stdout, stderr and term_out kept in the result; the
            files on disk keep everything the program wrote.
        memory_limit_mb: address-space limit (``RLIMIT_AS``, MiB) for the program, or None.
            Note that address space exceeds resident memory (threads, mmaps); leave headroom.
        python: interpreter that runs the program (default: the current one).
        num_threads: BLAS/OpenMP thread counts exported to the program (default: CPU count;
            variables already set in the environment are kept).
        extra_env: variables added after scrubbing (e.g. ``CUDA_VISIBLE_DEVICES``).

    Thread-safe: parallel ``execute`` calls with different workdirs do not interfere.
    Programs see the host's GPUs directly; there is nothing to share out (``gpu_limit`` None).
    """

    gpu_limit: str | None = None

    def __init__(
        self,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        memory_limit_mb: int | None = None,
        python: str = sys.executable,
        num_threads: int | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        if max_output_bytes < 1024:
            raise ValueError("max_output_bytes must be at least 1024")
        self.max_output_bytes = int(max_output_bytes)
        self.memory_limit_mb = memory_limit_mb
        self.python = python
        self.num_threads = num_threads
        self.extra_env = dict(extra_env or {})

    def command(self) -> list[str]:
        """The argv that runs ``solution.py`` (with the memory-limit launcher when set)."""
        if self.memory_limit_mb:
            limit = int(self.memory_limit_mb) * 1024 * 1024
            return [self.python, "-c", _LIMIT_LAUNCHER, str(limit), SOLUTION_FILE]
        return [self.python, SOLUTION_FILE]

    def execute(self, code: str, workdir: Path, public_dir: Path, timeout: float) -> ExecutionResult:
        """Run ``code`` as ``workdir/solution.py`` for at most ``timeout`` seconds.

        Creates ``input`` (symlink to ``public_dir``; an existing ``input`` is kept),
        ``working/`` and ``submission/``; writes ``stdout.txt``/``stderr.txt`` in ``workdir``.
        At the timeout the whole process group gets SIGKILL. After a normal exit, leftover
        processes of the group (background children) are killed too.

        Raises:
            SandboxError: the interpreter cannot be started or the workdir prepared.
        """
        workdir = Path(workdir).resolve()
        prepare_workdir(code, workdir, public_dir)
        env = scrub_env(num_threads=self.num_threads, extra=self.extra_env)
        timed_out = False
        start = time.monotonic()
        with open(workdir / STDOUT_FILE, "wb") as out, open(workdir / STDERR_FILE, "wb") as err:
            try:
                proc = subprocess.Popen(
                    self.command(),
                    cwd=workdir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                    close_fds=True,
                )
            except OSError as exc:
                raise SandboxError(f"cannot start {self.python!r}: {exc}") from exc
            try:
                proc.wait(timeout=max(0.0, float(timeout)))
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc.pid)
                proc.wait()
            except BaseException:
                # Caller interrupted (KeyboardInterrupt, flow cancellation): never leak processes.
                _kill_group(proc.pid)
                proc.wait()
                raise
            else:
                _kill_group(proc.pid)  # reap background children left behind
        exec_time = time.monotonic() - start
        return build_result(
            workdir,
            exit_code=proc.returncode,
            exec_time=exec_time,
            timed_out=timed_out,
            timeout=timeout,
            max_output_bytes=self.max_output_bytes,
        )


def _kill_group(pgid: int) -> None:
    """SIGKILL every process of group ``pgid``; a group that is already gone is fine."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
