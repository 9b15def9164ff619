"""Bounded output: a program's stdout and stderr captured and kept as head, marker and tail, never
more than the cap in memory or on disk."""

from __future__ import annotations

import os
import secrets
import shutil
import threading
from contextlib import suppress
from pathlib import Path

from .base import DEFAULT_MAX_OUTPUT_BYTES, SandboxError
from .safe_read import ProgramFileError, open_program_file


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
