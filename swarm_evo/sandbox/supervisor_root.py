"""The program's world in namespace mode (issue 32): standard library only, loaded by
:mod:`.supervisor` (also when it runs by path).

A program sees an allow-list, not the host minus a deny-list. :func:`build_root` runs in the
sandbox init (PID 1 of the program's PID namespace), unshares a mount, IPC and (unless
``network``) network namespace, and builds the program's root file system in a fresh tmpfs:

* ``/usr``, ``/bin``, ``/sbin``, ``/lib*``, ``/etc`` and ``/sys`` of the host (read-only; the
  links among them kept as links): what the interpreter and its libraries need;
* the interpreter's directories (its prefixes and ``sys.path``, ``python_paths``): exactly
  those directories, each bound at its own path; the directories on the way there are empty
  (``/root`` shows only ``.pyenv/versions/3.11.7``, say);
* the public data (read-only) and the node directory (writable) at their own paths. When one
  of them lies inside a bound directory (a data directory inside a checkout whose root is on
  ``sys.path``), the child of that directory on the way to it is covered by an empty tmpfs
  into which only the path itself is bound back: the answers next to ``public`` and the other
  nodes next to the node directory stay out of sight;
* a fresh ``/proc`` (the namespace's processes only; the NVIDIA driver's directories of GPUs
  outside the execution's device group covered, :func:`hidden_gpu_dirs`), a ``/dev`` with ``null``, ``zero``,
  ``full``, ``random``, ``urandom`` and, when the execution was given a device group, only its
  GPUs' ``/dev/nvidia<N>`` and the NVIDIA control nodes (``gpu_devices``; without GPUs no
  ``/dev/nvidia*`` at all), private size-limited tmpfs on ``/tmp``, ``/var/tmp`` and ``/dev/shm``.

Then ``pivot_root`` into it and the old root is detached: nothing else of the host is
reachable, not even by ``..`` from a mount point or ``/proc/*/root``. Every mount except the
node directory and the scratch tmpfs is then read-only. In the network namespace only the
loopback is up; it reaches nothing of the host's.

As a non-root user the supervisor first enters a user namespace (:func:`enter_user_namespace`)
in which it may do all of the above; the program keeps the user's own uid there, so it has no
capability left after ``execve`` and cannot undo a mount.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import platform
import socket
import stat
import struct

if __package__:
    from .supervisor_namespace import (CLONE_NEWIPC, CLONE_NEWNS, MS_BIND, MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_RDONLY,
        MS_PRIVATE, MS_REC, SCRATCH_DIRS, _check, _libc, freeze_mounts, mount, unshare)
else:  # run by path: the supervisor put this directory on sys.path
    from supervisor_namespace import (CLONE_NEWIPC, CLONE_NEWNS, MS_BIND, MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_RDONLY,
        MS_PRIVATE, MS_REC, SCRATCH_DIRS, _check, _libc, freeze_mounts, mount, unshare)

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MNT_DETACH = 2
MS_MOVE = 0x2000

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")
"""Host directories every program sees (read-only); links among them are recreated as links."""

DEVICES = ("null", "zero", "full", "random", "urandom")
"""Device nodes of every program's ``/dev`` (plus its device group's, :func:`device_nodes`)."""

_SYS_PIVOT_ROOT = {"x86_64": 155, "amd64": 155, "aarch64": 41, "arm64": 41, "riscv64": 41, "loongarch64": 41,
                   "ppc64le": 203, "ppc64": 203, "s390x": 217, "i386": 217, "i686": 217, "armv7l": 218}

_NEW_ROOT = "/tmp"
"""Where the new root's tmpfs is mounted before ``pivot_root`` (in this mount namespace only;
every source is opened before it is covered)."""


def enter_user_namespace() -> None:
    """Unshare a user namespace mapping our uid and gid to themselves (``setgroups`` denied):
    a non-root caller gets the capabilities to build the program's namespaces.

    Raises:
        OSError: the kernel refuses unprivileged user namespaces (EPERM, ENOSPC, EINVAL).
    """
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER)
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)


def loopback_up() -> None:
    """Bring ``lo`` of the current network namespace up (``SIOCSIFFLAGS``). Raises OSError."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        flags = struct.unpack("16sh22x", fcntl.ioctl(sock, 0x8913, struct.pack("16sh22x", b"lo", 0)))[1]
        fcntl.ioctl(sock, 0x8914, struct.pack("16sh22x", b"lo", flags | 0x1))  # IFF_UP


def _pivot_root(new_root: str) -> None:
    """Make ``new_root`` (a mount point) the root and detach the old one (``pivot_root(".", ".")``).

    Where a seccomp filter refuses ``pivot_root`` (Docker's default profile does, also with
    CAP_SYS_ADMIN: the ``docker-gpu`` flow container) the new root is moved over ``/`` and
    entered with ``chroot``, as ``switch_root`` does: the old root stays below it, reachable by no
    path and by no process (the program runs without capabilities, in its own PID namespace).
    """
    os.chdir(new_root)
    number = _SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise OSError(f"pivot_root: unknown system call number on {platform.machine()}")
    if _libc.syscall(ctypes.c_long(number), b".", b".") == 0:
        _check(_libc.umount2(b".", ctypes.c_int(MNT_DETACH)), "umount old root")
    elif ctypes.get_errno() == errno.EPERM:
        mount(".", "/", None, MS_MOVE)
        os.chroot(".")
    else:
        _check(-1, "pivot_root")
    os.chdir("/")


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


class _Tree:
    """The new root being built under :data:`_NEW_ROOT`: which of its paths are mount points, and
    whether each shows host content (``host``: system or interpreter; ``data``: public data
    or node directory) or is ours (``synthetic``: empty tmpfs and directories made in it)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.places = {"/": "synthetic"}

    def _anchor(self, path: str) -> str:
        return max((p for p in self.places if _under(path, p)), key=len)

    def _mkdirs(self, start: str, path: str) -> None:
        """Directories (0755) from below ``start`` down to ``path``'s parent, in a synthetic place."""
        rel = os.path.relpath(os.path.dirname(path), start) if os.path.dirname(path) != start else ""
        current = start
        for part in [p for p in rel.split("/") if p and p != "."]:
            current = os.path.join(current, part)
            try:
                os.mkdir(self.root + current, 0o755)
            except FileExistsError:
                pass

    def tmpfs(self, path: str, mode: str, size_mb: float, flags: int = MS_NOSUID | MS_NODEV) -> None:
        """An empty tmpfs at ``path`` (directories on the way made in the synthetic parent)."""
        self._mkdirs(self._anchor(path), path)
        try:
            os.mkdir(self.root + path, 0o755)
        except FileExistsError:
            pass
        mount("tmpfs", self.root + path, "tmpfs", flags, f"mode={mode},size={max(1, int(size_mb * 1024))}k")
        self.places[path] = "synthetic"

    def link(self, path: str, target: str) -> None:
        self._mkdirs(self._anchor(path), path)
        os.symlink(target, self.root + path)

    def bind(self, path: str, fd: int, kind: str) -> None:
        """Bind the opened source ``fd`` at ``path``; inside a ``host`` place the rest of the
        child on the way is masked first (module docstring)."""
        anchor = self._anchor(path)
        if anchor == path and self.places[anchor] != "synthetic":
            return  # already there (the same path twice)
        if self.places[anchor] == "host" and kind != "host":
            child = anchor.rstrip("/") + "/" + path[len(anchor):].strip("/").split("/")[0]
            if child != path:
                mount("tmpfs", self.root + child, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
                self.places[child] = "synthetic"
                anchor = child
        elif self.places[anchor] == "host":
            return  # an interpreter directory inside another: visible already
        target = self.root + path
        if self.places[anchor] == "synthetic":
            self._mkdirs(anchor, path)
            if not os.path.lexists(target):
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    os.mkdir(target, 0o755)
                else:
                    os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
        mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
        self.places[path] = kind


def _collapse(paths) -> list[str]:
    """Real, existing paths without ``/`` and without those inside another one, shortest first."""
    real = sorted({os.path.realpath(p) for p in paths if p and os.path.exists(p)} - {"/"}, key=lambda p: (len(p), p))
    kept: list[str] = []
    for p in real:
        if not any(_under(p, k) for k in kept):
            kept.append(p)
    return kept


def device_nodes(cfg: dict) -> list[str]:
    """The host device nodes bound into the program's ``/dev``: :data:`DEVICES` and the
    execution's ``gpu_devices`` (its GPUs' ``/dev/nvidia<N>``, ``nvidiactl``, ``nvidia-uvm``, ...;
    :meth:`swarm_evo.sandbox.gpu_slots.DeviceGroup.device_nodes`), those that exist on this host."""
    wanted = [f"/dev/{d}" for d in DEVICES] + list(cfg.get("gpu_devices") or [])
    return [d for d in dict.fromkeys(wanted) if os.path.exists(d)]


PROC_GPUS = "/proc/driver/nvidia/gpus"
"""The NVIDIA driver's per-GPU directories, one per PCI bus id."""


def hidden_gpu_dirs(cfg: dict, proc_gpus: str = PROC_GPUS) -> list[str]:
    """The driver's GPU directories the program's ``/proc`` covers with an empty tmpfs: those of
    GPUs outside its device group (``gpu_buses``; ``[]``: no GPU, all of them; None: unknown,
    none), as Docker's NVIDIA runtime does, so that NVML lists only the group's GPUs."""
    keep = cfg.get("gpu_buses")
    if keep is None:
        return []
    try:
        names = sorted(os.listdir(proc_gpus))
    except OSError:
        return []
    return [f"{proc_gpus}/{name}" for name in names if name not in keep]


def build_root(cfg: dict, interpreter: list[str]) -> list[str]:
    """In the init: the namespaces and root file system of the module docstring, ``pivot_root``
    into it, everything read-only but the node directory and scratch; the warnings.

    ``cfg``: ``workdir``, ``readonly``/``expose`` (public data), ``network`` (keep the host's),
    ``tmp_size_mb``, ``shm_size_mb``, ``gpu_devices``. ``interpreter``: the interpreter's directories.

    Raises:
        OSError: a namespace, mount or ``pivot_root`` failed (the execution fails).
    """
    warnings: list[str] = []
    os.umask(0o022)
    unshare(CLONE_NEWNS | CLONE_NEWIPC | (0 if cfg.get("network") else CLONE_NEWNET))
    if not cfg.get("network"):
        loopback_up()
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    workdir = os.path.realpath(cfg["workdir"])
    data = _collapse([*(cfg.get("readonly") or []), *(cfg.get("expose") or [])])
    system = [d for d in SYSTEM_DIRS if os.path.lexists(d)]
    if cfg.get("network"):  # a resolv.conf that links elsewhere (/run/systemd/resolve/...)
        system.append(os.path.dirname(os.path.realpath("/etc/resolv.conf")))
    system_real = _collapse(d for d in system if not os.path.islink(d))
    interp = [p for p in _collapse(interpreter) if not any(_under(p, s) for s in system_real)]
    devices = device_nodes(cfg)
    sources = {p: os.open(p, os.O_PATH) for p in {*system_real, *interp, *data, workdir, *devices}}
    try:
        mount("tmpfs", _NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
        tree = _Tree(_NEW_ROOT)
        os.mkdir(_NEW_ROOT + "/proc", 0o555)
        try:
            mount("proc", _NEW_ROOT + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except OSError as exc:
            warnings.append(f"programs have no /proc ({exc})")
        for hidden in hidden_gpu_dirs(cfg):  # other GPUs out of NVML's sight (best effort)
            try:
                mount("tmpfs", _NEW_ROOT + hidden, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
                      "size=4k,mode=0555")
            except OSError as exc:
                warnings.append(f"programs see {hidden} of a GPU not theirs ({exc})")
        tree.tmpfs("/dev", "0755", 0.25, MS_NOSUID | MS_NOEXEC)
        for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                             ("stderr", "/proc/self/fd/2")):
            tree.link(f"/dev/{name}", target)
        for d in SCRATCH_DIRS:
            size = cfg.get("shm_size_mb") if d == "/dev/shm" else cfg.get("tmp_size_mb")
            tree.tmpfs(d, "1777", int(size or 512))
        for d in system:
            if os.path.islink(d):
                tree.link(d, os.readlink(d))
        for p in system_real + interp:
            tree.bind(p, sources[p], "host")
        for d in devices:
            tree.bind(d, sources[d], "data")
        for p in data:
            tree.bind(p, sources[p], "data")
        tree.bind(workdir, sources[workdir], "data")
    finally:
        for fd in sources.values():
            os.close(fd)
    _pivot_root(_NEW_ROOT)
    warnings += freeze_mounts(writable={workdir, *SCRATCH_DIRS})
    return warnings
