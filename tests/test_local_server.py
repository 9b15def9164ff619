"""``deployments/local_server.py``, the server docs/prefect.md gives for the UI (issue 54, item 6):
the settings it adds and the options it refuses, without starting a server (the browser test,
tests/test_browser_pages.py, runs a search against a real one)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "deployments" / "local_server.py"


@pytest.fixture(scope="module")
def local_server():
    spec = importlib.util.spec_from_file_location("local_server", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_port_tells_the_ui_where_its_api_is(local_server):
    added = local_server.server_environment(["--port", "4311"], {})
    assert added["PREFECT_SERVER_API_PORT"] == "4311"
    assert added["PREFECT_SERVER_UI_API_URL"] == "http://127.0.0.1:4311/api"
    assert added["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"
    listening_everywhere = local_server.server_environment(["--host=0.0.0.0", "--port=4400"], {})
    assert listening_everywhere["PREFECT_SERVER_UI_API_URL"] == "http://127.0.0.1:4400/api"
    mine = {"PREFECT_SERVER_UI_API_URL": "https://prefect.example/api"}
    assert "PREFECT_SERVER_UI_API_URL" not in local_server.server_environment(["--port", "4311"], mine)
    assert "PREFECT_SERVER_UI_API_URL" not in local_server.server_environment([], {})  # 4200: the UI's default


@pytest.mark.parametrize("argv", [["--background"], ["-b"], ["--workers", "2"], ["--workers=3"]])
def test_options_that_start_other_processes_are_refused(local_server, argv, capsys):
    assert local_server.main(argv) == 2
    assert "--background and --workers" in capsys.readouterr().err
