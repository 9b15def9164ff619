"""The supervisor's Linux plumbing (standard library only, loaded by :mod:`.supervisor` also when
it runs by path): ``prctl``, ``unshare`` and ``mount`` through libc, read-only remounts, and the
interpreter's paths. The program's root file system is built by :mod:`.supervisor_root`."""

from __future__ import annotations

import ctypes
import os
import stat
import sys


PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_RELATIME = 0x200000

_KEPT_MOUNT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
                     "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
"""Per-mount options a read-only bind remount must repeat (``mount(2)``: MS_REMOUNT replaces them)."""

SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
"""Directories replaced by a private tmpfs in namespace mode (sized by ``tmp_size_mb`` /
``shm_size_mb``)."""

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def prctl(option: int, arg: int) -> None:
    """``prctl(2)`` with one argument. Raises OSError (errno of the call)."""
    _check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0),
                       ctypes.c_ulong(0)), f"prctl({option})")


def unshare(flags: int) -> None:
    """``unshare(2)`` (``CLONE_NEW*`` flags). Raises OSError, e.g. EPERM without CAP_SYS_ADMIN."""
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    """``mount(2)`` (``MS_*`` flags; ``data`` as for ``mount -o``). Raises OSError."""
    enc = (lambda s: None if s is None else os.fsencode(s))
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source or ''} on {target}")


class Unconfinable(OSError):
    """The namespaces that confine a program cannot be made here, and ``allow_unconfined`` is off."""


def join_cgroup(procs_files: list[str] | str | None) -> None:
    """Move this process into each cgroup whose ``cgroup.procs`` is in ``procs_files`` (one per
    hierarchy: memory, pids; None or empty: stay). Its children are born there. Raises OSError."""
    for procs_file in [procs_files] if isinstance(procs_files, str) else procs_files or []:
        with open(procs_file, "w") as fh:
            fh.write(str(os.getpid()))


def _traversable(st: os.stat_result, uid: int, gid: int) -> bool:
    """Whether ``uid``/``gid`` (no supplementary groups) may search a directory (mode bits)."""
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == gid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def _ancestors(path: str) -> list[str]:
    """``/a/b/c`` -> ``["/a", "/a/b"]`` (strict ancestors below ``/``)."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


def blocked_dirs(needed: list[str], uid: int, gid: int) -> set[str]:
    """Ancestors of ``needed`` paths that ``uid`` cannot search (mode bits, not ACLs)."""
    blocked = set()
    for path in needed:
        for anc in _ancestors(path):
            try:
                if not _traversable(os.stat(anc), uid, gid):
                    blocked.add(anc)
            except OSError:
                pass
    return blocked


def _mount_points() -> list[tuple[str, list[str]]]:
    """``(mount point, per-mount options)`` of this mount namespace (``/proc/self/mountinfo``,
    fields 5 and 6; octal escapes such as ``\\040`` decoded), parents before children."""
    points = []
    with open("/proc/self/mountinfo", "rb") as fh:
        for line in fh:
            fields = line.split()
            point = fields[4].decode("unicode_escape").encode("latin-1").decode(errors="surrogateescape")
            points.append((point, fields[5].decode().split(",")))
    return points


def freeze_mounts(writable: set[str]) -> list[str]:
    """Remount every mount of the namespace read-only except ``writable`` mount points and
    ``/proc``; the warnings (a mount that could not be frozen).

    Nothing the program writes outside its work directory and the private scratch tmpfs
    survives it: host directories that are world-writable (``/run/lock``, ``/var/tmp`` when it
    is not replaced, writable dirs of Docker's image layers, ...) are read-only for it, as
    the Docker backend's read-only root is. Device nodes stay usable (``/dev/null``, GPUs):
    a read-only mount does not stop writes to a device. Changes stay in this namespace.
    """
    warnings = []
    for point, options in _mount_points():
        if point in writable or point == "/proc" or point.startswith("/proc/") or "ro" in options:
            continue
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY
        for name, flag in _KEPT_MOUNT_FLAGS.items():
            if name in options:
                flags |= flag
        try:
            mount(None, point, None, flags)
        except OSError as exc:
            warnings.append(f"{point} stays writable for programs ({exc})")
    return warnings


def python_paths() -> list[str]:
    """What the interpreter needs to run a program: its prefixes and ``sys.path``."""
    paths = [os.path.dirname(os.path.realpath(sys.executable)), sys.prefix, sys.base_prefix,
             sys.exec_prefix, sys.base_exec_prefix]
    paths += [p for p in sys.path if p and os.path.isabs(p)]
    return [os.path.realpath(p) for p in paths if os.path.exists(p)]


def children(pid: int) -> set[int]:
    """Direct children of ``pid`` (``/proc/PID/task/*/children``, else a scan of ``/proc``)."""
    found: set[int] = set()
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                found.update(int(x) for x in fh.read().split())
        return found
    except OSError:
        pass
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.add(int(name))
    return found


if __name__ == "__main__":  # python -I supervisor_namespace.py: the paths, for the run process
    import json

    print(json.dumps(python_paths()))
