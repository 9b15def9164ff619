"""Execution sandbox: the shared interface and the logic every backend reuses (SPEC §10).

A sandbox runs one generated program (``solution.py``) in a node directory laid out as in
docs/CONTRACTS.md::

    <workdir>/solution.py       the program
    <workdir>/input/            the competition's public data (symlink or read-only mount)
    <workdir>/working/          scratch space
    <workdir>/submission/       where the program writes submission.csv
    <workdir>/stdout.txt        captured stdout (bounded: head, marker, tail)
    <workdir>/stderr.txt        captured stderr (bounded the same way)

and reports an :class:`ExecutionResult`. Backends (local process, Docker container) share the
helpers here: workdir preparation and hand-over to the unprivileged program user, environment
scrubbing, bounded capture of output streams and exception classification, so that both
report identical results for identical programs.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import shutil
import signal
import stat
import threading
from contextlib import suppress
from pathlib import Path
from typing import Mapping, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from .safe_read import ProgramFileError, open_program_file

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
    execution (GPUs shared by all containers), or is None.
    """

    gpu_limit: str | None

    def execute(self, code: str, workdir: Path, public_dir: Path, timeout: float) -> ExecutionResult:
        """Run ``code`` as ``workdir/solution.py`` with ``workdir`` as cwd; at most ``timeout`` s.

        ``public_dir`` is exposed read-only as ``workdir/input``. Program failures (exceptions,
        timeouts, OOM) are reported in the result; only failures of the sandbox itself raise
        :class:`SandboxError`.
        """
        ...


# --------------------------------------------------------------------------------------
# Workdir
# --------------------------------------------------------------------------------------


def prepare_workdir(code: str, workdir: Path, public_dir: Path | None, link_input: bool = True) -> Path:
    """Create the node directory layout and write ``solution.py``; return the program path.

    ``workdir/input`` becomes a symlink to ``public_dir`` (absolute) unless something named
    ``input`` already exists there (kept as is) or ``link_input`` is False (Docker mounts it).
    ``working/`` and ``submission/`` are created if missing. Whatever an earlier execution
    left at these names (a FIFO as ``solution.py``, a file as ``working``) is replaced, never
    opened or followed (:func:`write_output_file`).

    Raises:
        SandboxError: the directory cannot be prepared.
    """
    try:
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        program = write_output_file(workdir, SOLUTION_FILE, code.encode("utf-8"))
        inp = workdir / INPUT_DIR
        if link_input and public_dir is not None and not os.path.lexists(inp):
            inp.symlink_to(Path(public_dir).resolve(), target_is_directory=True)
        for name in (WORKING_DIR, SUBMISSION_DIR):
            _ensure_directory(workdir / name)
        return program
    except OSError as exc:  # pragma: no cover - depends on the host
        raise SandboxError(f"cannot prepare workdir {workdir}: {exc}") from exc


def _ensure_directory(path: Path) -> None:
    """``path`` as a real directory: a file, FIFO or link an earlier execution left in its
    place is removed first (never followed)."""
    with suppress(FileNotFoundError):
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
    path.mkdir(exist_ok=True)


def remove_entry(path: Path) -> None:
    """Remove whatever stands at ``path`` (file, FIFO, socket, symlink, directory tree) without
    opening or following it; nothing there is fine.

    Raises:
        OSError: it exists and cannot be removed.
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def hand_over_workdir(workdir: Path, uid: int = NOBODY_UID, gid: int = NOBODY_GID) -> tuple[int, int]:
    """Give ``workdir`` and everything in it (except ``input``) to ``uid:gid``; the old owner.

    Called as root before a program runs as the unprivileged user, so that it can write its
    directory and overwrite files a previous execution left there. Only entries owned by the
    directory's owner are changed, never through a symlink, and never a file with several
    hard links (it may live outside the directory too). A directory still owned by ``uid``
    (its run process died mid-execution) counts as owned by its parent's owner. Undo with
    :func:`take_back_workdir`.

    Raises:
        OSError: ``workdir`` itself cannot be changed (not root).
    """
    workdir = Path(workdir)
    st = workdir.stat()
    owner = (st.st_uid, st.st_gid)
    if st.st_uid == uid:
        # Left handed over by a run process that was killed: the owner is the parent's.
        pst = workdir.parent.stat()
        owner = (pst.st_uid, pst.st_gid)
    os.chown(workdir, uid, gid)
    for root, dirs, files in os.walk(workdir):
        if root == str(workdir):
            dirs[:] = [d for d in dirs if d != INPUT_DIR]
            files = [f for f in files if f != INPUT_DIR]
        for name in dirs + files:
            path = os.path.join(root, name)
            with suppress(OSError):
                est = os.lstat(path)
                if est.st_uid != owner[0] or stat.S_ISLNK(est.st_mode):
                    continue
                if not stat.S_ISDIR(est.st_mode) and est.st_nlink > 1:
                    continue
                os.chown(path, uid, gid, follow_symlinks=False)
    return owner


def take_back_workdir(workdir: Path, owner: tuple[int, int], uid: int = NOBODY_UID) -> None:
    """Return what ``uid`` owns in ``workdir`` (the directory included) to ``owner`` (uid, gid).

    Symlinks are changed themselves, never followed; ``input`` is left alone. Run only once
    every process of the program is gone (nothing can race the walk).
    """
    workdir = Path(workdir)
    ouid, ogid = owner
    with suppress(OSError):
        os.chown(workdir, ouid, ogid, follow_symlinks=False)
    for root, dirs, files in os.walk(workdir):
        if root == str(workdir):
            dirs[:] = [d for d in dirs if d != INPUT_DIR]
        for name in dirs + files:
            path = os.path.join(root, name)
            with suppress(OSError):
                if os.lstat(path).st_uid == uid:
                    os.chown(path, ouid, ogid, follow_symlinks=False)


def remove_escaping_links(workdir: Path, public_dir: Path | None = None) -> list[str]:
    """Delete every symlink under ``workdir`` that resolves outside it; return their paths
    (relative to ``workdir``).

    The host reads files the program wrote (``submission/submission.csv``, ``outputs.json``,
    the auxiliary metrics' inputs) after the execution, as the run's user (root here): a link
    planted by the program (``submission.csv -> /etc/shadow``) would make those readers, and
    so scores, errors and prompts, expose host files. Links that stay inside ``workdir`` are
    kept, and so is ``input`` when it points at ``public_dir`` (the local backend's own link).
    Run only once every process of the program is gone (nothing can race the walk).
    """
    workdir = Path(workdir)
    root = os.path.realpath(workdir)
    allowed_input = os.path.realpath(public_dir) if public_dir is not None else None
    removed = []
    for current, dirs, files in os.walk(workdir):
        for name in dirs + files:
            path = os.path.join(current, name)
            if not os.path.islink(path):
                continue
            target = os.path.realpath(path)
            rel = os.path.relpath(path, workdir)
            if rel == INPUT_DIR and target == allowed_input:
                continue
            if target != root and not target.startswith(root + os.sep):
                with suppress(OSError):
                    os.unlink(path)
                    removed.append(rel)
    return removed


# --------------------------------------------------------------------------------------
# Environment
# --------------------------------------------------------------------------------------

SECRET_NAME_PARTS: tuple[str, ...] = (
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "PRIVATE",
)
"""Any variable whose name contains one of these (case-insensitive) is dropped."""

DROPPED_PREFIXES: tuple[str, ...] = (
    "PREFECT_",
    "LITELLM_",
    "OPENAI_",
    "ANTHROPIC_",
    "AZURE_",
    "AWS_",
    "GOOGLE_",
    "GEMINI_",
    "DEEPSEEK_",
    "HF_",
    "HUGGING",
    "GITHUB_",
    "DOCKER_",
    "KAGGLE_",
    "SWARM_EVO_",
)
"""Variables of services the generated program must not talk to (case-insensitive prefixes)."""

DROPPED_NAMES: frozenset[str] = frozenset(
    {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONINSPECT", "DATABASE_URL", "REDIS_URL"}
)

_URL_WITH_CREDENTIALS = re.compile(r"://[^/\s:@]+:[^/\s@]+@")


def is_secret_env(name: str, value: str = "") -> bool:
    """True when an environment variable must not reach generated code (SPEC §10)."""
    upper = name.upper()
    if upper in DROPPED_NAMES:
        return True
    if any(part in upper for part in SECRET_NAME_PARTS):
        return True
    if any(upper.startswith(prefix) for prefix in DROPPED_PREFIXES):
        return True
    return bool(_URL_WITH_CREDENTIALS.search(value or ""))


def scrub_env(
    env: Mapping[str, str] | None = None,
    num_threads: int | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for a generated program: ``env`` (default ``os.environ``) minus secrets.

    Drops every variable for which :func:`is_secret_env` holds (names containing KEY, TOKEN,
    SECRET, PASSWORD, CREDENTIAL, AUTH, ...; PREFECT_*, provider prefixes; PYTHONPATH and
    friends; values holding ``user:password@`` URLs). Sets ``PYTHONUNBUFFERED=1``,
    ``MPLBACKEND=Agg`` and, unless already set, the BLAS/OpenMP thread counts to
    ``num_threads`` (default: the CPU count). ``extra`` is applied last, unscrubbed (for
    deliberate settings such as ``CUDA_VISIBLE_DEVICES``).
    """
    source = os.environ if env is None else env
    out = {k: v for k, v in source.items() if not is_secret_env(k, v)}
    out["PYTHONUNBUFFERED"] = "1"
    out["PYTHONDONTWRITEBYTECODE"] = "1"
    out.setdefault("MPLBACKEND", "Agg")
    threads = str(max(1, num_threads or os.cpu_count() or 1))
    for name in (
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
    ):
        out.setdefault(name, threads)
    if extra:
        out.update(extra)
    return out


# --------------------------------------------------------------------------------------
# Output bounding
# --------------------------------------------------------------------------------------


def truncation_line(n: int) -> str:
    """The line inserted where ``n`` bytes were cut."""
    return f"\n[... {n} bytes truncated ...]\n"


def _split_budget(max_bytes: int) -> tuple[int, int]:
    """Head and tail sizes for a cap: the tail (tracebacks, metric line) gets the larger part."""
    head = max_bytes * 2 // 5
    return head, max_bytes - head


def read_bounded(path: Path, max_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> tuple[str, bool]:
    """Read a text file, keeping at most ``max_bytes`` bytes: the head and the tail.

    Only the head and tail are read from disk (a 10 GB log costs ``max_bytes`` of memory).
    Returns ``(text, truncated)``; a missing file reads as ``("", False)``, anything but a
    regular file (a FIFO, directory, link the program left) as one bracketed line naming it
    (:func:`~swarm_evo.sandbox.safe_read.open_program_file`; never blocks).
    """
    try:
        with open_program_file(path) as fh:
            return _read_head_tail(fh, os.fstat(fh.fileno()).st_size, max_bytes)
    except FileNotFoundError:
        return "", False
    except ProgramFileError as exc:
        return f"[{exc}]", False


def _read_head_tail(fh, size: int, max_bytes: int) -> tuple[str, bool]:
    """Head and tail of an open binary file of ``size`` bytes, as :func:`read_bounded` returns."""
    if size <= max_bytes:
        return fh.read(max_bytes).decode("utf-8", errors="replace"), False
    head_n, tail_n = _split_budget(max_bytes)
    head = fh.read(head_n)
    fh.seek(size - tail_n)
    tail = fh.read(tail_n)
    cut = size - len(head) - len(tail)
    text = (
        head.decode("utf-8", errors="replace")
        + truncation_line(cut)
        + tail.decode("utf-8", errors="replace")
    )
    return text, True


def bound_utf8(text: str, max_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> tuple[str, bool]:
    """Bound a string to about ``max_bytes`` UTF-8 bytes (head + marker + tail); ``(text, cut)``."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= max_bytes:
        return text, False
    head_n, tail_n = _split_budget(max_bytes)
    cut = len(data) - head_n - tail_n
    return (
        data[:head_n].decode("utf-8", errors="replace")
        + truncation_line(cut)
        + data[len(data) - tail_n :].decode("utf-8", errors="replace"),
        True,
    )


def combine_output(stdout: str, stderr: str, max_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> tuple[str, bool]:
    """``term_out``: stdout then stderr (newline-separated), bounded to ``max_bytes``."""
    if stdout and stderr and not stdout.endswith("\n"):
        joined = stdout + "\n" + stderr
    else:
        joined = stdout + stderr
    return bound_utf8(joined, max_bytes)


class OutputCapture:
    """A bounded copy of one output stream: its first and last bytes and its total size.

    ``feed`` keeps at most ``max_bytes`` of the stream (2/5 head, the rest a rolling tail, like
    :func:`read_bounded`); memory stays under ``2 * max_bytes`` however much is fed. Used by
    both backends to read a program's stdout/stderr pipes (or Docker attach streams) so that
    neither memory nor disk grows with what a program prints.

    Args:
        max_bytes: bytes kept (and written by :meth:`write`), at least 1024.

    Thread-safety: one feeding thread; read the results after it is done.
    """

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 1024:
            raise ValueError("max_bytes must be at least 1024")
        self.head_cap, self.tail_cap = _split_budget(int(max_bytes))
        self.head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        """Account for ``chunk`` (the next bytes of the stream)."""
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            if len(self._tail) > 2 * self.tail_cap:
                del self._tail[: len(self._tail) - self.tail_cap]

    @property
    def tail(self) -> bytes:
        """The last bytes kept after the head (at most ``tail_cap``)."""
        return bytes(self._tail[-self.tail_cap :]) if self._tail else b""

    @property
    def dropped(self) -> int:
        """Bytes of the stream that are kept nowhere."""
        return self.total - len(self.head) - len(self.tail)

    def data(self) -> bytes:
        """What goes to disk: the whole stream, or head + truncation line + tail."""
        if self.dropped <= 0:
            return bytes(self.head) + self.tail
        return bytes(self.head) + truncation_line(self.dropped).encode() + self.tail

    def bounded(self, max_bytes: int) -> tuple[str, bool]:
        """The stream bounded to ``max_bytes`` (<= the capture's size) as :func:`read_bounded`
        would cut the full stream: ``(text, truncated)``; the marker counts every byte cut."""
        if self.total <= max_bytes and self.dropped <= 0:
            return (bytes(self.head) + self.tail).decode("utf-8", errors="replace"), False
        head_n, tail_n = _split_budget(max_bytes)
        head = bytes(self.head[:head_n])
        whole_tail = self.tail if self.dropped > 0 else bytes(self.head[head_n:]) + self.tail
        tail = whole_tail[-tail_n:] if tail_n else b""
        cut = self.total - len(head) - len(tail)
        text = head.decode("utf-8", errors="replace") + truncation_line(cut) + tail.decode("utf-8", errors="replace")
        return text, True


def pump(stream, capture: OutputCapture, chunk_size: int = 1 << 20) -> threading.Thread:
    """Start a daemon thread that feeds ``capture`` from binary file ``stream`` until EOF, then
    closes it; join the returned thread before reading the capture."""

    def run() -> None:
        try:
            while True:
                chunk = stream.read1(chunk_size) if hasattr(stream, "read1") else stream.read(chunk_size)
                if not chunk:
                    break
                capture.feed(chunk)
        except (OSError, ValueError):  # pragma: no cover - closed under our feet
            pass
        finally:
            with suppress(OSError):
                stream.close()

    thread = threading.Thread(target=run, name="sandbox-output", daemon=True)
    thread.start()
    return thread


def write_output_file(workdir: Path, name: str, data: bytes, owner: tuple[int, int] | None = None) -> Path:
    """Write ``workdir/name`` safely after a program ran there: never through a symlink or
    into a FIFO the program planted (a temporary file replaces whatever is at ``name``).

    ``owner`` (uid, gid) is given to the new file when set.

    Raises:
        SandboxError: the file cannot be written.
    """
    target = Path(workdir) / name
    tmp = Path(workdir) / f".{name}.{secrets.token_hex(4)}.tmp"
    try:
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if owner is not None:
                with suppress(OSError):
                    os.fchown(fd, *owner)
        finally:
            os.close(fd)
        os.replace(tmp, target)
        return target
    except OSError as exc:
        with suppress(OSError):
            tmp.unlink()
        raise SandboxError(f"cannot write {target}: {exc}") from exc


# --------------------------------------------------------------------------------------
# Failure classification
# --------------------------------------------------------------------------------------

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
