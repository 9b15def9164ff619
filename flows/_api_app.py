"""The app of the local Prefect API server that runs start (``flows._api_server``): Prefect's own
server app, with its SQLite database served through one pooled connection.

Prefect's server opens a pool of connections to a SQLite *file* and begins its transactions
``DEFERRED``; two of them that read, then write (an API request beside the server's event and
task-run services) collide, and SQLite answers the loser "database is locked" at once — its
busy timeout does not apply to a read transaction that must become a write one. The server
turns that into a 503, and Prefect's client sleeps 2, 4, 8, 16 s before it retries (no setting).
Prefect's maintainers: "sqlite locking is hard to avoid with the ephemeral client"
(PrefectHQ/prefect#19771, #18934). Measured with ``benchmarks/orchestration_overhead.py``
(``top``, 12 steps, one worker): 5 retries in 2 runs, 0.40 s of back-off per node, 0.84 s of
orchestration per node in all.

With one connection the server's database work runs one transaction at a time, as SQLite
writes do anyway, and nothing collides: Prefect does exactly this for an in-memory database
(``AioSqliteConfiguration.engine``: ``pool_size=1, max_overflow=0``). The database stays the
file in ``PREFECT_HOME``, so ``prefect server start`` shows the run's history afterwards.
PostgreSQL URLs are left alone (their pool is Prefect's).

uvicorn imports this module in the server process (``--factory flows._api_app:create_app``);
nothing else should import it: it changes how that process creates SQLite engines.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from sqlalchemy.pool import AsyncAdaptedQueuePool

SQLITE_POOL = dict(poolclass=AsyncAdaptedQueuePool, pool_size=1, max_overflow=0, pool_recycle=-1)
"""Engine arguments for a SQLite database: one long-lived connection, no overflow (Prefect's own
arguments for an in-memory SQLite database)."""


def _one_connection_for_sqlite() -> None:
    """Make the server's database module create SQLite engines with :data:`SQLITE_POOL`."""
    from prefect.server.database import configurations

    create = configurations.create_async_engine
    if getattr(create, "one_connection_for_sqlite", False):
        return

    def create_async_engine(url: Any, *args: Any, **kwargs: Any):
        if str(url).startswith("sqlite") and "poolclass" not in kwargs:
            kwargs.update(SQLITE_POOL)
        return create(url, *args, **kwargs)

    create_async_engine.one_connection_for_sqlite = True  # type: ignore[attr-defined]
    configurations.create_async_engine = create_async_engine


def create_app() -> FastAPI:
    """Prefect's server app (``prefect.server.api.server.create_app``, its settings from the
    environment as ``SubprocessASGIServer`` passes them), SQLite through one connection. The
    server's modules load with the garbage collector off and are then frozen
    (``swarm_evo/run/heap.py``): the server process serves for the whole run."""
    from swarm_evo.run import heap

    with heap.loading():
        _one_connection_for_sqlite()
        from prefect.server.api.server import create_app as prefect_app

        return prefect_app()
