"""The run process's side of one supervised execution (issue 43): the one subprocess runner.

:func:`run_supervised` starts the supervisor (:mod:`swarm_evo.sandbox.supervisor`, run by path
with ``python -I -S``) on a command, pumps its standard output and error into bounded
captures, reads its one JSON report from a pipe, and makes sure nothing outlives the call:
the supervisor (and with it the program's whole tree) is killed ``BACKSTOP_SECONDS`` after the
timeout if it has not reported, at the disk limit (:class:`~swarm_evo.sandbox.disk_limit.DiskWatcher`),
at the first OOM kill of the execution's memory cgroup, and when the caller is interrupted.

The local backend (:class:`~swarm_evo.sandbox.local.LocalSandbox`) runs ``python solution.py``
through it; a backend that wraps a command (a container runtime started as a process, e.g.
``apptainer exec IMAGE python solution.py``) passes its own argv in ``cfg["argv"]`` (or
subclasses ``LocalSandbox`` and overrides ``command()``) instead of a Popen, timeout and kill
loop of its own.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from swarm_evo.sandbox.base import SandboxError, SandboxUnavailableError
from swarm_evo.sandbox.confinement import cannot_confine
from swarm_evo.sandbox.disk_limit import DiskWatcher
from swarm_evo.sandbox.memory_cgroup import ExecutionMemory
from swarm_evo.sandbox.output import OutputCapture, pump
from swarm_evo.sandbox.preload import Spawned
from swarm_evo.sandbox.preload import spawn as preload_spawn

SUPERVISOR = Path(__file__).with_name("supervisor.py")
"""The supervisor script (standard library only), run by path with the sandbox interpreter."""

BACKSTOP_SECONDS = 4.0
"""The run process kills the supervisor this long after the program's timeout if it has not
reported (the supervisor itself kills the program at the timeout)."""


@dataclass
class Supervised:
    """What one supervised execution left: the supervisor's ``report`` (``status``: raw wait
    status or None, ``exec_time`` s, ``timed_out``, ``mode``, ``warnings``), the captures of
    standard output and error, the monotonic start, and the disk watcher (tripped or not)."""

    report: dict
    out: OutputCapture
    err: OutputCapture
    started: float
    watcher: DiskWatcher


def run_supervised(python: str, cfg: dict, workdir: Path, env: dict, timeout: float, max_log_bytes: int,
                   disk_limit_bytes: int, memory: ExecutionMemory, preload: tuple[str, ...] = ()) -> Supervised:
    """Run the supervisor with ``python`` on ``cfg`` (its config: ``argv`` of the command,
    limits, namespaces; ``status_fd`` is added here) in ``workdir`` with environment ``env``.

    ``preload``: modules a pre-imported program server of ``python`` holds (:mod:`.preload`);
    when one serves, the supervisor is forked from it and runs ``argv`` (``python SCRIPT``) in
    that interpreter; else (none given, or no server) it is started as a new process.

    A supervisor stopped by the backstop, the disk limit or the OOM watch gets a report of its
    own (``status`` None; ``timed_out`` True for the backstop only).

    Raises:
        SandboxError: the interpreter cannot be started, or the supervisor failed (namespace
            setup, exec of the command): the message has its error and standard error.
        SandboxUnavailableError: programs cannot be confined here
            (:func:`~swarm_evo.sandbox.confinement.cannot_confine`).
    """
    status_r, status_w = os.pipe()
    cfg = {**cfg, "status_fd": status_w}
    # Past the disk limit: SIGTERM the supervisor, which ends the whole program tree (namespace
    # mode: its init is killed; subreaper mode: the wait loop kills the tree). Made before the
    # program starts: it measures what the directory holds already.
    watcher = DiskWatcher(workdir, disk_limit_bytes, on_exceed=lambda: _stop(proc, signal.SIGTERM))
    started = time.monotonic()
    try:
        proc = preload_spawn(python, preload, {k: v for k, v in cfg.items() if k not in ("status_fd", "parent_pid")},
                             env, workdir, status_w, cfg.get("memory_bytes")) if preload else None
        if proc is None:
            proc = subprocess.Popen(
                [python, "-I", "-S", str(SUPERVISOR), json.dumps(cfg)], cwd=workdir, env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                close_fds=True, pass_fds=(status_w,),
            )
    except OSError as exc:
        os.close(status_r)
        raise SandboxError(f"cannot start {python!r}: {exc}") from exc
    finally:
        os.close(status_w)
    out, err = OutputCapture(max_log_bytes), OutputCapture(max_log_bytes)
    threads = [pump(proc.stdout, out), pump(proc.stderr, err)]
    backstop = False
    try:
        with watcher, memory.watch(on_oom=lambda: _stop(proc, signal.SIGTERM)):
            report_bytes, backstop = _read_report(status_r, started + timeout + BACKSTOP_SECONDS)
            if backstop:
                _stop(proc, signal.SIGKILL)
            proc.wait()
    except BaseException:
        _end(proc)  # caller interrupted (KeyboardInterrupt, flow cancellation): never leak processes
        raise
    finally:
        os.close(status_r)
        for t in threads:
            t.join(timeout=10)
        if isinstance(proc, Spawned):
            proc.close()
    report = _parse_report(report_bytes)
    if backstop:
        report = {"status": None, "exec_time": time.monotonic() - started, "timed_out": True}
    elif (watcher.tripped or memory.oom_killed) and not (report and report.get("status") is not None):
        # stopped at the disk limit or the first OOM kill: the namespace supervisor dies without a report
        report = {"status": None, "exec_time": time.monotonic() - started, "timed_out": False}
    elif report is None or report.get("error"):
        detail = (report or {}).get("error") or f"no report (exit {proc.returncode})"
        if report and report.get("unconfinable"):
            raise SandboxUnavailableError(cannot_confine(detail.split("Unconfinable: ", 1)[-1]))
        raise SandboxError(f"local sandbox failed: {detail}; stderr: {err.data()[-2000:].decode(errors='replace')}")
    return Supervised(report, out, err, started, watcher)


def _end(proc: subprocess.Popen | Spawned) -> None:
    """SIGTERM the supervisor, SIGKILL it after 3 s, and reap it."""
    _stop(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        _stop(proc, signal.SIGKILL)
        proc.wait()


def _read_report(fd: int, deadline: float) -> tuple[bytes, bool]:
    """Read the supervisor's report until EOF or ``deadline`` (monotonic); ``(data, late)``."""
    chunks = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b"".join(chunks), True
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)


def _parse_report(data: bytes) -> dict | None:
    try:
        report = json.loads(data) if data else None
    except ValueError:
        return None
    return report if isinstance(report, dict) else None


def _stop(proc: subprocess.Popen | Spawned, sig: int) -> None:
    """Signal the supervisor's process group (its PID-namespace init and the program die with it)."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
