"""The local Prefect API server a run starts (``flows._ephemeral.start_ephemeral_api``):
Prefect's ``SubprocessASGIServer`` serving ``flows._api_app:create_app``.

Its SQLite database is served through one connection (``flows/_api_app.py``): Prefect's pool of
connections to the file collides with itself ("database is locked", a 503 and a 2–16 s client
back-off). A new database starts as a copy of a migrated empty one (:func:`database_template`),
not by running Prefect's migrations again (≈ 6 s of CPU per new ``PREFECT_HOME``).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

import prefect
from prefect.server.api.server import SubprocessASGIServer
from prefect.settings import get_current_settings
from sqlalchemy.engine import make_url


class LocalAPIServer(SubprocessASGIServer):
    """Prefect's ``SubprocessASGIServer`` (a uvicorn subprocess on a free port of 127.0.0.1, the
    settings of this process, stopped at exit) serving ``flows._api_app:create_app``: Prefect's
    app with SQLite through one pooled connection. Created first in a process, it is also the
    instance Prefect's client finds when it needs an ephemeral API (``SubprocessASGIServer()``
    returns the instance registered for the port, ``None`` for any free port)."""

    def start(self, timeout: int | None = None) -> None:
        """Start the server (``SubprocessASGIServer.start``). A SQLite database file that does not
        exist yet is first copied from :func:`database_template`; after the first start on a new
        file the template is made from it."""
        if self.running:
            return
        database = sqlite_database_file()
        template = database_template()
        fresh = database is not None and not database.exists()
        if fresh and template.exists():
            database.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(template, database)
        super().start(timeout)
        if fresh and not template.exists():
            _save_template(database, template)

    def _run_uvicorn_command(self) -> subprocess.Popen[Any]:
        # Prefect 3.8's command and environment (SubprocessASGIServer._run_uvicorn_command), with
        # this project's app factory.
        server_env = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
        return subprocess.Popen(
            args=[sys.executable, "-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent),
                  "--factory", "flows._api_app:create_app", "--host", "127.0.0.1", "--port", str(self.port),
                  "--log-level", "error", "--lifespan", "on"],
            env={**os.environ, **server_env, **get_current_settings().to_environment_variables(exclude_unset=True)},
        )


def sqlite_database_file() -> Path | None:
    """The SQLite file of this process's Prefect server settings
    (``PREFECT_SERVER_DATABASE_CONNECTION_URL``, by default ``PREFECT_HOME/prefect.db``); None for
    another database or an in-memory one."""
    url = make_url(get_current_settings().server.database.connection_url.get_secret_value())
    if not url.drivername.startswith("sqlite") or not url.database or url.database == ":memory:":
        return None
    return Path(url.database).expanduser()


def database_template() -> Path:
    """Where the migrated, empty database of this Prefect version is kept:
    ``$XDG_CACHE_HOME/swarm-evo/prefect-api-<version>.db`` (default ``~/.cache``)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "swarm-evo" / f"prefect-api-{prefect.__version__}.db"


def _save_template(database: Path, template: Path) -> None:
    """A consistent copy of ``database`` (SQLite's online backup: the server may be writing) as
    ``template``, written under a temporary name and renamed; a failure leaves no template."""
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=template.parent, prefix=".prefect-api-", suffix=".db")
        os.close(fd)
        try:
            with closing(sqlite3.connect(database)) as source, closing(sqlite3.connect(tmp)) as copy:
                source.backup(copy)
            os.replace(tmp, template)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except (OSError, sqlite3.Error):
        pass  # an optimisation: the next new database is migrated again
