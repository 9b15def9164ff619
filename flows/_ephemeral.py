"""Prefect's ephemeral API for command-line runs, stopped even when the run process is killed.

Without ``PREFECT_API_URL``, Prefect 3 starts a temporary API server as a *subprocess*
(``SubprocessASGIServer``: uvicorn, ~200 MB) and stops it with ``atexit``. A run process that
dies by SIGKILL (the OOM killer, ``kill -9``, a lost container) never runs ``atexit``, so the
server lives on as an orphan; every crash leaks one. :func:`start_ephemeral_api` starts that
server up front (the same singleton Prefect's client uses later) together with a tiny guard
process that waits for the run process to disappear and then stops the server.

The server is ``flows._api_server.LocalAPIServer`` (Prefect's, its SQLite database served
through one connection). It is imported only when it is started: Prefect's server modules cost
≈ 1.7 s of imports, which a run reporting to ``PREFECT_API_URL`` never needs.
"""

from __future__ import annotations

import os
import subprocess
import sys

_GUARD = """
import os, signal, sys, time
parent, server = int(sys.argv[1]), int(sys.argv[2])
while os.getppid() == parent:
    time.sleep(0.5)
def alive():
    try:
        with open(f"/proc/{server}/cmdline", "rb") as fh:
            return b"uvicorn" in fh.read()
    except OSError:
        return False
if alive():
    os.kill(server, signal.SIGTERM)
    for _ in range(50):
        if not alive():
            break
        time.sleep(0.1)
    else:
        os.kill(server, signal.SIGKILL)
"""


def start_ephemeral_api() -> int | None:
    """Start Prefect's temporary API server and its guard; return the server's pid.

    No-op (returns None) when ``PREFECT_API_URL`` points at a real server. The guard is a
    separate session (Ctrl-C does not reach it) that polls every 0.5 s whether its parent (this
    process) still exists; when it is gone, it sends the server SIGTERM, then SIGKILL after 5 s.
    A normal exit stops the server through Prefect's own ``atexit`` hook, and the guard then
    finds nothing to do.
    """
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value():
        return None
    from flows._api_server import LocalAPIServer

    server = LocalAPIServer()
    server.start()
    pid = server.server_process.pid
    subprocess.Popen(
        [sys.executable, "-c", _GUARD, str(os.getpid()), str(pid)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    return pid
