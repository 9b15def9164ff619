"""The Prefect API a `swarm-evo run` starts (issue 16, ``flows/_ephemeral.py``, ``flows/_api_server.py``, ``flows/_api_app.py``):
Prefect's server with its SQLite file served through one connection, so that concurrent writes
(parallel steps, the log worker, task-run events) never get "database is locked" 503s, which
Prefect's client retries after 2-16 s. ``benchmarks/api_contention.py`` puts the same load on
Prefect's stock ephemeral server: 42 requests answered 503 there
and 6 connections were reset (8 clients x 15 runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow  # a Prefect API server process

SCRIPT = textwrap.dedent("""
    import importlib.util, json, sys
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.client.orchestration import get_client
    from flows._api_server import LocalAPIServer
    from flows._ephemeral import start_ephemeral_api

    pid = start_ephemeral_api()
    server = SubprocessASGIServer()  # what Prefect's client asks for when it needs an ephemeral API
    with get_client(sync_client=True) as client:
        client_url = str(client.api_url)
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        cmdline = fh.read().split(b"\\0")
    spec = importlib.util.spec_from_file_location("api_contention", sys.argv[1])
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    answers, seconds = bench.write_load(server.api_url, threads=8, runs=5)
    print(json.dumps({"local": isinstance(server, LocalAPIServer), "running": server.running,
                      "pid": server.server_process.pid == pid, "client_url": client_url,
                      "api_url": server.api_url, "factory": "flows._api_app:create_app" in [a.decode() for a in cmdline],
                      "answers": {str(k): v for k, v in answers.items()}, "seconds": seconds}))
""")


def test_runs_get_a_one_connection_sqlite_api_that_concurrent_writes_do_not_lock(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               DO_NOT_TRACK="1")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(ROOT / "benchmarks" / "api_contention.py")],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # the run's server is the one Prefect's client uses: no second, stock server is started
    assert out["local"] and out["running"] and out["pid"], out
    assert out["client_url"].rstrip("/") == out["api_url"].rstrip("/"), out
    assert out["factory"], "the server process serves flows._api_app:create_app"
    # 8 clients x (1 flow + 5 runs x 5 requests) at once: every request answered, none 503
    answers = out["answers"]
    assert sum(answers.values()) == 8 * (1 + 5 * 5), answers
    assert set(answers) <= {"200", "201"}, f"requests that failed under concurrent writes: {answers}"
    assert (tmp_path / "prefect-home" / "prefect.db").exists(), "the history stays in PREFECT_HOME's database"


TEMPLATE_SCRIPT = textwrap.dedent("""
    import json, sys, time
    from prefect.variables import Variable
    from flows._api_server import _save_template, database_template, sqlite_database_file
    from flows._ephemeral import start_ephemeral_api

    started = time.perf_counter()
    start_ephemeral_api()
    seconds = time.perf_counter() - started
    made = database_template().exists()  # by the start on a new database file
    if sys.argv[1] == "mark":
        Variable.set("made_in_the_first_home", "yes")
        _save_template(sqlite_database_file(), database_template())  # the template, now with the mark
    print(json.dumps({"template": str(database_template()), "made": made, "seconds": seconds,
                      "variable": Variable.get("made_in_the_first_home")}))
""")


def test_a_new_prefect_home_starts_from_a_copy_of_the_migrated_database(tmp_path):
    """The first server on a new SQLite file leaves a template (the migrated database) in the
    cache; the next new ``PREFECT_HOME`` starts from a copy of it instead of migrating."""

    def start(home: str, mode: str) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        env.update(PREFECT_HOME=str(tmp_path / home), XDG_CACHE_HOME=str(tmp_path / "cache"),
                   PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
        proc = subprocess.run([sys.executable, "-c", TEMPLATE_SCRIPT, mode], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    first = start("home-1", "mark")
    template = Path(first["template"])
    assert first["made"] and template.is_relative_to(tmp_path / "cache"), first
    second = start("home-2", "read")
    assert second["variable"] == "yes", "the new home's database is a copy of the template"
    assert (tmp_path / "home-2" / "prefect.db").exists()
    print(f"server start: new database {first['seconds']:.1f} s, from the template {second['seconds']:.1f} s")
