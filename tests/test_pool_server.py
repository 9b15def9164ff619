"""Many machines, the server half (issue 34, items 5-7), with real parts: PostgreSQL from Debian's
package and Prefect's server on it, both started by ``deployments/start-prefect-server.sh``;
``swarm-evo pool setup`` against that server; the ``pool`` deployment's pull steps cloning a git
repository at its pinned commit and installing it; the sweep's default ``run_timeout``. A flow
run whose worker is SIGKILLed turning Crashed through the automation, while the live runs beside
it complete, is tests/test_many_machines.py."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest
from pool_machines import HEARTBEAT, ROOT, SCRIPT, prefect_pg_server
from pool_machines import child_env as _child_env
from pool_machines import free_port as _free_port


@pytest.fixture(scope="module")
def pg_server():
    """PostgreSQL and Prefect's server on it (tests/pool_machines.py::prefect_pg_server)."""
    with prefect_pg_server() as server:
        yield server


def _swarm_evo(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "swarm_evo.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


async def _automations(server: dict, name: str):
    from prefect.client.orchestration import PrefectClient

    async with PrefectClient(server["api_url"], auth_string=server["env"]["PREFECT_API_AUTH_STRING"]) as client:
        return await client.read_automations_by_name(name), await client.read_work_pools()


@pytest.mark.slow
def test_server_runs_on_postgresql_and_its_script_is_idempotent(pg_server):
    again = subprocess.run(["bash", str(SCRIPT), "--postgres-only"], env=pg_server["env"], capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert "creating" not in again.stdout and "created" not in again.stdout, again.stdout  # found, not remade
    assert "postgresql+asyncpg://prefect:" in again.stdout
    out = (pg_server["dir"] / "server.out").read_text()
    assert f"PREFECT_API_URL={pg_server['api_url']}" in out
    assert (pg_server["dir"] / "postgres" / "PG_VERSION").is_file()
    assert oct((pg_server["dir"] / "prefect-password").stat().st_mode & 0o777) == "0o600"
    user, _, password = pg_server["env"]["PREFECT_API_AUTH_STRING"].partition(":")
    assert httpx.get(f"{pg_server['api_url']}/admin/version", auth=(user, password), timeout=10).status_code == 200


def _cmdlines_with(secrets: list[str]) -> list[str]:
    """Command lines of every process now (``/proc/*/cmdline``) that hold one of ``secrets``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        found += [text for secret in secrets if secret in text]
    return found


@pytest.mark.slow
def test_the_server_answers_only_with_its_credentials_and_no_secret_is_on_a_command_line(pg_server):
    """Issue 42, item 3: the API refuses requests without the generated credentials (health and
    readiness probes aside); the credentials and the database password sit in mode-600 files and
    never on a command line (``/proc/*/cmdline``, watched while the script sets the role's password
    again and while the server runs); a client with PREFECT_API_AUTH_STRING works, one without fails."""
    api, env, state = pg_server["api_url"], pg_server["env"], pg_server["dir"]
    auth = (state / "prefect-api-auth").read_text().strip()
    password = (state / "prefect-password").read_text().strip()
    assert env["PREFECT_API_AUTH_STRING"] == auth and auth.startswith("swarm-evo:") and len(auth) > 40
    for name in ("prefect-api-auth", "prefect-password"):
        assert oct((state / name).stat().st_mode & 0o777) == "0o600", name
    user, _, secret = auth.partition(":")
    assert httpx.get(f"{api}/health", timeout=10).status_code == 200  # probes stay open
    assert httpx.get(f"{api}/admin/version", timeout=10).status_code == 401
    assert httpx.post(f"{api}/flow_runs/filter", json={}, timeout=10).status_code == 401
    assert httpx.post(f"{api}/block_documents/filter", json={"include_secrets": True}, timeout=10).status_code == 401
    assert httpx.get(f"{api}/admin/version", auth=(user, "wrong"), timeout=10).status_code == 401
    assert httpx.get(f"{api}/admin/version", auth=(user, secret), timeout=10).status_code == 200
    prefect = str(Path(sys.executable).parent / "prefect")
    without = {k: v for k, v in env.items() if k != "PREFECT_API_AUTH_STRING"}
    refused = subprocess.run([prefect, "work-pool", "ls"], env=without, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "401" in refused.stdout + refused.stderr, refused.stdout + refused.stderr
    allowed = subprocess.run([prefect, "work-pool", "ls"], env=env, capture_output=True, text=True, timeout=120)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    seen: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.extend(_cmdlines_with([auth, secret, password]))
            time.sleep(0.001)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:  # the role's password is set again (ALTER ROLE through psql) every time the script runs
        again = subprocess.run(["bash", str(SCRIPT), "--postgres-only"], env=env, capture_output=True, text=True,
                               timeout=60)
    finally:
        done.set()
        watcher.join()
    assert again.returncode == 0, again.stderr
    assert not seen and not _cmdlines_with([auth, secret, password]), f"a secret on a command line: {seen[:3]}"
    out = (state / "server.out").read_text()
    assert secret not in out and password not in out
    assert f'export PREFECT_API_AUTH_STRING="$(cat {state / "prefect-api-auth"})"' in out


@pytest.mark.slow
def test_pool_setup_creates_the_pool_and_the_automation_once(pg_server):
    from flows.pool_setup import AUTOMATION_NAME, FINAL_EVENTS, HEARTBEAT_EVENT

    first = _swarm_evo(pg_server["env"], "pool", "setup", "--pool", "pool-a")
    assert first.returncode == 0, first.stderr
    assert "work pool pool-a (process): created" in first.stdout
    assert "Crashed): created" in first.stdout
    # the deployments carry their heartbeat frequency: a worker needs no variable for it (issue 40, item 1)
    assert (f"PREFECT_API_URL={pg_server['api_url']} PREFECT_API_AUTH_STRING=\"$(cat prefect-api-auth)\" "
            "prefect worker start --pool pool-a") in first.stdout
    assert pg_server["env"]["PREFECT_API_AUTH_STRING"] not in first.stdout, "the credentials are never printed"
    second = _swarm_evo(pg_server["env"], "pool", "setup", "--pool", "pool-a")
    assert second.returncode == 0, second.stderr
    assert "work pool pool-a (process): already exists" in second.stdout
    assert "Crashed): already exists" in second.stdout
    automations, pools = asyncio.run(_automations(pg_server, AUTOMATION_NAME))
    assert len(automations) == 1 and [p.name for p in pools].count("pool-a") == 1
    trigger = automations[0].trigger
    assert trigger.posture == "Proactive" and trigger.after == {HEARTBEAT_EVENT}
    assert trigger.expect == {HEARTBEAT_EVENT, *FINAL_EVENTS}
    assert trigger.for_each == {"prefect.resource.id"} and trigger.threshold == 1
    # this project's flow runs only, never the rest of the server (issue 40, item 1)
    assert trigger.match_related.root == {"prefect.resource.role": "tag", "prefect.resource.id": "prefect.tag.swarm-evo"}
    assert trigger.within.total_seconds() == 2 * HEARTBEAT
    assert [(a.type, a.state.value) for a in automations[0].actions] == [("change-flow-run-state", "CRASHED")]
    # bad input: one line, exit 2
    wrong_type = _swarm_evo(pg_server["env"], "pool", "setup", "--pool", "pool-a", "--type", "docker")
    assert wrong_type.returncode == 2 and "exists with type process" in wrong_type.stderr
    assert len(wrong_type.stderr.strip().splitlines()) == 1


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


PULL = textwrap.dedent("""
    import asyncio, json, os, sys
    import yaml
    from prefect.deployments.steps.core import run_steps
    from prefect.utilities.templating import apply_values

    config = yaml.safe_load(open(sys.argv[1]))
    [deployment] = [d for d in config["deployments"] if d["name"] == "pool"]
    steps = apply_values(deployment["pull"], dict(os.environ), remove_notset=False)  # what `prefect deploy` does
    output = asyncio.run(run_steps(steps))  # what a worker's flow run does before importing the entrypoint
    print(json.dumps({"directory": output["directory"], "steps": [next(iter(s)) for s in steps]}))
""")


@pytest.mark.slow
def test_the_pool_deployment_clones_the_pinned_commit_and_installs_it(pg_server, tmp_path):
    """The ``pool`` deployment's own pull steps (prefect.yaml), templated as ``prefect deploy`` does
    and run by Prefect's ``run_steps`` in a fresh working directory: ``git_clone`` of a ``file://``
    clone of this repository at the pinned commit (its HEAD; a later commit exists on its branch), then
    ``pip_install_requirements`` installing the clone (into a ``PIP_TARGET`` directory, without
    its dependencies, so that the test leaves the suite's environment alone)."""
    origin = tmp_path / "origin"
    # a whole clone: from a shallow repository, git_clone's `clone --filter=blob:none --no-checkout` + `fetch
    # origin SHA` hung (git 2.39, 300 s)
    subprocess.run(["git", "clone", "-q", f"file://{ROOT}", str(origin)], check=True, timeout=120)
    git = ["git", "-C", str(origin), "-c", "user.email=t@example.org", "-c", "user.name=t"]
    pinned = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (origin / "LATER.txt").write_text("a later commit\n")
    subprocess.run([*git, "add", "LATER.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "later"], check=True)

    work, target = tmp_path / "flow-run", tmp_path / "site"
    work.mkdir()
    env = dict(pg_server["env"], SWARM_EVO_GIT_URL=f"file://{origin}", SWARM_EVO_GIT_COMMIT=pinned,
               PIP_TARGET=str(target), PIP_NO_DEPS="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH")
    (tmp_path / "pull.py").write_text(PULL)
    proc = subprocess.run([sys.executable, str(tmp_path / "pull.py"), str(ROOT / "prefect.yaml")], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["steps"] == ["prefect.deployments.steps.git_clone", "prefect.deployments.steps.pip_install_requirements"]
    clone = work / out["directory"]
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    assert head.stdout.strip() == pinned
    assert (clone / "flows" / "two_phase_evo.py").is_file() and not (clone / "LATER.txt").exists()
    assert (target / "swarm_evo" / "__init__.py").is_file() and (target / "flows" / "two_phase_evo.py").is_file()


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
