"""pytest fixtures for the stand-in model server.

tests/conftest.py imports them, so that every test module shares them (imported into each module,
a session fixture is one per module: up to four servers per worker, each stopped at the end):

- ``llm_server`` (session): one :class:`~llm_server.app.StandInServer` on a free port of
  127.0.0.1, knowing the session's prepared competitions (the ``data_dir`` fixture of
  ``tests/conftest.py``); stopped at the end of the session.
- ``stand_in`` (function): the same server switched to the tidy scenario with an empty request
  log; a test picks its own with ``stand_in.use("everything")`` or ``stand_in.use(Scenario(...))``.
"""

from __future__ import annotations

import pytest

from .app import StandInServer


@pytest.fixture(scope="session")
def llm_server(data_dir):
    """The session's stand-in model server (started once, stopped at the end)."""
    server = StandInServer(data_dir).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def stand_in(llm_server):
    """The stand-in server, reset to the tidy scenario for this test."""
    llm_server.use("tidy")
    return llm_server
