"""Prefect's server with the UI for one machine, its SQLite database served through one connection
(issue 54, item 6): what ``prefect server start`` runs, with the setting of the API a ``swarm-evo
run`` starts for itself (``flows/_api_app.py``).

    python deployments/local_server.py [--port 4200] [--host 127.0.0.1] [prefect server start options]

Prefect's stock ``prefect server start`` on SQLite opens a pool of connections to the database
file; a run's parallel steps (flow runs, task runs, states, logs, artifacts) and the server's own
services collide on it ("database is locked", answered 503; Prefect's client retries after 2, 4, 8,
16 s), which stretched the orchestration per node and once stalled the server long enough for the
automation to mark a live run Crashed. This script runs the same command in this process after
making the server's database module open SQLite through one pooled connection
(``flows._api_app._one_connection_for_sqlite``: ``pool_size=1, max_overflow=0``, Prefect's own
arguments for an in-memory database), so its transactions run one at a time and none is refused.
Everything else is Prefect's: the database (``PREFECT_HOME/prefect.db`` or
``PREFECT_SERVER_DATABASE_CONNECTION_URL``), the UI, the services, every option of
``prefect server start`` but ``--background`` and ``--workers`` (both start other processes,
which would not have the setting). A PostgreSQL URL is left alone; for a pool of machines use
``deployments/start-prefect-server.sh`` (PostgreSQL, credentials).

On a port other than 4200 the UI must be told where its API is: unless they are set, the script
sets ``PREFECT_SERVER_API_PORT`` and ``PREFECT_SERVER_UI_API_URL`` (``http://<host>:<port>/api``)
from ``--host``/``--port``. Analytics are off unless ``PREFECT_SERVER_ANALYTICS_ENABLED`` is set,
the log level is WARNING unless ``--log-level`` or ``PREFECT_SERVER_LOGGING_LEVEL`` is given (at
INFO uvicorn logs a line per request), and the server's modules load with the garbage collector
off and are then frozen, as in a run's own API (``swarm_evo/run/heap.py``).
Benchmark: ``benchmarks/server_overhead.py`` (figures in ``benchmarks/README.md``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _option(argv: list[str], name: str) -> str | None:
    """The value of ``--name V`` or ``--name=V`` in ``argv`` (the last one), else None."""
    value = None
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def server_environment(argv: list[str], environ: dict[str, str]) -> dict[str, str]:
    """The settings this script adds to ``environ`` for ``prefect server start argv``: analytics
    off, and for a ``--port``/``--host`` the UI's API URL and port (each only when unset)."""
    added = {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    port = _option(argv, "--port") or environ.get("PREFECT_SERVER_API_PORT")
    host = _option(argv, "--host") or environ.get("PREFECT_SERVER_API_HOST") or "127.0.0.1"
    if port:
        added["PREFECT_SERVER_API_PORT"] = port
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        added["PREFECT_SERVER_UI_API_URL"] = f"http://{shown}:{port}/api"
    return {k: v for k, v in added.items() if k not in environ}


def main(argv: list[str] | None = None) -> int:
    """Run ``prefect server start argv`` in this process with SQLite through one connection."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("--background", "-b") for a in argv) or (_option(argv, "--workers") or "1") != "1":
        print("local_server.py: --background and --workers start other processes, which would open SQLite "
              "with Prefect's pool again; run it in the foreground with one worker (e.g. under nohup or systemd)",
              file=sys.stderr)
        return 2
    if _option(argv, "--log-level") is None and "PREFECT_SERVER_LOGGING_LEVEL" not in os.environ:
        argv += ["--log-level", "WARNING"]  # no access-log line per request (a run makes thousands)
    os.environ.update(server_environment(argv, dict(os.environ)))
    sys.path.insert(0, str(REPO))
    from swarm_evo.run import heap

    with heap.loading():  # the server's modules load with the collector off, then are frozen
        from flows._api_app import _one_connection_for_sqlite

        _one_connection_for_sqlite()
        import prefect.server.api.server  # noqa: F401
        from prefect.cli import app

    sys.argv = ["prefect", "server", "start", *argv]
    app()
    return 0


if __name__ == "__main__":
    sys.exit(main())
