"""The sweep outlives its driver (issue 40, item 9), with real parts: Prefect's server on PostgreSQL
(deployments/start-prefect-server.sh), an S3 store (SeaweedFS), ``prefect worker`` processes each
in a mount namespace of its own (tests/pool_machines.py), and real ``swarm-evo sweep`` processes.
Every run is circle-packing with the offline model, 3 steps (≈ 15 s): the sweep is under test.

- No worker: a run nobody picks up within ``--start-timeout`` is cancelled and reported so.
- ``swarm-evo sweep --deployment`` SIGKILLed mid-sweep while one of its runs is frozen (SIGSTOP),
  then started again with the same ``--out`` and ``--store``: it starts no run twice (the flow
  runs on the server are counted), waits for the run in flight, and cancels the frozen one once
  it is Running past ``--run-timeout`` and resumes it.
- The scheduled sweep (a flow run of ``benchmark-sweep/nightly``) SIGKILLed with its run: the
  restart automation sends the same sweep flow run back to the pool (never the run), the sweep
  goes on and resumes the crashed run once.

The server, the store and the deployments are shared by the module; each test starts its workers.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from object_store import SeaweedFS
from pool_machines import POOL, ROOT, kill_tree, start_worker
from test_pool_server import pg_server  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow  # a PostgreSQL server, a Prefect server, SeaweedFS, workers

BUCKET = "swarm-evo"
STEPS = 3
RUN_ARGS = ["--problems", "circle-packing", "--max-steps", str(STEPS), "--time-limit", "60", "--parallel-workers", "1",
            "--model", "offline", "--poll", "1"]


@pytest.fixture(scope="module")
def pool(pg_server, tmp_path_factory):  # noqa: F811
    """The work pool, ``two-phase-evo/default`` and ``benchmark-sweep/nightly`` deployed from the
    repository (prefect.yaml), SeaweedFS; ``{"env", "api_url", "tmp"}``. No zombie automation:
    the crashes here are processes the workers see die."""
    tmp = tmp_path_factory.mktemp("sweep-restart")
    seaweed = SeaweedFS(tmp / "seaweedfs", buckets=(BUCKET,)).start()
    patch = pytest.MonkeyPatch()
    try:
        for name, value in seaweed.env.items():
            patch.setenv(name, value)  # this process reads the store too (s3fs reads the standard variables)
        env = dict(pg_server["env"], **seaweed.env, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        prefect = str(Path(sys.executable).parent / "prefect")
        for args in ([prefect, "work-pool", "create", POOL, "--type", "process"],
                     [prefect, "--no-prompt", "deploy", "-n", "two-phase-evo/default", "-n", "benchmark-sweep/nightly"]):
            done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=180)
            assert done.returncode == 0, f"{args[1:]}: {done.stdout[-2000:]} {done.stderr[-2000:]}"
        (ROOT / "runs").mkdir(exist_ok=True)  # the workers' private scratch is mounted there
        yield {"env": env, "api_url": pg_server["api_url"], "tmp": tmp, "seaweed": seaweed}
    finally:
        patch.undo()
        seaweed.stop()
        # ROOT/runs stays (ignored by git): another module's workers may be mounting their scratch over it


@contextlib.contextmanager
def _workers(pool, tag: str, count: int = 2):
    """``count`` workers (limit 1 each), each with its own scratch (ROOT/runs), none seeing the tests' folders."""
    workers = []
    try:
        for n in range(count):
            env = dict(pool["env"], PREFECT_HOME=str(pool["tmp"] / f"{tag}-worker-{n}"), PREFECT_WORKER_QUERY_SECONDS="1",
                       PREFECT_WORKER_PREFETCH_SECONDS="1")
            workers.append(start_worker(f"{tag}-{n}", env, [ROOT / "runs", pool["tmp"]],
                                        pool["tmp"] / f"{tag}-worker-{n}.log"))
        yield workers
    finally:
        for worker in workers:
            kill_tree(worker)


def _sweep(pool, argv: list[str], log: Path) -> subprocess.Popen:
    env = dict(pool["env"], PREFECT_HOME=str(pool["tmp"] / "sweep-home"))
    with log.open("a") as fh:
        return subprocess.Popen([sys.executable, "-m", "swarm_evo.cli", "sweep", *argv], env=env, cwd=pool["tmp"],
                                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


def _server_settings(pool):
    """This process's Prefect settings for the module's server: its URL and credentials."""
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    return temporary_settings({PREFECT_API_URL: pool["api_url"],
                               PREFECT_API_AUTH_STRING: pool["env"]["PREFECT_API_AUTH_STRING"]})


def _client(pool):
    from prefect.client.orchestration import get_client

    @contextlib.contextmanager
    def client():
        with _server_settings(pool), get_client(sync_client=True) as c:
            yield c
    return client()


def _runs(pool, sweep_name: str) -> dict[str, list]:
    """The two-phase-evo flow runs of the sweep ``sweep_name`` (its store folder's name), by name."""
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    with _client(pool) as client:
        runs = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["two-phase-evo"])), limit=200)
    found: dict[str, list] = {}
    for run in runs:
        where = f"{run.parameters.get('run_dir', '')} {run.parameters.get('resume', '')}"
        if f"sweeps/{sweep_name}" in where:
            found.setdefault(run.name, []).append(run)
    return found


def _nodes(store_url: str, sweep_name: str, run_name: str) -> int:
    from swarm_evo.store import open_store

    run = open_store(store_url).child("sweeps", sweep_name).run(run_name)
    run.fs.invalidate_cache()
    try:
        return len(json.loads(run.fs.cat_file(run.path("journal.json")))["nodes"])
    except (FileNotFoundError, ValueError, KeyError):
        return 0


def _flow_process(flow_run_id) -> psutil.Process | None:
    """The process running flow run ``flow_run_id`` (the worker passes the id in its environment)."""
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.environ().get("PREFECT__FLOW_RUN_ID") == str(flow_run_id):
                return process
    return None


def _wait(condition, timeout: float, what: str, logs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2500:]}" for p in logs if p.exists())
    pytest.fail(f"{what}: not within {timeout:.0f} s\n{tails}")


def test_a_run_no_worker_takes_is_reported_after_the_start_timeout(pool):
    out = pool["tmp"] / "idle"
    log = pool["tmp"] / "idle.log"
    started = time.monotonic()
    sweep = _sweep(pool, ["--deployment", "default", "--store", f"s3://{BUCKET}/idle", "--out", str(out), "--seeds",
                          "1", "--start-timeout", "3", *RUN_ARGS], log)
    assert sweep.wait(timeout=120) == 1, log.read_text()[-3000:]
    (row,) = [json.loads(line) for line in (out / "problem_reports.jsonl").read_text().splitlines()]
    assert "not picked up by any worker of swarm-evo-process within 3 s" in row["error"], row
    assert f"prefect worker start --pool {POOL}" in row["error"]
    ((name, (run,)),) = _runs(pool, out.name).items()
    assert name == "circle-packing-two_phase-s0"
    assert run.state.is_cancelled(), run.state  # no worker runs it later
    print(f"reported {time.monotonic() - started:.0f} s after the sweep started")


def _has_journal(store_url: str, sweep_name: str, run_name: str) -> bool:
    """Whether the store holds the run's journal (the mirror's first sync: the run can be resumed)."""
    from swarm_evo.store import open_store

    run = open_store(store_url).child("sweeps", sweep_name).run(run_name)
    run.fs.invalidate_cache()
    return run.fs.exists(run.path("journal.json"))


def _one_each(runs: dict[str, list], *names: str) -> None:
    """Each of ``names`` is one flow run, and there is no other (no run started twice)."""
    assert sorted((name, len(found)) for name, found in runs.items()) == sorted((name, 1) for name in names), \
        {name: [(r.id, r.state.name) for r in found] for name, found in runs.items()}


def test_a_sweep_killed_and_started_again_starts_no_run_twice_and_resumes_a_frozen_run(pool):
    """The driver SIGKILLed while its run s0 is frozen (SIGSTOP) and s1 runs; started again with the
    same --out and --store: s1 is waited for, s0 is cancelled once Running past --run-timeout and
    resumed (the frozen process is let go once the cancel is asked, so the worker's SIGTERM ends it
    at once instead of after the worker's 30 s grace); every flow run name once on the server."""
    from flows._sweep_deployment import TIMEOUT_MARK

    store = f"s3://{BUCKET}/killed"
    out = pool["tmp"] / "killed"
    log = pool["tmp"] / "killed.log"
    argv = ["--deployment", "default", "--store", store, "--out", str(out), "--seeds", "2", "--run-timeout", "45",
            *RUN_ARGS]
    s0, s1 = "circle-packing-two_phase-s0", "circle-packing-two_phase-s1"
    with _workers(pool, "killed"), _client(pool) as client:
        logs = [log, *(pool["tmp"] / f"killed-worker-{n}.log" for n in range(2))]
        first = _sweep(pool, argv, log)
        _wait(lambda: _has_journal(store, out.name, s0) and len(_runs(pool, out.name)) == 2, 180,
              "the sweep's two runs going", logs)
        (run0,) = _runs(pool, out.name)[s0]
        frozen = _flow_process(run0.id)
        frozen.suspend()  # SIGSTOP: Running for ever, as on a hung machine
        os.killpg(first.pid, signal.SIGKILL)  # the driver
        first.wait()
        with log.open("a") as fh:
            fh.write("\n=== the sweep again ===\n")
        again = _sweep(pool, argv, log)
        _wait(lambda: client.read_flow_run(run0.id).state.is_cancelling(), 180, "the frozen run cancelled", logs)
        frozen.resume()
        assert again.wait(timeout=300) == 0, log.read_text()[-4000:]
        runs = _runs(pool, out.name)
        run0_states = client.read_flow_run_states(run0.id)
    resumes = sorted(name for name in runs if name.startswith(f"{s0}-resume"))
    _one_each(runs, s0, s1, *resumes)
    assert resumes[:1] == [f"{s0}-resume1"], resumes  # (a busy machine may time a resume out too)
    assert any((s.message or "").startswith(TIMEOUT_MARK) for s in run0_states), [s.message for s in run0_states]
    last = runs[resumes[-1]][0]
    assert last.state.is_completed() and last.parameters["resume"].endswith(f"/sweeps/{out.name}/runs/{s0}")
    rows = {Path(r["run_dir"]).name: r for r in map(json.loads, (out / "problem_reports.jsonl").read_text().splitlines())}
    assert set(rows) == {s0, s1} and all(r["valid"] and r["error"] is None for r in rows.values()), rows
    assert rows[s0]["resumes"] == len(resumes)
    assert rows[s1]["resumes"] == len([n for n in runs if n.startswith(f"{s1}-resume")])
    assert _nodes(store, out.name, s0) == STEPS


def test_a_crashed_scheduled_sweep_is_restarted_and_goes_on(pool):
    """A flow run of benchmark-sweep/nightly and its run's process SIGKILLed: the workers report
    both Crashed; the restart automation sends the same sweep flow run back to the pool (after
    RESTART_DELAY), never the crashed two-phase-evo run; the sweep resumes that run once."""
    from flows._sweep_restart import RESTART_STATE, default_flow_out_dir, ensure_restart_automation

    store = f"s3://{BUCKET}/nightly"
    s0 = "circle-packing-two_phase-s0"
    parameters = dict(competitions=None, problems=["circle-packing"], seeds=1, max_steps=STEPS, time_limit=60,
                      parallel_workers=1, store=store, deployment="default", poll_interval=1, model="offline")
    with _workers(pool, "nightly"), _client(pool) as client:
        logs = [pool["tmp"] / f"nightly-worker-{n}.log" for n in range(2)]
        deployment = client.read_deployment_by_name("benchmark-sweep/nightly")
        sweep_run = client.create_flow_run_from_deployment(deployment.id, parameters=parameters)
        sweep_name = default_flow_out_dir(sweep_run).name
        _wait(lambda: _has_journal(store, sweep_name, s0) and _runs(pool, sweep_name).get(s0), 240,
              "the scheduled sweep's run going", logs)
        (run0,) = _runs(pool, sweep_name)[s0]
        _flow_process(sweep_run.id).kill()
        _flow_process(run0.id).kill()
        _wait(lambda: client.read_flow_run(sweep_run.id).state.is_final()
              and client.read_flow_run(sweep_run.id).run_count >= 2, 300, "the sweep restarted and finished", logs)
        sweep_run = client.read_flow_run(sweep_run.id)
        history = [s.name for s in client.read_flow_run_states(sweep_run.id)]
        run0_history = [s.name for s in client.read_flow_run_states(run0.id)]
        runs = _runs(pool, sweep_name)
    assert sweep_run.state.is_completed(), (sweep_run.state, history)
    assert "Crashed" in history and RESTART_STATE in history and sweep_run.run_count == 2, history
    with _server_settings(pool):
        assert ensure_restart_automation() == "found"  # made by the sweep's first run, once
    _one_each(runs, s0, f"{s0}-resume1")
    assert runs[s0][0].state.is_crashed() and RESTART_STATE not in run0_history, run0_history
    from swarm_evo.store import open_store

    location = open_store(store).child("sweeps", sweep_name)
    (row,) = map(json.loads, location.fs.cat_file(location.path("problem_reports.jsonl")).decode().splitlines())
    assert row["valid"] and row["error"] is None and row["resumes"] == 1, row
    assert _nodes(store, sweep_name, s0) == STEPS
