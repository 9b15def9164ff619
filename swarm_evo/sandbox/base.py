"""Execution sandbox: the shared interface (SPEC §10).

A sandbox runs one generated program (``solution.py``) in a node directory laid out as in
docs/CONTRACTS.md::

    <workdir>/solution.py       the program
    <workdir>/input/            the competition's public data (symlink or read-only mount)
    <workdir>/working/          scratch space
    <workdir>/submission/       where the program writes submission.csv
    <workdir>/stdout.txt        captured stdout (bounded: head, marker, tail)
    <workdir>/stderr.txt        captured stderr (bounded the same way)

and reports an :class:`ExecutionResult`. Backends (local process, Docker container) share the
helpers of the sibling modules, so that both report identical results for identical programs:
:mod:`.workdir` (layout, hand-over to the unprivileged program user), :mod:`.env_scrub`
(environment without secrets), :mod:`.output` (bounded capture of output streams) and
:mod:`.failure` (exception classification, building the result).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict


SOLUTION_FILE = "solution.py"
STDOUT_FILE = "stdout.txt"
STDERR_FILE = "stderr.txt"
INPUT_DIR = "input"
WORKING_DIR = "working"
SUBMISSION_DIR = "submission"

DEFAULT_MAX_OUTPUT_BYTES = 1_000_000
"""Default cap (bytes) on each of stdout, stderr and term_out kept in memory."""

LOG_FILE_FACTOR = 10
"""Default cap of each of ``stdout.txt``/``stderr.txt`` on disk: this many ``max_output_bytes``."""

NOBODY_UID = 65534
NOBODY_GID = 65534
"""User and group of programs when the orchestrator runs as root (``nobody:nogroup``)."""


def host_memory_mb() -> int:
    """Physical memory of this host in MiB (``sysconf``)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)


HOST_MEMORY_SHARE = 0.8
"""Share of host memory the programs may use together; the rest is for the run process
(~0.5 GB), its Prefect API and the OS, so the programs hit their own limit before the host's
OOM killer has to choose."""


def default_memory_limit_mb(parallel_workers: int = 1) -> int:
    """Memory per program when none is configured (SPEC §10, ``sandbox.memory_limit_mb``; both
    backends): ``HOST_MEMORY_SHARE`` × host memory / parallel workers, in MiB, at least 256."""
    return max(256, int(host_memory_mb() * HOST_MEMORY_SHARE) // max(1, int(parallel_workers)))



class RunSettings(Protocol):
    """What the sandbox's builders read of a run's configuration: its ``sandbox`` section (the
    backend, its limits, ``gpus``, ``slots_per_gpu``) and its ``search`` section
    (``parallel_workers``). :class:`swarm_evo.config.RunConfig` is one; the sandbox names this
    protocol instead of importing the config, which sits above it (no import circle, issue 55)."""

    sandbox: Any
    search: Any

class SandboxError(RuntimeError):
    """The sandbox itself failed (interpreter missing, workdir not writable, Docker down, ...).

    Raised, never reported as a program failure, so that callers (Prefect tasks) can retry.
    """


class SandboxUnavailableError(SandboxError):
    """The backend cannot run programs at all: daemon down, image missing, no GPU runtime.

    Raised before any step (when the sandbox is built or probed); the message names the fix.
    """


class ExecutionResult(BaseModel):
    """Outcome of one execution of a program (SPEC §10; node fields of SPEC §5).

    Fields:
        stdout, stderr: captured streams, decoded as UTF-8 (invalid bytes replaced), each
            bounded to the backend's ``max_output_bytes`` (head and tail kept, a
            ``[... N bytes truncated ...]`` line in between).
        term_out: stdout then stderr, bounded the same way (what prompts and the node show).
        exit_code: the process exit status; negative ``-N`` when killed by signal N (POSIX
            convention of :mod:`subprocess`); None when it never started or is unknown.
        exc_type: None on success; else an exception class name (``"KeyError"``), or
            ``"TimeoutError"``, ``"MemoryError"`` (OOM / SIGKILL), ``"ProcessError"``
            (non-zero exit without a traceback). See :func:`classify_failure`.
        exc_info: the last traceback line or a one-line reason; None on success.
        exec_time: wall time of the execution in seconds.
        timed_out: the sandbox killed the program at its timeout.
        output_truncated: some captured output was cut to fit the cap.
    """

    model_config = ConfigDict(extra="forbid")

    stdout: str = ""
    stderr: str = ""
    term_out: str = ""
    exit_code: int | None = None
    exc_type: str | None = None
    exc_info: str | None = None
    exec_time: float = 0.0
    timed_out: bool = False
    output_truncated: bool = False

    @property
    def ok(self) -> bool:
        """True when the program exited normally with code 0 (no exception, no timeout)."""
        return self.exc_type is None


@runtime_checkable
class Sandbox(Protocol):
    """The interface every execution backend implements (SPEC §10).

    ``gpu_limit`` names the global concurrency limit an orchestrator must hold around each
    execution (GPUs the Docker host chooses, shared by all its containers), or is None; device
    groups (``sandbox.gpus``) are leased by the sandbox inside ``execute`` (:mod:`.gpus`).
    """

    gpu_limit: str | None

    def execute(self, code: str, workdir: Path, public_dir: Path, timeout: float) -> ExecutionResult:
        """Run ``code`` as ``workdir/solution.py`` with ``workdir`` as cwd; at most ``timeout`` s.

        ``public_dir`` is exposed read-only as ``workdir/input``. Program failures (exceptions,
        timeouts, OOM) are reported in the result; only failures of the sandbox itself raise
        :class:`SandboxError`.
        """
        ...
