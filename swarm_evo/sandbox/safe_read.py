"""Reading what a program left behind, safely (issue 18).

After an execution the host (the run process, as root) reads files from the program's
directory: ``outputs.json`` of the evaluation harness, ``aux_result.json`` of an auxiliary
metrics file, ``submission/submission.csv``, the stdout/stderr logs. The program chose what
stands at those paths. A plain ``open()`` of a FIFO blocks for ever (no writer will come; no
timeout covers it, SIGTERM does not end it), a directory raises ``IsADirectoryError`` in the
host's code, a device can be endless, a symlink can point at a host file.

Every such read goes through :func:`open_program_file`: the file is opened with
``O_NOFOLLOW | O_NONBLOCK`` (a link is refused, a FIFO opens at once instead of waiting for a
writer), checked with ``fstat`` to be a regular file, and its size is checked against a bound
before anything is read. Anything else raises :class:`ProgramFileError`, whose message names
the file and what stands there: callers report it as the program's failure (``correct.json``
error, the node's problems), never as their own.

Only the last path component is checked here; links in the directories above are removed
after every execution by :func:`~swarm_evo.sandbox.workdir.remove_escaping_links` (the program
is gone by then, so nothing can swap them back).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterator

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a symbolic link"),
)


def file_kind(mode: int) -> str:
    """What an ``st_mode`` describes, for messages: ``"a FIFO (named pipe)"``, ``"a directory"``,
    ``"a regular file"``, ..."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "a special file"


class ProgramFileError(ValueError):
    """A file the host reads from a program's directory is not a regular file of bounded size.

    The program's fault (it left a FIFO, directory, device, socket, symlink or an oversized
    file where the host expects its output); ``str()`` names the file and the fix.

    Attributes:
        path: the path the host tried to read.
        reason: what stands there, e.g. ``"is a FIFO (named pipe), not a regular file"``.
    """

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{path} {reason}")


@contextmanager
def open_program_file(path: Path | str, max_bytes: int | None = None) -> Iterator[BinaryIO]:
    """Open a file a program wrote, for binary reading, without blocking or following a link.

    Args:
        path: the file; its last component must be a regular file (not a symlink).
        max_bytes: the largest size accepted (bytes), or None for no bound (the disk limit of
            the execution bounds it then).

    Yields:
        A binary file object positioned at the start (blocking mode restored).

    Raises:
        FileNotFoundError: nothing exists at ``path`` (callers word "not written" themselves).
        ProgramFileError: ``path`` is a symlink, FIFO, directory, socket or device, cannot be
            opened, or is larger than ``max_bytes``.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ProgramFileError(path, "is a symbolic link, not a regular file") from None
        try:  # ENXIO (a socket), EACCES, ...: say what stands there when we can
            kind = file_kind(os.lstat(path).st_mode)
        except OSError:
            kind = "unreadable"
        raise ProgramFileError(path, f"is {kind} that cannot be opened ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ProgramFileError(path, f"is {file_kind(st.st_mode)}, not a regular file")
        if max_bytes is not None and st.st_size > max_bytes:
            raise ProgramFileError(path, f"is {st.st_size:,} bytes, over the limit of {max_bytes:,} bytes")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh


def read_program_bytes(path: Path | str, max_bytes: int) -> bytes:
    """The whole content of a program's file, at most ``max_bytes`` bytes.

    Raises:
        FileNotFoundError: nothing exists at ``path``.
        ProgramFileError: not a regular file, or larger than ``max_bytes`` (also when it grew
            past the bound after the size check).
    """
    with open_program_file(path, max_bytes) as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ProgramFileError(path, f"is over the limit of {max_bytes:,} bytes")
    return data


def read_program_text(path: Path | str, max_bytes: int) -> str:
    """:func:`read_program_bytes` decoded as UTF-8 (invalid bytes replaced)."""
    return read_program_bytes(path, max_bytes).decode("utf-8", errors="replace")
