"""A program's node directory (docs/CONTRACTS.md): its layout, handing it over to the unprivileged
program user and back, and removing links that escape it."""

from __future__ import annotations

import os
import shutil
import stat
from contextlib import suppress
from pathlib import Path

from .base import INPUT_DIR, NOBODY_GID, NOBODY_UID, SOLUTION_FILE, SUBMISSION_DIR, SandboxError, WORKING_DIR
from .output import write_output_file


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


def mount_point(path: Path) -> None:
    """An empty directory where a container runtime mounts the public data (a local run's
    ``input`` symlink is replaced)."""
    if path.is_symlink():
        path.unlink()
    path.mkdir(exist_ok=True)
