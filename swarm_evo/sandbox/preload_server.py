"""Pre-imported program server of the local backend (issue 40: a program's ``import pandas,
sklearn`` cost ≈ 1.3 s of CPU each time): standard library only, run by path.

:mod:`swarm_evo.sandbox.preload` starts this file with the program interpreter, in the program
environment (scrubbed, the execution's thread counts), as ``python preload_server.py SOCKET_FD
MODULE...``. It imports the modules once (a module the interpreter lacks is skipped and named in
the ready message), loads the supervisor (:mod:`swarm_evo.sandbox.supervisor`) by path, says
``{"ready": true, "pid": ..., "vm_data": bytes, "missing": [...]}`` on the socket, and then
serves one request per execution on its ``SOCK_SEQPACKET`` socket (one end of a socketpair the
run process holds; nothing else can reach it):

* request: JSON ``{"cfg": supervisor config, "env": {...}, "cwd": path}`` and four descriptors
  (the program's standard input, output, error, and the supervisor's report pipe);
* the server forks; the child starts a session of its own, takes the descriptors as 0, 1, 2 and
  the report descriptor, the execution's environment and working directory, and runs the
  supervisor's ``main`` exactly as ``python -I -S supervisor.py CONFIG`` would (namespaces, limits,
  user, cgroup; :func:`supervisor._exec_program` then runs the program in that already
  initialised interpreter instead of ``exec``-ing a new one, :func:`run_program`);
* reply: JSON ``{"pid": child}`` with a pidfd of the child (the run process waits on it and
  signals the child's process group as it would the supervisor's), or ``{"error": "..."}``.

The server ends at EOF on its socket: when the run process closes it or dies. Its children have
``PR_SET_PDEATHSIG`` towards it (the supervisor sets it), so a dead run process still takes every
program tree with it. The server never runs a program itself; each program is a fork made after
its request, so it sees the server's memory as it was then: the imported modules, the scrubbed
environment it started with, earlier requests' configs (paths, limits; never data or secrets).
"""

from __future__ import annotations

import array
import atexit
import gc
import importlib.util
import json
import os
import select
import signal
import socket
import sys
import threading
import traceback

MAX_REQUEST = 1 << 20
"""Bytes of one request (a config, an environment and a path: a few KB)."""


def _load_supervisor():
    """The supervisor module, loaded by path as the sandbox runs it (its imports by path too)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "supervisor.py")
    spec = importlib.util.spec_from_file_location("swarm_evo_supervisor", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _vm_data() -> int:
    """This process's private writable memory (``VmData``, bytes): what ``RLIMIT_DATA`` counts."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def _exit_code(exc: SystemExit) -> int:
    """The exit status the interpreter gives ``sys.exit(code)`` (None 0, an int itself, else 1 printed)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:  # noqa: BLE001 - as the interpreter: best effort
        pass
    return 1


def _print_exception(script: str, exc: BaseException) -> None:
    """Print ``exc`` as the interpreter would for ``python script``: its traceback from the
    script's first frame (this server's frame dropped); a syntax error without one."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    sys.excepthook(type(exc), exc.with_traceback(tb), tb)


def run_program(argv: list[str], workdir: str) -> None:
    """In the program's process (forked, confined, its user set): run ``argv[1]`` (relative to
    ``workdir``) as ``__main__`` the way ``python SCRIPT`` does (``sys.argv = argv[1:]``,
    ``__file__`` and ``sys.path[0]`` from the script's absolute path, Python's signal
    dispositions, a fresh seed for ``random`` and NumPy's global generator), then the
    interpreter's exit (non-daemon threads joined, ``atexit`` handlers, streams flushed, the exit
    status ``python`` gives). Never returns.
    """
    import builtins
    import types
    from importlib.machinery import SourceFileLoader

    script = os.path.join(workdir, argv[1])
    code = 1
    try:
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as a starting interpreter sets them
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.argv = list(argv[1:])
        sys.path[0:0] = [os.path.dirname(script)]
        import random
        random.seed()
        numpy_random = sys.modules.get("numpy.random")
        if numpy_random is not None:
            numpy_random.seed()
        main = types.ModuleType("__main__")
        main.__dict__.update(__file__=script, __builtins__=builtins, __cached__=None, __spec__=None,
                             __loader__=SourceFileLoader("__main__", script))
        sys.modules["__main__"] = main
        try:
            with open(script, "rb") as fh:
                source = fh.read()
            exec(compile(source, script, "exec", dont_inherit=True), main.__dict__)
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc)
        except BaseException as exc:  # noqa: BLE001 - the program's own failure, printed as Python does
            _print_exception(script, exc)
            code = 1
        try:
            threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter does at exit
        except BaseException:  # noqa: BLE001
            pass
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(code)


def _child(supervisor, request: dict, fds: list[int], server_pid: int, sock: socket.socket) -> None:
    """The forked child: become the execution's supervisor (never returns)."""
    code = 1
    try:
        sock.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.setsid()
        stdin, stdout, stderr, status = fds
        for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, target)
        for fd in (stdin, stdout, stderr):
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        cfg = dict(request["cfg"], status_fd=status, parent_pid=server_pid, preloaded=True)
        code = supervisor.main(["supervisor.py", json.dumps(cfg)])
    except BaseException:  # noqa: BLE001 - the report pipe is closed unwritten: the run process says so
        traceback.print_exc()
    finally:
        os._exit(code)


def _receive(sock: socket.socket) -> tuple[dict, list[int]] | None:
    """One request and its descriptors; None at EOF."""
    fds = array.array("i")
    data, ancdata, _flags, _addr = sock.recvmsg(MAX_REQUEST, socket.CMSG_LEN(16 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    if not data:
        for fd in fds:
            os.close(fd)
        return None
    return json.loads(data), list(fds)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def serve(sock: socket.socket, supervisor) -> None:
    """Answer requests until EOF on ``sock`` (module docstring)."""
    me = os.getpid()
    while True:
        ready, _, _ = select.select([sock], [], [], 1.0)
        _reap()
        if not ready:
            continue
        received = _receive(sock)
        if received is None:
            return
        request, fds = received
        try:
            if len(fds) != 4:
                raise ValueError(f"a request carries 4 descriptors, got {len(fds)}")
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            pid = os.fork()
            if pid == 0:
                _child(supervisor, request, fds, me, sock)
            pidfd = os.pidfd_open(pid)
            try:
                sock.sendmsg([json.dumps({"pid": pid}).encode()],
                               [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [pidfd]))])
            finally:
                os.close(pidfd)
        except Exception as exc:  # noqa: BLE001 - answered to the run process, the server goes on
            sock.send(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
        finally:
            for fd in fds:
                os.close(fd)


def main(argv: list[str]) -> int:
    """Entry point (module docstring): ``argv[1]`` the socket's descriptor, then the modules."""
    sock = socket.socket(fileno=int(argv[1]))
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # not the programs' path
    missing = []
    # The collector off while the modules load, then everything they made frozen (swarm_evo/run/heap.py):
    # a forked program's collections never walk the pre-imported modules, nor write to their pages.
    gc.disable()
    for name in argv[2:]:
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - the interpreter lacks it: programs import it themselves
            missing.append(name)
    supervisor = _load_supervisor()
    gc.collect()
    gc.freeze()
    gc.enable()
    supervisor.in_process_runner = run_program
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run's Ctrl-C reaches its own process group only
    sock.send(json.dumps({"ready": True, "pid": os.getpid(), "vm_data": _vm_data(), "missing": missing}).encode())
    serve(sock, supervisor)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
