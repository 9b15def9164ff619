"""A finished run judged: its exception (last traceback line, signal, timeout, out of memory) and
the :class:`~swarm_evo.sandbox.base.ExecutionResult` built from it."""

from __future__ import annotations

import math
import re
import signal
from pathlib import Path

from .base import DEFAULT_MAX_OUTPUT_BYTES, ExecutionResult, STDERR_FILE, STDOUT_FILE
from .output import OutputCapture, combine_output, write_output_file


_EXC_LINE = re.compile(
    r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?::(?P<msg>.*))?$"
)
_KNOWN_BARE = {"KeyboardInterrupt", "SystemExit", "StopIteration", "GeneratorExit"}
_OOM_TEXT = re.compile(
    r"MemoryError|Cannot allocate memory|std::bad_alloc|out of memory|Killed\s*$", re.I | re.M
)


def _looks_like_exception(line: str) -> re.Match[str] | None:
    m = _EXC_LINE.match(line)
    if not m:
        return None
    last = m.group("name").rsplit(".", 1)[-1]
    if m.group("msg") is None and last not in _KNOWN_BARE and not re.search(r"(Error|Exception)$", last):
        return None
    if not last[:1].isupper() and not last.startswith("_"):
        return None
    return m


def last_exception_line(stderr: str) -> str | None:
    """The final exception line of the last Python traceback in ``stderr``, or None.

    Handles ordinary tracebacks (last ``Traceback (most recent call last):`` block, first
    unindented ``Name: message`` line after it), chained exceptions, and compile-time errors
    (``SyntaxError``/``IndentationError``, printed without a ``Traceback`` header).
    """
    lines = stderr.splitlines()
    header = None
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Traceback (most recent call last):"):
            header = i
            break
    if header is not None:
        for line in lines[header + 1 :]:
            if line and not line[0].isspace() and _looks_like_exception(line):
                return line.strip()
    # No traceback header: compile errors print `  File "...", line N` then the error.
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        if line and not line[0].isspace() and _looks_like_exception(line):
            name = line.split(":", 1)[0].rsplit(".", 1)[-1]
            before = "\n".join(lines[max(0, i - 6) : i])
            if name in {"SyntaxError", "IndentationError", "TabError"} or 'File "' in before:
                return line.strip()
    return None


def exception_name(line: str) -> str:
    """Class name of an exception line: ``"pandas.errors.ParserError: x"`` -> ``"ParserError"``."""
    m = _EXC_LINE.match(line.strip())
    name = m.group("name") if m else line.split(":", 1)[0].strip()
    return name.rsplit(".", 1)[-1]


def signal_name(signum: int) -> str:
    """``9`` -> ``"SIGKILL"``; unknown numbers give ``"signal N"``."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def killed_by_signal(exit_code: int | None) -> int | None:
    """Signal number that killed the process: ``-N`` (subprocess) or ``128+N`` (shell/Docker)."""
    if exit_code is None:
        return None
    if exit_code < 0:
        return -exit_code
    if 128 < exit_code < 128 + 65:
        return exit_code - 128
    return None


def classify_failure(
    exit_code: int | None,
    stderr: str,
    timed_out: bool,
    timeout: float | None = None,
    oom_killed: bool = False,
) -> tuple[str | None, str | None]:
    """``(exc_type, exc_info)`` of an execution (SPEC §10), shared by all backends.

    Rules, first match wins:
      1. ``timed_out`` -> ``"TimeoutError"`` (``exc_info`` states the limit in seconds).
      2. ``oom_killed`` (e.g. Docker's OOMKilled), or a SIGKILL we did not send, or a
         MemoryError-like last traceback line (``MemoryError``, numpy's
         ``_ArrayMemoryError``) -> ``"MemoryError"``.
      3. exit code 0 -> ``(None, None)``.
      4. a traceback in ``stderr`` -> its exception class name (dotted names: last part);
         ``exc_info`` is the last traceback line.
      5. otherwise -> ``"ProcessError"`` with the exit status / signal and the last stderr line.
    """
    if timed_out:
        limit = f"{timeout:g} s" if timeout is not None else "its time limit"
        return "TimeoutError", (
            f"Execution exceeded the time limit of {limit} and was killed with every process it started."
        )
    exc_line = last_exception_line(stderr) if stderr else None
    sig = killed_by_signal(exit_code)
    if oom_killed or sig == signal.SIGKILL:
        reason = "Process was killed by SIGKILL (most likely out of memory)."
        if oom_killed:
            reason = "Process was killed by the out-of-memory killer."
        return "MemoryError", reason
    if exit_code == 0:
        return None, None
    if exc_line is not None:
        name = exception_name(exc_line)
        if "MemoryError" in name:
            return "MemoryError", exc_line
        return name, exc_line
    if stderr and _OOM_TEXT.search(stderr[-4000:]):
        return "MemoryError", _last_nonempty_line(stderr) or "out of memory"
    if sig is not None:
        info = f"Process was killed by {signal_name(sig)} (exit code {exit_code})."
    elif exit_code is None:
        info = "Process did not report an exit status."
    else:
        info = f"Process exited with code {exit_code} without a Python traceback."
    last = _last_nonempty_line(stderr)
    if last:
        info += f" Last stderr line: {last[:500]}"
    return "ProcessError", info


def _last_nonempty_line(text: str) -> str | None:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return None


def make_result(
    stdout: str,
    stdout_cut: bool,
    stderr: str,
    stderr_cut: bool,
    exit_code: int | None,
    exec_time: float,
    timed_out: bool,
    timeout: float | None,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    oom_killed: bool = False,
) -> ExecutionResult:
    """An :class:`ExecutionResult` from bounded stream texts: builds ``term_out`` (bounded to
    ``max_output_bytes``) and classifies the failure (:func:`classify_failure`)."""
    term_out, cut_term = combine_output(stdout, stderr, max_output_bytes)
    exc_type, exc_info = classify_failure(exit_code, stderr, timed_out, timeout, oom_killed)
    if not math.isfinite(exec_time):  # pragma: no cover - defensive
        exec_time = 0.0
    return ExecutionResult(
        stdout=stdout,
        stderr=stderr,
        term_out=term_out,
        exit_code=exit_code,
        exc_type=exc_type,
        exc_info=exc_info,
        exec_time=exec_time,
        timed_out=timed_out,
        output_truncated=stdout_cut or stderr_cut or cut_term,
    )


def result_from_captures(
    workdir: Path,
    stdout: OutputCapture,
    stderr: OutputCapture,
    exit_code: int | None,
    exec_time: float,
    timed_out: bool,
    timeout: float | None,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    oom_killed: bool = False,
    owner: tuple[int, int] | None = None,
) -> ExecutionResult:
    """Write both captures to ``workdir/stdout.txt``/``stderr.txt`` (:func:`write_output_file`)
    and return the result (:func:`make_result`) with each stream bounded to ``max_output_bytes``.

    Raises:
        SandboxError: a log file cannot be written.
    """
    write_output_file(workdir, STDOUT_FILE, stdout.data(), owner)
    write_output_file(workdir, STDERR_FILE, stderr.data(), owner)
    out, out_cut = stdout.bounded(max_output_bytes)
    err, err_cut = stderr.bounded(max_output_bytes)
    return make_result(out, out_cut, err, err_cut, exit_code, exec_time, timed_out, timeout,
                       max_output_bytes, oom_killed)
