"""Supervisor of one local execution (SPEC §10): run by path, standard library only.

:class:`~swarm_evo.sandbox.local.LocalSandbox` starts this file with the sandbox interpreter
(``python -I supervisor.py CONFIG_JSON``; PYTHONPATH is scrubbed, so it cannot be imported
from the package there) and reads one JSON report from the file descriptor ``status_fd``.
The supervisor starts the program, enforces its timeout, and makes sure that nothing the
program started survives it:

* **namespaces** (the caller is root, or has CAP_SYS_ADMIN): the supervisor unshares a PID
  namespace and forks its *init* (PID 1 there). The init unshares a mount namespace, then
  forks the program. When the init exits (program done, timeout, or the init killed) the
  kernel SIGKILLs every process left in the namespace, including daemons that escaped with
  ``setsid`` or a double fork; nothing can leave a PID namespace. The init gets SIGKILL when
  the supervisor dies and the supervisor when the run process dies (``PR_SET_PDEATHSIG``),
  so a SIGKILLed run process takes the whole program tree with it. In the mount namespace
  ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are fresh size-limited tmpfs, ``/proc`` shows the
  namespace's processes only, the public data is a read-only bind mount, and every other
  mount is remounted read-only except the work directory (its own bind mount): nothing the
  program writes outside its directory survives it, world-writable host directories such as
  ``/run/lock`` included (issue 18). The init also unshares an IPC namespace, so System V
  shared memory, semaphores and POSIX message queues die with the program.
* **subreaper** (fallback: no privilege for namespaces): the supervisor sets
  ``PR_SET_CHILD_SUBREAPER`` so that orphans re-parent to it and, when the program ends, kills
  its process group and then every remaining descendant, pass after pass, until ``waitpid``
  reports no child. The program can kill its supervisor when both run as the same user.

The program itself runs in a new session (``setsid``), first in line for the host's OOM killer
(``oom_score_adj`` 1000), with ``RLIMIT_CORE`` 0, ``RLIMIT_DATA`` (memory),
``RLIMIT_NPROC`` (fork bombs), ``RLIMIT_FSIZE`` (``fsize_bytes``: no file larger than the disk limit) and, when ``uid`` is given (the caller is root), as that user
with no supplementary groups and ``PR_SET_NO_NEW_PRIVS``. A user other than root cannot
traverse directories such as ``/root`` or pytest's ``/tmp/pytest-of-root`` (mode 700): in
namespace mode each such directory on the way to a path the program needs (its work
directory, the public data, the interpreter and its ``sys.path``) is covered by an empty
tmpfs into which only the needed entries are bind-mounted back; the program cannot see
anything else there (it could not before either). The needed paths themselves keep their
modes: the public data must be readable by others (``o+r``, ``o+x`` on directories).

Report (one JSON object, written once): ``status`` (raw ``waitpid`` status of the program or
None), ``exec_time`` (s, from just before the program's fork to its exit or kill),
``timed_out``, ``mode`` (``"namespaces"``/``"subreaper"``), ``uid`` (the program's), and
``error`` (a failure of the sandbox itself: exec or mount failure) or None; ``warnings``.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import signal
import stat
import sys
import time
import traceback

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


_terminated = False
"""Set by the SIGTERM handler of subreaper mode (the run process is interrupted or gone)."""


def _on_term(signum, frame) -> None:
    # Only a flag: an exception could surface anywhere (between fork and cleanup). The wakeup
    # fd (``signal.set_wakeup_fd``) wakes the wait loop, which then kills the tree.
    global _terminated
    _terminated = True


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


# --------------------------------------------------------------------------- program


def _exec_program(cfg: dict, err_fd: int, expected_parent: int) -> None:
    """In the forked child: limits, privileges, then exec the program (never returns)."""
    for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    os.setsid()
    try:  # the host's OOM killer takes the program before anything else (the run process)
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("1000")
    except OSError:
        pass
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if cfg.get("memory_bytes"):
        limit = int(cfg["memory_bytes"])
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    if cfg.get("nproc"):
        resource.setrlimit(resource.RLIMIT_NPROC, (int(cfg["nproc"]), int(cfg["nproc"])))
    if cfg.get("fsize_bytes"):  # no single file past the disk limit (EFBIG; Python ignores SIGXFSZ)
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(cfg["fsize_bytes"]), int(cfg["fsize_bytes"])))
    os.chdir(cfg["workdir"])
    uid, gid = cfg.get("uid"), cfg.get("gid")
    if uid is not None:
        os.setgroups([])
        os.setgid(int(gid))
        os.setuid(int(uid))
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after setuid, which clears it
    if os.getppid() != expected_parent:
        os._exit(1)
    os.closerange(3, err_fd)
    os.closerange(err_fd + 1, 65536)
    env = dict(os.environ)
    env.update(cfg.get("env_extra") or {})
    os.execve(cfg["argv"][0], cfg["argv"], env)


def _reap(main: int) -> int | None:
    """Reap every exited child without blocking; the raw status of ``main`` if it was reaped."""
    status = None
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == main:
            status = st


def _children(pid: int) -> set[int]:
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


def _kill_all(main: int, in_pidns: bool) -> int | None:
    """SIGKILL the program and every descendant, reap them all; the main raw status if reaped.

    In a PID namespace the init's ``kill(-1)`` reaches every other process of the namespace.
    Otherwise (subreaper) the program's process group is killed, then the supervisor's
    children, pass after pass (orphans re-parent to it as their parents die), until it has
    no child left. Never scans ``/proc`` in a namespace: /proc may be the host's there.
    """
    status = None
    if in_pidns and os.getpid() != 1:  # kill(-1) outside a namespace would hit the whole host
        raise RuntimeError("namespace cleanup requested outside a PID namespace")
    if not in_pidns:
        try:
            os.killpg(main, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    me = os.getpid()
    while True:
        if in_pidns:
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
        else:
            for child in _children(me):
                try:
                    os.kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        st = _reap(main)
        if st is not None:
            status = st
        try:
            os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return status
        time.sleep(0.002)


def supervise(cfg: dict, in_pidns: bool, wake_fd: int | None = None) -> dict:
    """Fork and exec the program, wait up to ``timeout`` s, kill everything; the report.

    ``wake_fd``: read end of the ``signal.set_wakeup_fd`` pipe (subreaper mode): a SIGTERM
    ends the wait early (``interrupted``), the tree is killed all the same.
    """
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    me = os.getpid()
    start = end = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(err_r)
            _exec_program(cfg, err_w, me)
        except BaseException as exc:  # noqa: BLE001 - reported to the supervisor
            try:
                os.write(err_w, f"cannot start the program: {type(exc).__name__}: {exc}".encode())
            finally:
                os._exit(127)
    os.close(err_w)
    status = None
    timed_out = interrupted = False
    chunks = []
    while True:
        chunk = os.read(err_r, 4096)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(err_r)
    if chunks:
        st = _kill_all(pid, in_pidns)
        return {"status": st, "exec_time": 0.0, "timed_out": False,
                "error": b"".join(chunks).decode("utf-8", "replace")}
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    if wake_fd is not None:
        poller.register(wake_fd, select.POLLIN)
    deadline = start + float(cfg["timeout"])
    while status is None:
        if _terminated:
            interrupted = True
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        events = poller.poll(max(1, min(500, int(remaining * 1000) + 1)))
        end = time.monotonic()
        if wake_fd is not None and any(fd == wake_fd for fd, _ in events):
            try:
                os.read(wake_fd, 512)  # drain: only the flag matters
            except BlockingIOError:
                pass
        status = _reap(pid)
        if status is None and any(fd == pidfd for fd, _ in events):
            # the program ended (pidfd readable) but waitpid has not seen it yet
            _, status = os.waitpid(pid, 0)
            end = time.monotonic()
    if status is None:
        end = time.monotonic()
    final = _kill_all(pid, in_pidns)
    if status is None:
        status = final
    return {"status": status, "exec_time": end - start, "timed_out": timed_out,
            "interrupted": interrupted, "error": None}


# --------------------------------------------------------------------------- namespaces


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


def _depth(path: str) -> int:
    return 0 if path == "/" else path.count("/")


def _setup_mounts(cfg: dict, needed: list[str]) -> list[str]:
    """In the init, before the program: the mount namespace described in the module docstring."""
    warnings: list[str] = []
    uid, gid = cfg.get("uid"), cfg.get("gid")
    unshare(CLONE_NEWNS | CLONE_NEWIPC)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    needed = sorted({os.path.realpath(p) for p in needed if p and os.path.exists(p)})
    needed = [p for p in needed if p != "/"]
    scratch = {}
    for d in SCRATCH_DIRS:
        real = os.path.realpath(d)
        if not os.path.isdir(real) or real == "/":
            continue
        # A needed path that is the scratch dir or above it keeps the host's directory.
        if any(p == real or real.startswith(p + "/") for p in needed):
            continue
        size = cfg.get("shm_size_mb") if d == "/dev/shm" else cfg.get("tmp_size_mb")
        scratch[real] = int(size or 512)
    synthesized = set(scratch)
    if uid is not None:
        # A needed directory the user cannot search stays as it is (exposing it cannot help).
        synthesized |= blocked_dirs(needed, int(uid), int(gid)) - set(needed)
    # Entries to bind back: a child of a synthesized directory on the way to a needed path.
    binds = set()
    for path in needed:
        chain = _ancestors(path) + [path]
        for parent, child in zip(chain, chain[1:]):
            if parent in synthesized and child not in synthesized:
                binds.add(child)
    binds = {b for b in binds if os.path.lexists(b)}
    fds = {b: os.open(b, os.O_PATH) for b in binds}
    ops = sorted([(_depth(d), 0, d) for d in synthesized] + [(_depth(b), 1, b) for b in binds])
    for _, kind, path in ops:
        parent = os.path.dirname(path)
        if kind == 0:
            mode = "1777" if path in scratch else "0755"
            if parent in synthesized:
                os.mkdir(path)
                os.chmod(path, int(mode, 8))
            else:
                size = f",size={scratch[path]}m" if path in scratch else ",size=1m"
                mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode}{size}")
        else:
            fd = fds[path]
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                os.mkdir(path)
            else:
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
            mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
    for fd in fds.values():
        os.close(fd)
    for path in cfg.get("readonly") or []:
        real = os.path.realpath(path)
        if os.path.isdir(real):
            mount(real, real, None, MS_BIND | MS_REC)
            mount(None, real, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    workdir = os.path.realpath(cfg["workdir"])
    mount(workdir, workdir, None, MS_BIND | MS_REC)  # its own mount: stays writable below
    warnings += _freeze_host(writable={workdir, *scratch})
    try:
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError as exc:
        warnings.append(f"kept the host's /proc ({exc})")
    return warnings


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


def _freeze_host(writable: set[str]) -> list[str]:
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


def _python_paths() -> list[str]:
    """What the interpreter needs to run a program: its prefixes and ``sys.path``."""
    paths = [os.path.dirname(os.path.realpath(sys.executable)), sys.prefix, sys.base_prefix,
             sys.exec_prefix, sys.base_exec_prefix]
    paths += [p for p in sys.path if p and os.path.isabs(p)]
    return [os.path.realpath(p) for p in paths if os.path.exists(p)]


def _init_main(cfg: dict, alive_r: int, report_w: int) -> None:
    """PID 1 of the new PID namespace: mounts, then :func:`supervise`; never returns."""
    report: dict = {}
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        # The supervisor may have died before PR_SET_PDEATHSIG: its pipe end is then closed.
        if select.select([alive_r], [], [], 0)[0]:
            os._exit(1)
        needed = [cfg["workdir"], *(cfg.get("readonly") or []), *(cfg.get("expose") or []), *_python_paths()]
        warnings = _setup_mounts(cfg, needed)
        report = supervise(cfg, in_pidns=True)
        report["warnings"] = warnings
    except BaseException as exc:  # noqa: BLE001 - reported to the run process
        report = {"status": None, "exec_time": 0.0, "timed_out": False,
                  "error": f"sandbox setup failed: {type(exc).__name__}: {exc}",
                  "trace": traceback.format_exc(limit=5)}
    try:
        os.write(report_w, json.dumps(report).encode())
    finally:
        os._exit(0)


def _run_namespaced(cfg: dict) -> dict:
    alive_r, alive_w = os.pipe()
    report_r, report_w = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(alive_w)
        os.close(report_r)
        _init_main(cfg, alive_r, report_w)
    os.close(alive_r)
    os.close(report_w)

    def on_term(signum, frame):  # the run process interrupts the execution
        try:
            os.kill(init, signal.SIGKILL)
        finally:
            os._exit(1)

    signal.signal(signal.SIGTERM, on_term)
    chunks = []
    while True:
        chunk = os.read(report_r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.waitpid(init, 0)  # the namespace is empty once its init is reaped
    if not chunks:
        return {"status": None, "exec_time": 0.0, "timed_out": False, "error": "the sandbox init died"}
    report = json.loads(b"".join(chunks))
    report["mode"] = "namespaces"
    return report


def _run_subreaper(cfg: dict, wake_fd: int) -> dict:
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    report = supervise(cfg, in_pidns=False, wake_fd=wake_fd)
    report["mode"] = "subreaper"
    return report


def main(argv: list[str]) -> int:
    """Entry point: ``argv[1]`` is the JSON configuration written by ``LocalSandbox._config``
    (``argv``, ``workdir``, ``timeout`` s, ``status_fd``, ``parent_pid``, ``uid``/``gid`` or
    None, ``namespaces``, ``memory_bytes``, ``nproc``, ``fsize_bytes``, ``readonly`` paths, ``tmp_size_mb``,
    ``shm_size_mb``). Writes the report (module docstring) to ``status_fd``; returns 0, or 1
    when the run process was already gone."""
    cfg = json.loads(argv[1])
    status_fd = int(cfg["status_fd"])
    os.set_inheritable(status_fd, False)
    report: dict
    try:
        in_pidns = False
        if cfg.get("namespaces"):
            try:
                unshare(CLONE_NEWPID)
                in_pidns = True
            except OSError as exc:
                cfg.setdefault("warnings", []).append(f"no PID namespace ({exc}); subreaper mode")
        # Die with the run process: SIGKILL in namespace mode (the init follows, the kernel
        # empties the namespace); SIGTERM in subreaper mode (the wait loop kills the tree).
        wake_fd = None
        if not in_pidns:
            wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
            signal.signal(signal.SIGTERM, _on_term)
            wake_fd = wake_r
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL if in_pidns else signal.SIGTERM)
        if os.getppid() != int(cfg["parent_pid"]):
            return 1
        if not in_pidns and cfg.get("uid") is not None and not cfg.get("drop_without_namespaces"):
            # Without a mount namespace, paths the program needs may be unreachable for the
            # unprivileged user; keep the caller's user rather than fail every program.
            blocked = blocked_dirs([cfg["workdir"], *(cfg.get("readonly") or []), *_python_paths()],
                                   int(cfg["uid"]), int(cfg["gid"]))
            if blocked:
                cfg.setdefault("warnings", []).append(
                    f"program runs as uid {os.getuid()}: no mount namespace and uid {cfg['uid']} "
                    f"cannot reach {sorted(blocked)[0]}")
                cfg["uid"] = cfg["gid"] = None
        if in_pidns:
            cfg.setdefault("env_extra", {})["TMPDIR"] = "/tmp"
            report = _run_namespaced(cfg)
        else:
            report = _run_subreaper(cfg, wake_fd)
        report["warnings"] = cfg.get("warnings", []) + report.get("warnings", [])
        report["uid"] = cfg.get("uid") if cfg.get("uid") is not None else os.getuid()
    except BaseException as exc:  # noqa: BLE001 - reported to the run process
        report = {"status": None, "exec_time": 0.0, "timed_out": False,
                  "error": f"sandbox supervisor failed: {type(exc).__name__}: {exc}",
                  "trace": traceback.format_exc(limit=5)}
    data = json.dumps(report).encode()
    while data:
        data = data[os.write(status_fd, data):]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
