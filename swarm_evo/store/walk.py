"""Reading a run directory for the store without following a link anywhere (issue 42, item 1;
issue 40, items 4 and 7): the one reader of the run store's mirror.

Programs write into their node directories while the mirror reads them, and a program may swap a
folder for a link at any moment (``y/config`` made, then ``y`` replaced by a link to the host
user's ``~/.aws``). Checking only the last component (``O_NOFOLLOW`` on the file) is not enough:
the folders above it are looked up by name again on every open. :func:`walk_files` therefore
opens every folder and every file relative to the descriptor of the folder above it, each with
``O_NOFOLLOW`` (``O_DIRECTORY`` for folders), and checks what it opened with ``fstat``: a link
met anywhere is skipped, a folder swapped after it was opened is read as the folder that was
opened (inside the run directory), a FIFO never blocks (``O_NONBLOCK``). Hard links cannot
bring a host file in: a program sees only its own node directory (its own mount), and ``link()``
across mounts fails with ``EXDEV``.

Scratch is skipped wherever it moved (:func:`is_scratch`): a program's ``working/`` folder below
``nodes/``, ``attempts/`` (a debug attempt's files set aside), ``interrupted/`` (a step in
flight when the run died), and the final fit's ``final_fit/working/``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from swarm_evo.sandbox.safe_read import ProgramFileError, file_kind

SCRATCH_DIR = "working"
"""A program's scratch folder (models, caches: often gigabytes), never mirrored."""

PROGRAM_TREES = frozenset({"nodes", "attempts", "interrupted"})
"""Top-level folders of a run directory that hold node directories (and so, scratch)."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


FINAL_FIT_TREE = "final_fit"
"""``RUN_DIR/final_fit/``: the chosen program run again on all training rows (its own ``working/``)."""


def is_scratch(parts: tuple[str, ...]) -> bool:
    """Whether the folder ``parts`` (relative to the run directory) is a program's scratch: a
    ``working`` folder anywhere below ``nodes/<id>/``, ``attempts/<id>/``, ``interrupted/<id>/``
    or ``final_fit/`` (the final fit's models: issue 53, item 9)."""
    if not parts or parts[-1] != SCRATCH_DIR:
        return False
    return (len(parts) >= 3 and parts[0] in PROGRAM_TREES) or (len(parts) >= 2 and parts[0] == FINAL_FIT_TREE)


@dataclass(frozen=True)
class RunFile:
    """A regular file met by :func:`walk_files`: ``rel`` (``/``-joined, relative to the run
    directory), its ``size`` (bytes) and ``mtime_ns`` as the walk saw them. :meth:`open` is valid
    only while the walk is paused at this file (it opens relative to the folder's descriptor)."""

    rel: str
    size: int
    mtime_ns: int
    _name: str
    _dir_fd: int

    @property
    def signature(self) -> tuple[int, int]:
        """``(size, mtime_ns)``: a file whose signature is unchanged is not read again."""
        return self.size, self.mtime_ns

    def open(self) -> BinaryIO:
        """The file for binary reading, opened without following a link and without blocking.

        Raises:
            FileNotFoundError: it was removed since the walk saw it.
            ProgramFileError: something other than a regular file stands there now (a link, a FIFO).
        """
        try:
            fd = os.open(self._name, _FILE_FLAGS, dir_fd=self._dir_fd)
        except FileNotFoundError:
            raise
        except OSError as exc:
            reason = "is a symbolic link" if exc.errno == errno.ELOOP else f"cannot be opened ({exc.strerror})"
            raise ProgramFileError(self.rel, reason) from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ProgramFileError(self.rel, f"is {file_kind(st.st_mode)}, not a regular file")
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise


def walk_files(run_dir: Path, skip_top: frozenset[str] = frozenset()) -> Iterator[RunFile]:
    """Every regular file under ``run_dir`` except scratch (:func:`is_scratch`) and the top-level
    folders named in ``skip_top``, depth first, never through a link (see the module). Folders
    that vanish or cannot be opened are skipped.

    Raises:
        OSError: ``run_dir`` itself cannot be opened.
    """
    root = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield from _walk(root, (), skip_top)
    finally:
        os.close(root)


def _walk(dir_fd: int, parts: tuple[str, ...], skip_top: frozenset[str] = frozenset()) -> Iterator[RunFile]:
    try:
        entries = list(os.scandir(dir_fd))
    except OSError:
        return
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)  # fstatat relative to dir_fd
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            yield RunFile("/".join([*parts, entry.name]), st.st_size, st.st_mtime_ns, entry.name, dir_fd)
        elif stat.S_ISDIR(st.st_mode) and not is_scratch((*parts, entry.name)) and not (
                not parts and entry.name in skip_top):
            try:
                child = os.open(entry.name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError:  # swapped for a link (ELOOP / ENOTDIR) or removed since
                continue
            try:
                yield from _walk(child, (*parts, entry.name))
            finally:
                os.close(child)


def printable(rel: str) -> str:
    """``rel`` as text any log handler or JSON encoder takes: bytes of a name that is not UTF-8
    (held as lone surrogates by ``os`` functions) shown as ``\\xe9`` escapes."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def is_temporary(rel: str) -> bool:
    """Whether ``rel`` names a temporary file of an atomic write in flight (``.<name>.*.tmp``)."""
    name = rel.rsplit("/", 1)[-1]
    return name.startswith(".") and name.endswith(".tmp")
