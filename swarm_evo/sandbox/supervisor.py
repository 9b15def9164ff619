"""Supervisor of one local execution (SPEC §10): run by path, standard library only.

:class:`~swarm_evo.sandbox.local.LocalSandbox` starts this file with the sandbox interpreter
(``python -I -S supervisor.py CONFIG_JSON``; PYTHONPATH is scrubbed, so it cannot be imported
from the package there; without ``site``, the interpreter's paths the program needs come in the
config as ``python_paths``) and reads one JSON report from the file descriptor ``status_fd``.
The supervisor starts the program, enforces its timeout, and makes sure that nothing the
program started survives it:

* **namespaces** (the caller is root, or an ordinary user who may create a user namespace:
  then the supervisor first enters one, :func:`~.supervisor_root.enter_user_namespace`, and the
  mode is reported as ``userns``): the supervisor unshares a PID namespace and forks its
  *init* (PID 1 there). The init builds the program's world (:mod:`.supervisor_root`: mount,
  IPC and network namespaces, an allow-list root file system entered with ``pivot_root``),
  then forks the program. When the init exits (program done, timeout, or the init killed) the
  kernel SIGKILLs every process left in the namespace, including daemons that escaped with
  ``setsid`` or a double fork; nothing can leave a PID namespace. The init gets SIGKILL when
  the supervisor dies and the supervisor when the run process dies (``PR_SET_PDEATHSIG``),
  so a SIGKILLed run process takes the whole program tree with it. The program sees only its
  work directory, the public data (read-only), the interpreter and the system directories;
  ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are fresh size-limited tmpfs, ``/proc`` shows the
  namespace's processes only, every mount but the work directory and the scratch tmpfs is
  read-only (issue 18), System V IPC and POSIX message queues die with the program, and its
  network is a loopback of its own unless ``network`` (issue 32).
* **subreaper** (no privilege for namespaces: refused, :class:`Unconfinable`, unless the config
  says ``allow_unconfined``; or ``namespaces`` false): the supervisor sets
  ``PR_SET_CHILD_SUBREAPER`` so that orphans re-parent to it and, when the program ends, kills its
  process group, then every remaining descendant, pass after pass, until ``waitpid`` reports no child.

The program itself runs in a new session (``setsid``), first in line for the host's OOM killer
(``oom_score_adj`` 1000), in the execution's memory and pids cgroups when there are (``cgroup_procs``,
joined by the supervisor first), with ``RLIMIT_DATA``, ``RLIMIT_CORE`` 0, ``RLIMIT_NPROC`` (without a pids cgroup),
``RLIMIT_FSIZE`` (no file larger than the disk limit) and, when ``uid`` is given (the caller is
root), as that user with no supplementary groups and ``PR_SET_NO_NEW_PRIVS``. A user other than root cannot
traverse directories such as ``/root`` or pytest's ``/tmp/pytest-of-root`` (mode 700): in
namespace mode the directories on the way to a path the program needs are empty directories
of the allow-list root, so it reaches the path and nothing else. The needed paths themselves
keep their modes: as root (program user nobody) the public data must be readable by others
(``o+r``, ``o+x`` on directories).

Report (one JSON object, written once): ``status`` (raw ``waitpid`` status of the program or
None), ``exec_time`` (s, from just before the program's fork to its exit or kill), ``timed_out``,
``mode`` (``"namespaces"``/``"userns"``/``"subreaper"``), ``uid`` (the program's), ``error`` (a
failure of the sandbox itself: exec or mount failure) or None, ``unconfinable``; ``warnings``.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import sys
import time
import traceback

if __package__:  # imported as swarm_evo.sandbox.supervisor
    from .supervisor_namespace import (CLONE_NEWPID, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG,
        Unconfinable, blocked_dirs, children, join_cgroup, prctl, python_paths, unshare)
    from .supervisor_root import build_root, enter_user_namespace
else:  # run by path (python -I: no sys.path entry for this directory); gone again before
    # python_paths() reads sys.path, so the program's mounts do not change
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
    try:
        from supervisor_namespace import (CLONE_NEWPID, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG,
            Unconfinable, blocked_dirs, children, join_cgroup, prctl, python_paths, unshare)
        from supervisor_root import build_root, enter_user_namespace
    finally:
        sys.path.pop()


in_process_runner = None
"""Set by :mod:`.preload_server`: with ``preloaded`` in the config, ``runner(argv, workdir)`` runs
the program in this already initialised interpreter (never returns) instead of ``exec``."""

_terminated = False
"""Set by the SIGTERM handler of subreaper mode (the run process is interrupted or gone)."""


def _on_term(signum, frame) -> None:
    # Only a flag: an exception could surface anywhere (between fork and cleanup). The wakeup
    # fd (``signal.set_wakeup_fd``) wakes the wait loop, which then kills the tree.
    global _terminated
    _terminated = True


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
    if cfg.get("preloaded") and in_process_runner is not None:
        os.environ.update(cfg.get("env_extra") or {})
        os.close(err_fd)  # what exec would do (close-on-exec): the program has started
        in_process_runner(cfg["argv"], cfg["workdir"])
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
            for child in children(me):
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
    end = end if status is not None else time.monotonic()
    final = _kill_all(pid, in_pidns)
    status = final if status is None else status
    return {"status": status, "exec_time": end - start, "timed_out": timed_out,
            "interrupted": interrupted, "error": None}


def _interpreter_paths(cfg: dict) -> list[str]:
    """The interpreter's paths from the config (``python_paths``: the run process asked the
    interpreter once, and starts this supervisor with ``-S``, without ``site``), else this
    interpreter's own."""
    paths = cfg.get("python_paths")
    return list(paths) if paths is not None else python_paths()


# --------------------------------------------------------------------------- namespaces


def _init_main(cfg: dict, alive_r: int, report_w: int) -> None:
    """PID 1 of the new PID namespace: mounts, then :func:`supervise`; never returns."""
    report: dict = {}
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        # The supervisor may have died before PR_SET_PDEATHSIG: its pipe end is then closed.
        if select.select([alive_r], [], [], 0)[0]:
            os._exit(1)
        warnings = build_root(cfg, _interpreter_paths(cfg))
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
    report["mode"] = "userns" if cfg.get("userns") else "namespaces"
    return report


def _run_subreaper(cfg: dict, wake_fd: int) -> dict:
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    report = supervise(cfg, in_pidns=False, wake_fd=wake_fd)
    report["mode"] = "subreaper"
    return report


def main(argv: list[str]) -> int:
    """Entry point: ``argv[1]`` is the JSON configuration written by ``LocalSandbox._config``
    (``argv``, ``workdir``, ``timeout`` s, ``status_fd``, ``parent_pid``, ``uid``/``gid`` or
    None, ``namespaces``, ``network``, ``memory_bytes``, ``cgroup_procs`` (a list), ``nproc``, ``fsize_bytes``, ``readonly``
    paths, ``tmp_size_mb``, ``shm_size_mb``; ``env_extra``: variables the program gets (its device group's
    ``CUDA_VISIBLE_DEVICES``), ``env_unconfined``: those that replace them without namespaces,
    ``gpu_devices``: the device nodes its root gets, :func:`.supervisor_root.device_nodes`). Writes the report (module docstring) to ``status_fd``; returns 0, or 1
    when the run process was already gone."""
    cfg = json.loads(argv[1])
    status_fd = int(cfg["status_fd"])
    os.set_inheritable(status_fd, False)
    report: dict
    try:
        join_cgroup(cfg.get("cgroup_procs"))  # first: everything the execution starts is counted
        in_pidns = False
        if cfg.get("namespaces"):
            try:
                if os.getuid() != 0:  # a user namespace gives an ordinary user the same confinement
                    enter_user_namespace()
                    cfg["userns"] = True
                unshare(CLONE_NEWPID)
                in_pidns = True
            except OSError as exc:
                why = f"no {'user' if os.getuid() != 0 and not cfg.get('userns') else 'PID'} namespace ({exc})"
                if not cfg.get("allow_unconfined"):  # refuse: no program runs unconfined unless allowed
                    raise Unconfinable(why) from None
                cfg.setdefault("warnings", []).append(f"{why}: programs are NOT confined (sandbox.allow_unconfined): "
                    "they can read the competition's answers and every host file their user can, and reach the "
                    "host's network and services")
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
            blocked = blocked_dirs([cfg["workdir"], *(cfg.get("readonly") or []), *_interpreter_paths(cfg)],
                                   int(cfg["uid"]), int(cfg["gid"]))
            if blocked:
                cfg.setdefault("warnings", []).append(
                    f"program runs as uid {os.getuid()}: no mount namespace and uid {cfg['uid']} "
                    f"cannot reach {sorted(blocked)[0]}")
                cfg["uid"] = cfg["gid"] = None
        if in_pidns:
            cfg.setdefault("env_extra", {})["TMPDIR"] = "/tmp"
            report = _run_namespaced(cfg)
        else:  # every /dev/nvidia* of the host is visible: CUDA's own variables choose the group's GPUs
            cfg.setdefault("env_extra", {}).update(cfg.get("env_unconfined") or {})
            report = _run_subreaper(cfg, wake_fd)
        report["warnings"] = cfg.get("warnings", []) + report.get("warnings", [])
        report["uid"] = cfg.get("uid") if cfg.get("uid") is not None else os.getuid()
    except BaseException as exc:  # noqa: BLE001 - reported to the run process
        report = {"status": None, "exec_time": 0.0, "timed_out": False, "unconfinable": isinstance(exc, Unconfinable),
                  "error": f"sandbox supervisor failed: {type(exc).__name__}: {exc}",
                  "trace": traceback.format_exc(limit=5)}
    data = json.dumps(report).encode()
    while data:
        data = data[os.write(status_fd, data):]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
