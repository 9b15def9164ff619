"""The run process's side of the pre-imported program server (:mod:`.preload_server`).

A generated program's first lines are nearly always ``import numpy, pandas`` and a few
scikit-learn modules: ≈ 1.3 s of CPU before it does anything, every execution
(benchmarks/README.md, "Suite time"). The local backend therefore keeps, per run process and
per interpreter and environment, one server that has imported ``sandbox.preload`` once and forks
each execution's supervisor from that state; the supervisor confines the fork exactly as it
confines an ``exec``-ed program (namespaces, allow-list root, user nobody, limits, cgroup), then
runs the program in it. What the program sees is what ``python solution.py`` sees (``sys.argv``,
``__file__``, ``sys.path[0]``, environment, working directory, exit status, traceback), except
that the preloaded modules are already in ``sys.modules``.

:func:`spawn` returns a :class:`Spawned` (``pid``, ``stdout``, ``stderr``, ``wait``) that
:func:`~.process_runner.run_supervised` drives like the supervisor's ``Popen``. When the server
cannot be started or dies, :func:`spawn` returns None and the caller ``exec``-s as before.
"""

from __future__ import annotations

import array
import io
import json
import logging
import os
import select
import socket
import subprocess
import threading
import time
import tokenize
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

SERVER = Path(__file__).with_name("preload_server.py")
"""The server script (standard library only), run by path with the program interpreter."""

DEFAULT_PRELOAD = ("numpy", "pandas", "sklearn.model_selection", "sklearn.ensemble", "sklearn.linear_model",
                   "sklearn.preprocessing", "sklearn.metrics")
"""``sandbox.preload``'s default: what the programs of tabular competitions import first."""

START_TIMEOUT = 120.0
"""Seconds a server may take to import its modules and say it is ready."""

MEMORY_HEADROOM = 512 * 1024 * 1024
"""A fork inherits the server's ``VmData``, which ``RLIMIT_DATA`` counts: an execution whose memory
limit is below the server's plus this many bytes is ``exec``-ed instead."""


@dataclass
class Spawned:
    """One supervisor forked by a server: its ``pid`` (leader of its own process group, as the
    ``Popen``-ed supervisor is), the read ends of the program's ``stdout`` and ``stderr``, and a
    pidfd to wait on (the server is its parent and reaps it; ``returncode`` stays None)."""

    pid: int
    stdout: object
    stderr: object
    pidfd: int
    server: "_Server | None" = None
    returncode: int | None = None

    def wait(self, timeout: float | None = None) -> None:
        """Block until the supervisor has exited.

        Raises:
            subprocess.TimeoutExpired: still running after ``timeout`` s.
        """
        ready, _, _ = select.select([self.pidfd], [], [], timeout)
        if not ready:
            raise subprocess.TimeoutExpired(f"supervisor {self.pid}", timeout or 0)

    def close(self) -> None:
        """Close the pidfd (the pipes are closed by their readers); the server may be closed again."""
        try:
            os.close(self.pidfd)
        except OSError:
            pass
        if self.server is not None:
            self.server.release()
            self.server = None


class _Server:
    """One running server: its process, its socket, what it imported; requests one at a time."""

    def __init__(self, python: str, env: dict, modules: tuple[str, ...]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen([python, str(SERVER), str(theirs.fileno()), *modules], env=env,
                                         cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, pass_fds=(theirs.fileno(),),
                                         start_new_session=True)
        finally:
            theirs.close()
        self.sock = ours
        self.lock = threading.Lock()
        self.in_flight = 0  # supervisors forked and not yet released: closing would kill them
        ours.settimeout(START_TIMEOUT)
        try:
            hello = json.loads(ours.recv(65536) or b"{}")
        except (OSError, ValueError) as exc:
            self.close()
            raise OSError(f"the program server did not start: {exc}") from exc
        finally:
            ours.settimeout(None)
        if not hello.get("ready"):
            self.close()
            raise OSError(f"the program server did not start (exit {self.proc.poll()})")
        self.vm_data = int(hello.get("vm_data") or 0)
        self.missing = list(hello.get("missing") or [])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def release(self) -> None:
        """One forked supervisor is done with (its execution ended)."""
        with _lock:
            self.in_flight -= 1

    def request(self, cfg: dict, env: dict, cwd: str, fds: list[int]) -> tuple[int, int]:
        """Send one request; ``(pid, pidfd)`` of the forked supervisor.

        Raises:
            OSError: the server is gone or refused the request.
        """
        data = json.dumps({"cfg": cfg, "env": env, "cwd": cwd}).encode()
        with self.lock:
            self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            pidfds = array.array("i")
            reply, ancdata, _flags, _addr = self.sock.recvmsg(65536, socket.CMSG_LEN(pidfds.itemsize))
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                pidfds.frombytes(payload[: len(payload) - (len(payload) % pidfds.itemsize)])
        if not reply:
            raise OSError("the program server is gone")
        answer = json.loads(reply)
        if "error" in answer or not pidfds:
            for fd in pidfds:
                os.close(fd)
            raise OSError(f"the program server refused the execution: {answer.get('error')}")
        return int(answer["pid"]), pidfds[0]

    def close(self) -> None:
        """EOF to the server (it exits; its supervisors' trees die with it), then reap it."""
        self.sock.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


MAX_SERVERS = 3
"""Servers one process keeps (≈ 170 MB each with the default modules); the least recently used
idle one is closed first. A run has one: its interpreter and thread counts do not change."""

IMPORT_TIME_ENV = ("PYTHON", "OMP_", "OPENBLAS_", "MKL_", "NUMEXPR_", "VECLIB_", "BLIS_", "GOTO", "KMP_", "NPY_",
                   "SKLEARN_", "PANDAS_", "SCIPY_", "JOBLIB_", "MPL", "LANG", "LC_", "CUDA_", "TZ")
"""Prefixes of the variables that numerical libraries and the interpreter read when they start or
are imported (thread pools, hash seed, stdio encoding, library configuration): a server is made
per distinct set of them. The rest of a request's environment is the program's own
(``os.environ`` is replaced in each fork), so a per-execution variable (``HOME``, a test's
``PYTEST_CURRENT_TEST``) does not make a server of its own."""

_servers: dict[tuple, _Server] = {}
"""Live servers by (interpreter, modules, environment), least recently used first."""
_lock = threading.RLock()
_failed: set[tuple] = set()


def _server(python: str, env: dict, modules: tuple[str, ...]) -> _Server | None:
    key = (python, modules, tuple(sorted((k, v) for k, v in env.items() if k.startswith(IMPORT_TIME_ENV))))
    with _lock:
        server = _servers.pop(key, None)
        if server is not None and server.alive():
            _servers[key] = server
            return server
        if server is not None:
            server.close()
        if key in _failed:
            return None
        for idle in [k for k, s in _servers.items() if not s.in_flight][:max(0, len(_servers) + 1 - MAX_SERVERS)]:
            _servers.pop(idle).close()
        try:
            started = time.monotonic()
            server = _servers[key] = _Server(python, env, modules)
            log.debug("program server for %s ready in %.1f s (missing: %s)", python, time.monotonic() - started,
                      server.missing)
            return server
        except OSError as exc:
            _failed.add(key)
            log.warning("local sandbox: no pre-imported program server (%s): every program imports its "
                        "modules itself", exc)
            return None


def imports_any(code: str, modules: tuple[str, ...]) -> bool:
    """Whether ``code`` imports a package of ``modules`` (``import pandas as pd``, ``from
    sklearn.metrics import ...``, anywhere in the file); False for code that does not tokenize
    (a new interpreter reports its syntax error).

    Reads tokens (:mod:`tokenize`), not an AST: CPython 3.11's ``ast.parse`` in two threads at
    once can fail with "AST constructor recursion depth mismatch" (gh-106905), and a run's parallel
    executions reach this at the same moment.
    """
    packages = {m.split(".")[0] for m in modules}
    state = None  # "import": a module name comes; "dotted": the rest of one; "from": the module of a
    try:  # from-import comes; "rest": the rest of a from-import or a relative one (never a package)
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.NEWLINE or (tok.type == tokenize.OP and tok.string == ";"):
                state = None
            elif state is None and tok.type == tokenize.NAME and tok.string in ("import", "from"):
                state = tok.string
            elif state in ("import", "from") and tok.type == tokenize.NAME:
                if tok.string in packages:
                    return True
                state = "dotted" if state == "import" else "rest"
            elif state == "from":  # ``from .x import y``: relative, the program's own
                state = "rest"
            elif state == "dotted" and tok.type == tokenize.OP and tok.string == ",":
                state = "import"
    except (tokenize.TokenError, SyntaxError, ValueError):
        return False
    return False


def spawn(python: str, modules: tuple[str, ...], cfg: dict, env: dict, cwd: Path, status_w: int,
          memory_bytes: int | None) -> Spawned | None:
    """Fork the supervisor of one execution from the server of ``python`` with ``modules``
    imported (started on first use, in ``env``; one per :data:`IMPORT_TIME_ENV` set); None when
    there is no server, or the execution's memory limit is too small for a fork of it
    (:data:`MEMORY_HEADROOM`): the caller then starts the supervisor itself.

    ``cfg``: the supervisor's config without ``status_fd``/``parent_pid`` (the server sets them).
    """
    if not modules:
        return None
    with _lock:
        server = _server(python, env, tuple(modules))
        if server is None or (memory_bytes and memory_bytes < server.vm_data + MEMORY_HEADROOM):
            return None
        server.in_flight += 1
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        pid, pidfd = server.request(cfg, env, str(cwd), [devnull, out_w, err_w, status_w])
    except (OSError, ValueError) as exc:
        for fd in (out_r, err_r):
            os.close(fd)
        server.release()
        log.warning("local sandbox: the program server failed (%s); starting the supervisor directly", exc)
        return None
    finally:
        for fd in (out_w, err_w, devnull):
            os.close(fd)
    return Spawned(pid, os.fdopen(out_r, "rb", buffering=0), os.fdopen(err_r, "rb", buffering=0), pidfd, server)


def stop_servers() -> None:
    """Close every server of this process (tests; a run process's servers end with it anyway)."""
    with _lock:
        for server in _servers.values():
            server.close()
        _servers.clear()
        _failed.clear()
