"""Many machines, the server half (issue 34, items 5-7), the checks that need no server of their
own: the deployments carry the heartbeat the automation assumes, ``swarm-evo pool setup`` with no
server answering, the sweep's default ``run_timeout``. The checks against the PostgreSQL-backed
server (its script, its credentials, ``swarm-evo pool setup`` creating the pool and the automation
once, the ``pool`` deployment's pull steps) run on tests/test_many_machines.py's server, while
that module's 5-minute deployment run lives (it waits for that run anyway)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pool_machines import ROOT
from pool_machines import child_env as _child_env
from pool_machines import free_port as _free_port


def _swarm_evo(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "swarm_evo.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_every_deployment_carries_the_heartbeat_the_automation_assumes_and_its_tag():
    """prefect.yaml's deployments: the tag the automation watches, and a heartbeat frequency in
    their job variables that fits within half its ``within`` (issue 40, item 1)."""
    import yaml

    from flows._heartbeat_guard import MIN_HEARTBEAT_FREQUENCY, POOL_TAG
    from flows.pool_setup import zombie_automation

    within = zombie_automation().trigger.within.total_seconds()
    deployments = yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]
    assert len(deployments) >= 5
    for deployment in deployments:
        name = f"{deployment['entrypoint']} {deployment['name']}"
        assert POOL_TAG in deployment["tags"], name
        frequency = int(deployment["work_pool"]["job_variables"]["env"]["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"])
        assert frequency == MIN_HEARTBEAT_FREQUENCY and 2 * frequency <= within, name


def test_pool_setup_names_prefect_api_url_when_no_server_answers(tmp_path):
    env = _child_env(tmp_path, PREFECT_API_URL=f"http://127.0.0.1:{_free_port()}/api")
    proc = _swarm_evo(env, "pool", "setup", "--pool", "p")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "PREFECT_API_URL=http://127.0.0.1:" in proc.stderr and "start-prefect-server.sh" in proc.stderr
    unset = _swarm_evo(_child_env(tmp_path), "pool", "setup", "--pool", "p")
    assert unset.returncode == 2 and "set PREFECT_API_URL" in unset.stderr
    low = _swarm_evo(env, "pool", "setup", "--pool", "p", "--heartbeat-frequency", "5")
    assert low.returncode == 2 and "--heartbeat-frequency must be >= 30" in low.stderr


def test_the_sweep_waits_for_a_deployment_run_one_and_a_half_time_limits_and_ten_minutes():
    import inspect

    from flows.benchmark_sweep import benchmark_sweep, default_run_timeout
    from swarm_evo.cli.commands import main

    assert default_run_timeout(3600) == 1.5 * 3600 + 600
    assert default_run_timeout(43_200) == 65_400  # the config's default time limit: 18 h 10 min
    with pytest.raises(ValueError, match="time_limit"):
        default_run_timeout(0)
    assert inspect.signature(benchmark_sweep.fn).parameters["run_timeout"].default is None  # explicit still wins
    assert main(["sweep", "--problems", "circle-packing", "--run-timeout", "0"]) == 2


def test_pool_setup_refuses_a_server_on_sqlite(prefect_server):
    """Issue 53, item 11: on the stock server (SQLite: the session's API here) a live run was marked
    Crashed when "database is locked" delayed its heartbeats; pool setup refuses such a server with
    the command that starts the PostgreSQL one, and creates nothing there."""
    import asyncio

    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    from flows.pool_setup import PoolSetupError, setup_pool

    with pytest.raises(PoolSetupError) as caught:
        setup_pool("sqlite-pool")
    message = str(caught.value)
    assert "does not run on PostgreSQL" in message and "bash deployments/start-prefect-server.sh" in message

    async def pool_exists() -> bool:
        async with get_client() as client:
            try:
                await client.read_work_pool("sqlite-pool")
            except ObjectNotFound:
                return False
            return True

    assert not asyncio.run(pool_exists())
