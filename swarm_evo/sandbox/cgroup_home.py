"""Where a run process makes the cgroups of its local executions (issue 42, item 4: memory;
issue 53, item 9: pids): :func:`cgroup_home`, once per process and controller; the cgroups
themselves are :mod:`.memory_cgroup`'s and :mod:`.pids_cgroup`'s.

* **cgroup v1** (a hierarchy per controller, as on this project's CI machine): a child of the
  run process's own cgroup in the controller's hierarchy (``/proc/self/cgroup``);
* **cgroup v2**: a child of the run process's own cgroup, with the controller enabled for the
  children (``cgroup.subtree_control``); v2 allows that only in a cgroup without processes of its
  own, so when the own cgroup holds nothing but this process and its descendants (a systemd
  scope made for the run: ``systemd-run --user --scope -p Delegate=yes swarm-evo run ...``, a
  container), they move to a leaf ``swarm-evo-run`` first. A cgroup with other processes is
  left alone. The memory and pids homes are then one directory, and one execution cgroup holds
  both limits (a process is in one v2 cgroup only).

As root, or as a user the cgroup is delegated to (its directory is writable). When the own
cgroup's directory is read-only (a container's ``/sys/fs/cgroup``) and the process may mount
(CAP_SYS_ADMIN: the ``docker-gpu`` deployment's flow container), the hierarchy is mounted once
more, writable, under ``/run/swarm-evo`` (:func:`private_mount`, outside every program's
allow-list root). Where none of this works :func:`cgroup_home` gives the reason and the local
backend keeps its per-process limit (``RLIMIT_DATA``, ``RLIMIT_NPROC``) with one warning per run.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

from swarm_evo.sandbox.supervisor_namespace import mount

log = logging.getLogger(__name__)

PREFIX = "swarm-evo-"
"""Name prefix of the execution cgroups (``swarm-evo-<pid>-<8 hex>``)."""

RUN_LEAF = "swarm-evo-run"
"""cgroup v2: the leaf this process (and its descendants) move to so that its cgroup may have
limited children."""

PRIVATE_MOUNT = Path("/run/swarm-evo/cgroup")
"""Where the v2 hierarchy is mounted again, writable, when the own cgroup's directory is
read-only (a v1 hierarchy: ``/run/swarm-evo/cgroup-<controller>``, :func:`private_mount`)."""

CONTROLLERS = ("memory", "pids")
"""The controllers an execution is limited by."""


def private_mount(version: int, controller: str) -> Path:
    """Where the hierarchy of ``controller`` is mounted again, writable: :data:`PRIVATE_MOUNT`
    (v2: one hierarchy), ``/run/swarm-evo/cgroup-<controller>`` (v1: one per controller)."""
    return PRIVATE_MOUNT if version == 2 else PRIVATE_MOUNT.with_name(f"cgroup-{controller}")


@dataclass(frozen=True)
class CgroupHome:
    """Where execution cgroups are made: ``path`` (a cgroup directory) of cgroup ``version`` 1 or 2."""

    version: int
    path: Path


def _mounts() -> list[tuple[str, str, str, str]]:
    """``(root, mount point, fstype, super options)`` of each mount (``/proc/self/mountinfo``)."""
    found = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) >= 5 and len(tail) >= 3:
                found.append((fields[3], fields[4], tail[0], tail[2]))
    return found


def _own_cgroup(version: int, controller: str) -> str | None:
    """This process's cgroup path in ``controller``'s hierarchy (v1) or the unified one (v2)."""
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if (version == 2 and controllers == "") or (version == 1 and controller in controllers.split(",")):
                return path
    return None


def _directory(mounts, version: int, own: str, controller: str) -> Path | None:
    """The directory of cgroup ``own`` under a mount of the hierarchy (a writable one first)."""
    candidates = []
    for root, point, fstype, options in mounts:
        if (version == 1 and fstype == "cgroup" and controller in options.split(",")) or \
                (version == 2 and fstype == "cgroup2"):
            if own == root or own.startswith(root.rstrip("/") + "/"):
                candidates.append(Path(point) / own[len(root):].lstrip("/"))
    writable = [c for c in candidates if c.is_dir() and os.access(c, os.W_OK)]
    for c in writable or candidates:
        if c.is_dir():
            return c
    return None


def read_file(path: Path) -> str:
    """The text of a cgroup file. Raises OSError."""
    return path.read_text()


def write_file(path: Path, text: str) -> None:
    """Write ``text`` to a cgroup file in one ``write`` (no temporary file: cgroupfs). Raises OSError."""
    with open(path, "w") as fh:
        fh.write(text)


def new_cgroup(home: CgroupHome) -> Path:
    """Make an execution cgroup ``<home>/swarm-evo-<pid>-<8 hex>`` and return its directory. Raises OSError."""
    path = home.path / f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    return path


def read_counter(path: Path, name: str, key: str | None = None) -> int:
    """A number from the cgroup file ``path/name``: the whole file (``key`` None) or its
    ``key value`` line; 0 when unreadable."""
    try:
        text = read_file(path / name)
        if key is None:
            return int(text.strip() or 0)
        for line in text.splitlines():
            field, _, value = line.partition(" ")
            if field == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def remove_cgroup(path: Path) -> None:
    """Remove an execution cgroup once its processes are gone (the supervisor has exited; the
    kernel may need a moment to let the last ones go). Failures are logged, not raised."""
    for attempt in range(50):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if attempt == 49:
                log.warning("could not remove the execution cgroup %s: %s", path, exc)
                return
            threading.Event().wait(0.1)


def _version(controller: str) -> int | None:
    """1 when a v1 hierarchy of ``controller`` is mounted, 2 when only the unified one has it."""
    mounts = _mounts()
    if any(fstype == "cgroup" and controller in options.split(",") for _, _, fstype, options in mounts):
        return 1
    for _, point, fstype, _ in mounts:
        if fstype == "cgroup2":
            try:
                if controller in read_file(Path(point) / "cgroup.controllers").split():
                    return 2
            except OSError:
                continue
    return None


def _is_ours(pid: int) -> bool:
    """``pid`` is this process or one of its descendants (``/proc/PID/stat`` parents)."""
    me = os.getpid()
    while pid > 1:
        if pid == me:
            return True
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return pid == me


def _enable_v2(home: Path, controller: str) -> None:
    """Let ``home``'s children have ``controller``'s limits: move its processes (ours only) to a
    leaf, then ``+<controller>`` in ``cgroup.subtree_control``. Raises OSError naming what stands
    in the way."""
    if controller in read_file(home / "cgroup.subtree_control").split():
        return
    try:
        write_file(home / "cgroup.subtree_control", f"+{controller}")  # a cgroup without processes (or the root)
        return
    except OSError:
        pass
    for _ in range(3):  # a process forked meanwhile lands in home again
        pids = [int(p) for p in read_file(home / "cgroup.procs").split()]
        foreign = [p for p in pids if not _is_ours(p)]
        if foreign:
            raise OSError(f"{home} holds processes other than this run's (pid {foreign[0]}); cgroup v2 lets "
                          f"only a cgroup without processes limit its children's {controller}")
        leaf = home / RUN_LEAF
        leaf.mkdir(exist_ok=True)
        for pid in pids:
            try:
                write_file(leaf / "cgroup.procs", str(pid))
            except ProcessLookupError:
                pass
        try:
            write_file(home / "cgroup.subtree_control", f"+{controller}")
            return
        except OSError as exc:
            error = exc
    raise OSError(f"cannot enable the {controller} controller in {home}: {error}")


def _mount_private(version: int, controller: str) -> None:
    """Mount the hierarchy again, writable, at :func:`private_mount` (needs CAP_SYS_ADMIN)."""
    point = private_mount(version, controller)
    point.mkdir(parents=True, exist_ok=True)
    if any(p == str(point) for _, p, _, _ in _mounts()):
        return
    if version == 1:
        mount("cgroup", str(point), "cgroup", 0, controller)
    else:
        mount("cgroup2", str(point), "cgroup2", 0)


def _try_home(version: int, controller: str) -> CgroupHome:
    """The home in the own cgroup's directory; mounts the hierarchy privately when it is read-only.

    Raises:
        OSError: no usable directory (the message says why).
    """
    own = _own_cgroup(version, controller)
    if own is None:
        raise OSError(f"this process is in no {controller} cgroup (/proc/self/cgroup)")
    if version == 2 and own.rstrip("/").endswith("/" + RUN_LEAF):  # moved there for the other controller:
        own = own.rstrip("/")[: -len(RUN_LEAF) - 1] or "/"  # the home is the cgroup above (one for both)
    home = _directory(_mounts(), version, own, controller)
    if home is None or not os.access(home, os.W_OK):
        if os.geteuid() != 0:
            raise OSError(f"the cgroup {own} is not delegated to uid {os.getuid()} (its directory is not writable)")
        _mount_private(version, controller)
        home = _directory(_mounts(), version, own, controller)
        if home is None or not os.access(home, os.W_OK):
            raise OSError(f"the cgroup {own} has no writable directory, even mounted at "
                          f"{private_mount(version, controller)}")
    if version == 2:
        _enable_v2(home, controller)
    probe = home / f"{PREFIX}{os.getpid()}-probe"
    probe.mkdir(exist_ok=True)  # EACCES / EROFS here: not ours after all
    probe.rmdir()
    return CgroupHome(version, home)


@functools.lru_cache(maxsize=len(CONTROLLERS))
def cgroup_home(controller: str = "memory") -> CgroupHome | str:
    """Where this process makes the execution cgroups of ``controller`` (one of
    :data:`CONTROLLERS`; module docstring), or why it cannot (a reason for the warning). Cached:
    one answer per process and controller (a run is one process)."""
    version = _version(controller)
    if version is None:
        return f"the kernel has no {controller} cgroup controller mounted (/proc/self/mountinfo)"
    try:
        home = _try_home(version, controller)
    except OSError as exc:
        return f"cgroup v{version}: {exc}"
    _remove_stale(home)
    return home


def _remove_stale(home: CgroupHome) -> None:
    """Remove empty execution cgroups whose run process is gone (a SIGKILLed run leaves them)."""
    for entry in home.path.glob(PREFIX + "*"):
        try:
            pid = int(entry.name[len(PREFIX):].split("-")[0])
        except ValueError:
            continue
        if pid != os.getpid() and not Path(f"/proc/{pid}").exists():
            try:
                entry.rmdir()
            except OSError:
                pass
