"""The scheduled benchmark sweep on a real Prefect server (SPEC §1, §12; issue 6).

``prefect server start`` on a free port (own PREFECT_HOME, scheduler services on, defaults),
the process work pool of prefect.yaml, then, as a user deploys them, from the repository root:

- ``prefect deploy -n benchmark-sweep/nightly``: read back through the API, the deployment
  carries prefect.yaml's cron schedule and default parameters, and the server's scheduler
  created Scheduled flow runs of it, one per night at 02:00 UTC, with those parameters (with
  the scheduler service off, the same deploy leaves no runs: checked by hand). Nothing
  executes them (that needs the night).
- ``prefect deploy -n two-phase-evo/default`` and ``prefect worker start``: ``swarm-evo sweep
  --deployment default`` sends each run to the work pool through ``run_deployment``; the
  worker runs them as flow runs of that deployment, children of the sweep's flow run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow  # a `prefect server start` process and scheduled runs

REPO = Path(__file__).resolve().parents[1]
PREFECT = [sys.executable, "-m", "prefect"]
DEPLOYMENT = "benchmark-sweep/nightly"


def _nightly_spec() -> dict:
    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    return next(d for d in spec["deployments"] if d["name"] == "nightly")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(home: Path, api_url: str) -> dict[str, str]:
    """This environment without Prefect settings, plus its own PREFECT_HOME and the API URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), PREFECT_API_URL=api_url, PREFECT_SERVER_ANALYTICS_ENABLED="false",
               DO_NOT_TRACK="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
    return env


def _wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"prefect server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    pytest.fail(f"prefect server not ready at {url}:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    """Terminate the server's process group (it runs in a session of its own)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([*PREFECT, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done


async def _deployment_and_runs(min_runs: int, timeout: float):
    """The deployment and its flow runs, polled until there are ``min_runs`` (or ``timeout``)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterDeploymentId

    deadline = time.monotonic() + timeout
    async with get_client() as client:
        deployment = await client.read_deployment_by_name(DEPLOYMENT)
        while True:
            runs = await client.read_flow_runs(
                flow_run_filter=FlowRunFilter(deployment_id=FlowRunFilterDeploymentId(any_=[deployment.id])), limit=200)
            if len(runs) >= min_runs or time.monotonic() > deadline:
                return deployment, runs
            await asyncio.sleep(0.5)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A Prefect server with prefect.yaml's process work pool; yields its API and a client env."""
    tmp = tmp_path_factory.mktemp("sweep-server")
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    server_env = _env(tmp / "server-home", api)
    server_env["PREFECT_UI_ENABLED"] = "false"
    log = tmp / "server.log"
    started = time.monotonic()
    with log.open("w") as fh:
        proc = subprocess.Popen([*PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                                env=server_env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_healthy(f"{api}/health", proc, log, timeout=40)
        env = _env(tmp / "client-home", api)
        _cli(env, "work-pool", "create", _nightly_spec()["work_pool"]["name"], "--type", "process")
        print(f"server up with the work pool in {time.monotonic() - started:.1f} s")
        yield {"api": api, "env": env, "log": log, "tmp": tmp}
    finally:
        _stop(proc)


def test_nightly_sweep_deployment_gets_scheduled_runs(server):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    spec = _nightly_spec()
    (cron,) = [s["cron"] for s in spec["schedules"]]
    started = time.monotonic()
    deployed = _cli(server["env"], "--no-prompt", "deploy", "-n", DEPLOYMENT)
    assert "benchmark-sweep/nightly" in deployed.stdout
    deployed_at = time.monotonic()
    with temporary_settings({PREFECT_API_URL: server["api"]}):
        deployment, runs = asyncio.run(_deployment_and_runs(min_runs=3, timeout=30))
    print(f"deploy: {deployed_at - started:.1f} s; {len(runs)} scheduled runs {time.monotonic() - deployed_at:.1f} s "
          "after the deploy")

    # the deployment: prefect.yaml's schedule, parameters and work pool
    assert deployment.work_pool_name == spec["work_pool"]["name"]
    assert deployment.parameters == spec["parameters"]
    assert len(deployment.schedules) == 1
    schedule = deployment.schedules[0]
    assert schedule.active and schedule.schedule.cron == cron == "0 2 * * *"
    assert schedule.schedule.timezone == "UTC"
    assert set(deployment.parameter_openapi_schema["properties"]) >= {
        "competitions", "seeds", "policies", "model", "max_steps", "data_dir", "out_dir", "deployment"}

    # the runs: created by the scheduler from that schedule, one per night at 02:00 UTC
    assert len(runs) >= 3, f"the scheduler created {len(runs)} runs:\n{server['log'].read_text()[-3000:]}"
    runs = sorted(runs, key=lambda r: r.expected_start_time)
    now = datetime.now(timezone.utc)
    starts = [r.expected_start_time.astimezone(timezone.utc) for r in runs]
    assert now < starts[0] <= now + timedelta(days=1)
    assert all((s.hour, s.minute, s.second) == (2, 0, 0) for s in starts)
    assert all(b - a == timedelta(days=1) for a, b in zip(starts, starts[1:]))
    for run in runs:
        assert run.state.is_scheduled() and run.state.name == "Scheduled"
        assert run.auto_scheduled and "auto-scheduled" in run.tags
        assert run.created_by.type == "SCHEDULE" and run.created_by.id == schedule.id
        assert run.parameters == spec["parameters"]
        assert run.work_pool_name == spec["work_pool"]["name"]
    assert time.monotonic() - started < 40


def test_sweep_sends_runs_to_a_work_pool(server, tmp_path):
    """`swarm-evo sweep --deployment default`: 2 runs as flow runs of two-phase-evo/default,
    executed by a process worker (its own PREFECT_HOME, 1 BLAS/OpenMP thread per program)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from swarm_evo.cli.sweep_cli import add_sweep_parser, run_sweep
    from swarm_evo.competition import prepare_competition
    from swarm_evo.sweeps import sweep

    data = tmp_path / "data"
    prepare_competition("sklearn-diabetes", None, data)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"search": {"steps_per_epoch": 1, "phase1_target_nodes": 1, "parallel_workers": 1},
                                      "model": {"fault_rate": 0.0}}))
    _cli(server["env"], "--no-prompt", "deploy", "-n", "two-phase-evo/default")
    worker_env = _env(server["tmp"] / "worker-home", server["api"])
    worker_env.update(PREFECT_WORKER_QUERY_SECONDS="1", PREFECT_WORKER_PREFETCH_SECONDS="1",
                      OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    worker_log = tmp_path / "worker.log"
    with worker_log.open("w") as fh:
        worker = subprocess.Popen([*PREFECT, "worker", "start", "--pool", _nightly_spec()["work_pool"]["name"]],
                                  env=worker_env, cwd=tmp_path, stdout=fh, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    out = tmp_path / "out"
    try:
        with temporary_settings({PREFECT_API_URL: server["api"]}):
            parser = argparse.ArgumentParser(prog="swarm-evo")
            add_sweep_parser(parser.add_subparsers(dest="command", required=True))
            code = run_sweep(parser.parse_args([
                "sweep", "--data-dir", str(data), "--competitions", "sklearn-diabetes", "--seeds", "2",
                "--max-steps", "1", "--model", "offline", "--out", str(out), "--config", str(config),
                "--deployment", "default", "--poll", "1",
            ]))
            assert code == 0, worker_log.read_text()[-3000:]
            runs = asyncio.run(_flow_runs())
            # The sweep ran in this process: send its logs and events to this server now, not at
            # exit, when the server is gone (the harness does the same before it stops its server).
            APILogWorker.drain_all(timeout=10)
            EventsWorker.drain_all(timeout=10)
    finally:
        _stop(worker)

    rows = [json.loads(line) for line in (out / sweep.REPORTS_FILE).read_text().splitlines()]
    assert [(r["policy"], r["seed"]) for r in rows] == [("two_phase", 0), ("two_phase", 1)]
    for row in rows:  # each row is the run's own grade_report.json, written by the worker's flow run
        grade = json.loads((Path(row["run_dir"]) / "grade_report.json").read_text())
        assert {k: v for k, v in row.items() if k not in sweep.ROW_EXTRA_FIELDS} == grade
    summary = json.loads((out / sweep.SUMMARY_FILE).read_text())["sklearn-diabetes"]["two_phase"]
    assert summary["runs"] == 2 and summary["valid_submissions"] == sum(r["valid_submission"] for r in rows)

    (parent,) = [r for r in runs if r.parameters.get("out_dir") == str(out)]
    children = [r for r in runs if r.name in {"sklearn-diabetes-two_phase-s0", "sklearn-diabetes-two_phase-s1"}]
    assert parent.deployment_id is None and parent.state.is_completed()  # the sweep ran here
    assert len(children) == 2
    for child in children:  # run by the worker, linked to the sweep
        assert child.deployment_id is not None and child.work_pool_name == "swarm-evo-process"
        assert child.state.is_completed() and child.parent_task_run_id is not None
        assert child.parameters["run_dir"] == str(out / "runs" / child.name)
    assert "sklearn-diabetes-two_phase-s0" in worker_log.read_text()


async def _flow_runs():
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        return await client.read_flow_runs(limit=200)
