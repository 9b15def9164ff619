"""Many machines on one machine (issues 34 and 40), with real parts: Prefect's server on PostgreSQL
(deployments/start-prefect-server.sh), an S3 store (SeaweedFS), and ``prefect worker`` processes,
each in a mount namespace of its own (``unshare -m``) with a private tmpfs over the scratch run
directories, the data cache and the sweep's output folder, so that none sees another's files nor
the sweep's: "machines" with no shared disk. The competitions are prepared into the store and
every worker reads them through its own cache. The workers are started as the docs say, with no
heartbeat variable: the deployments carry it (issue 40, item 1).

One ordinary bad day, all at once:

- ``swarm-evo sweep --deployment default --store s3://…`` runs 2 competitions × 2 seeds × 6 steps
  (120 s each at most) on the workers;
- machine 1 freezes (SIGSTOP of its flow-run processes) in the middle of a run: the automation of
  ``swarm-evo pool setup`` declares it dead, the sweep resumes it from the store on another
  worker, and when the resumed copy has moved on, machine 1 thaws (SIGCONT): it learns it was
  superseded, uploads nothing more and stops; the store's journal is one history (item 2);
- machine 2 dies (SIGKILL of the worker and its runs): its run turns Crashed within two heartbeat
  intervals + 10 s and is resumed once;
- a deployment run against a slow model (a stand-in server answering after seconds) lives 5
  minutes and ends Completed, and a flow of another team on the same server (untagged, Prefect's
  default heartbeats) is never touched (item 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import psutil
import pytest
import yaml
from conftest import sampled_raw_dir
from llm_server.app import StandInServer
from llm_server.scenarios import TIDY
from object_store import SeaweedFS
from pool_machines import (
    FOREIGN_FLOW,
    HEARTBEAT,
    ROOT,
    deploy_default,
    flow_processes,
    kill_tree,
    seen_by,
    signal_all,
    start_worker,
)
from test_pool_server import pg_server  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow  # a PostgreSQL server, a Prefect server, SeaweedFS, four workers

BUCKET = "swarm-evo"
COMPETITIONS = ("spaceship-titanic", "sklearn-wine")  # one MLE-bench knows (its grading files), one it does not
STEPS = 6
TIME_LIMIT = 120  # s per run: the offline model sizes its programs to the quick tier (≈ 2-7 s each), as a
# real model sizes them to the budget its prompt states; 6 steps take ≈ 30 s on a busy 2-core machine
LONG_RUN = 300  # s: the slow model's deployment run (Prefect's default heartbeat, 180 s, would be ~65 s)
FOREIGN_SECONDS = 100  # another team's flow: longer than 2 intervals after its first heartbeat


def _store_json(fs, path: str):
    fs.invalidate_cache()
    return json.loads(fs.cat_file(path))


def _stored_ids(fs, path: str) -> list[str]:
    try:
        return [n["id"] for n in _store_json(fs, path)["nodes"]]
    except FileNotFoundError:
        return []


async def _flow_runs(server: dict):
    from prefect.client.orchestration import PrefectClient

    async with PrefectClient(server["api_url"], auth_string=server["env"]["PREFECT_API_AUTH_STRING"]) as client:
        return await client.read_flow_runs(limit=200)


async def _start_deployment_run(server: dict, parameters: dict, name: str):
    from prefect.client.orchestration import PrefectClient

    async with PrefectClient(server["api_url"], auth_string=server["env"]["PREFECT_API_AUTH_STRING"]) as client:
        deployment = await client.read_deployment_by_name("two-phase-evo/default")
        return await client.create_flow_run_from_deployment(deployment.id, parameters=parameters, name=name)


def _wait(condition, timeout: float, what: str, poll: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _a_run_with_two_nodes(worker, scratch: Path) -> str | None:
    for journal in seen_by(worker, scratch).glob("sweeps/*/runs/*/journal.json"):
        with contextlib.suppress(OSError, ValueError):
            if 2 <= len(json.loads(journal.read_text())["nodes"]) < STEPS:
                return journal.parent.name
    return None


def test_a_pool_survives_a_frozen_machine_a_dead_machine_and_a_slow_model(pg_server, tmp_path,  # noqa: F811
                                                                          monkeypatch):
    from prefect.client.schemas.objects import StateType

    from swarm_evo.cli.store_data import prepare_to_store
    from swarm_evo.competition import prepare_competition
    from swarm_evo.store import open_store

    seaweed = SeaweedFS(tmp_path / "seaweedfs", buckets=(BUCKET,)).start()
    for name, value in seaweed.env.items():
        monkeypatch.setenv(name, value)  # s3fs reads the standard variables
    store = f"s3://{BUCKET}/e2e-{time.time_ns()}"
    data = f"{store}/data"
    standin_data = tmp_path / "standin-data"
    prepare_competition("sklearn-wine", None, standin_data)  # what the slow model's brain reads
    model = StandInServer(standin_data, TIDY.with_(latency=8.0)).start()
    workers: dict[str, subprocess.Popen] = {}
    foreign = None
    try:
        for competition_id in COMPETITIONS:  # spaceship-titanic on conftest.TEST_ROWS of its real rows
            prepare_to_store(competition_id, sampled_raw_dir(competition_id, tmp_path / "raw"), data)
        env = dict(pg_server["env"], **seaweed.env, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   MKL_NUM_THREADS="1", OPENAI_API_KEY="stand-in-key")
        assert not any(k.startswith("PREFECT_FLOWS_HEARTBEAT") for k in env), "workers start as the docs say"
        deploy_default(env)

        scratch = ROOT / "runs"  # runs of a store sweep work in runs/sweeps/... under the flow's directory
        cache, out = tmp_path / "cache", tmp_path / "out"
        for folder in (scratch, cache, out):
            folder.mkdir(parents=True, exist_ok=True)

        def worker(name: str, limit: int = 1) -> subprocess.Popen:
            worker_env = dict(env, PREFECT_HOME=str(tmp_path / f"{name}-home"), XDG_CACHE_HOME=str(cache),
                              PREFECT_WORKER_QUERY_SECONDS="1", PREFECT_WORKER_PREFETCH_SECONDS="1")
            workers[name] = start_worker(name, worker_env, [scratch, cache, out], tmp_path / f"{name}.log", limit)
            return workers[name]

        # another team's flow on the same server, and a deployment run of ours against a slow model
        foreign_env = {k: v for k, v in pg_server["env"].items() if not k.startswith("PREFECT_FLOWS_HEARTBEAT")}
        foreign = subprocess.Popen([sys.executable, "-c", FOREIGN_FLOW, str(FOREIGN_SECONDS)], env=foreign_env,
                                   cwd=tmp_path, stdout=(tmp_path / "foreign.log").open("w"), stderr=subprocess.STDOUT)
        config = tmp_path / "slow-model.yaml"
        config.write_text(yaml.safe_dump({"model": {"api_base": model.openai_base, "timeout": 60, "num_retries": 1}}))
        worker("machine-3")
        long_run = asyncio.run(_start_deployment_run(pg_server, dict(
            competition_id="sklearn-wine", data_dir=data, model="openai/stand-in", config_path=str(config),
            max_steps=200, time_limit=LONG_RUN, parallel_workers=1), "slow-model-run"))
        long_started = time.monotonic()
        long_pid = _wait(lambda: next((p.pid for p in flow_processes(workers["machine-3"])
                                       if "PREFECT__FLOW_RUN_ID" in p.environ()), None), 120, "the slow run's process")
        assert psutil.Process(long_pid).environ().get("PREFECT_FLOWS_HEARTBEAT_FREQUENCY") == str(HEARTBEAT), \
            "the deployment's job variables carry the heartbeat frequency"

        for name in ("machine-1", "machine-2"):
            worker(name)
        worker("machine-4", limit=2)
        time.sleep(3)
        probe = "nobody-else-sees-this"
        (seen_by(workers["machine-1"], scratch) / probe).write_text("1")  # machine 1's scratch is its own
        assert not (seen_by(workers["machine-2"], scratch) / probe).exists() and not (scratch / probe).exists()

        sweep_log = tmp_path / "sweep.log"
        with sweep_log.open("w") as fh:
            sweep = subprocess.Popen(
                [sys.executable, "-m", "swarm_evo.cli", "sweep", "--deployment", "default", "--store", store,
                 "--competitions", ",".join(COMPETITIONS), "--seeds", "2", "--max-steps", str(STEPS),
                 "--time-limit", str(TIME_LIMIT), "--data-dir", str(data), "--out", str(out), "--poll", "1",
                 "--parallel-runs", "4", "--parallel-workers", "1"],
                env=dict(env, PREFECT_HOME=str(tmp_path / "sweep-home")), cwd=tmp_path, stdout=fh,
                stderr=subprocess.STDOUT)
        sweep_started = time.monotonic()
        sweep_store = open_store(store).child("sweeps", out.name)
        fs = sweep_store.fs

        # machine 1 freezes in the middle of a run; machine 2 dies in the middle of one
        frozen_run = _wait(lambda: _a_run_with_two_nodes(workers["machine-1"], scratch), 300, "a run on machine 1")
        frozen = flow_processes(workers["machine-1"])
        signal_all(frozen, signal.SIGSTOP)
        frozen_journal = sweep_store.run(frozen_run).path("journal.json")
        at_freeze = _stored_ids(fs, frozen_journal)
        killed_run = _wait(lambda: _a_run_with_two_nodes(workers["machine-2"], scratch), 300, "a run on machine 2")
        killed_at = datetime.now(timezone.utc)
        assert kill_tree(workers.pop("machine-2"))

        # the frozen run is resumed elsewhere; once the resumed copy has moved on, machine 1 thaws
        def moved_on():
            lease = _store_json(fs, sweep_store.run(frozen_run).path("lease.json"))
            ids = _stored_ids(fs, frozen_journal)
            return lease["generation"] == 2 and len(ids) > len(at_freeze) and ids
        at_thaw = _wait(moved_on, 400, "the resumed copy of the frozen run to append a node", poll=1)
        listing_at_thaw = set(fs.find(sweep_store.run(frozen_run).root))
        frozen_names = []  # for the message below; a program that ended just before the freeze is a zombie
        for p in frozen:
            with contextlib.suppress(psutil.Error):
                frozen_names.append(" ".join(p.cmdline()[:4]))
        thawed_at = datetime.now(timezone.utc)
        signal_all(frozen, signal.SIGCONT)
        _wait(lambda: not [p for p in frozen if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], 180,
              "the superseded copy to stop", poll=1)
        old_nodes = [n["id"] for j in seen_by(workers["machine-1"], scratch).glob(f"sweeps/*/runs/{frozen_run}/journal.json")
                     for n in json.loads(j.read_text())["nodes"]]
        machine_1_log = (tmp_path / "machine-1.log").read_text()
        assert "superseded by flow run" in machine_1_log and f"({frozen_run}-resume1)" in machine_1_log, \
            machine_1_log[-4000:]

        assert sweep.wait(timeout=900) == 0, sweep_log.read_text()[-5000:]
        sweep_seconds = time.monotonic() - sweep_started
        long_state = _wait(lambda: next((r.state for r in asyncio.run(_flow_runs(pg_server))
                                         if r.id == long_run.id and r.state.is_final()), None),
                           LONG_RUN + 300, "the slow model's run to end", poll=5)
        long_seconds = time.monotonic() - long_started
        assert foreign.wait(timeout=120) == 0, (tmp_path / "foreign.log").read_text()[-3000:]
    finally:
        for process in workers.values():
            kill_tree(process)
        if foreign is not None and foreign.poll() is None:
            foreign.kill()
        model.stop()  # ROOT/runs stays (ignored by git): other pool tests may be mounting workers' scratch over it

    try:
        # item 1: live runs are never declared dead; the rest of the server is never watched
        runs = asyncio.run(_flow_runs(pg_server))
        assert long_state.type == StateType.COMPLETED and long_seconds >= LONG_RUN, (long_state, long_seconds)
        (theirs,) = [r for r in runs if r.parameters == {"seconds": float(FOREIGN_SECONDS)}]
        assert theirs.state.is_completed(), theirs.state
        crashed = sorted(r.name for r in runs if r.state.is_crashed())
        assert killed_run in crashed and set(crashed) <= {frozen_run, killed_run}, crashed  # the victims only
        (thawed,) = [r for r in runs if r.name == frozen_run]  # Crashed, or Failed once it thawed and stopped
        assert thawed.state.is_crashed() or "superseded by flow run" in (thawed.state.message or ""), thawed.state

        # the dead machine's run: Crashed within two intervals + 10 s, resumed once
        (dead,) = [r for r in runs if r.name == killed_run]
        assert "no heartbeat" in dead.state.message, dead.state
        crashed_after = (dead.state.timestamp - killed_at).total_seconds()
        assert crashed_after <= 2 * HEARTBEAT + 10, crashed_after
        for victim in (frozen_run, killed_run):
            (resumed,) = [r for r in runs if r.name == f"{victim}-resume1"]
            assert resumed.state.is_completed() and resumed.parameters["resume"] == sweep_store.run(victim).url

        # item 2: the frozen copy uploaded nothing after it thawed; the store's journal is one history
        final = _stored_ids(fs, frozen_journal)
        assert final[:len(at_freeze)] == at_freeze and final[:len(at_thaw)] == at_thaw and len(final) == STEPS
        assert _store_json(fs, sweep_store.run(frozen_run).path("lease.json"))["generation"] == 2
        extra = {p for p in fs.find(sweep_store.run(frozen_run).root) if "/nodes/" in p} - listing_at_thaw
        final_nodes = {f"/nodes/{i}/" for i in final}
        strays = sorted(p for p in extra if not any(n in p for n in final_nodes))
        # what no lease check stops (swarm_evo.store.mirror): the one upload whose check came before the freeze
        # (in flight, or next) lands as the machine thaws: one file of a node of the old copy; never its journal,
        # which S3 itself refuses (If-Match: swarm_evo/store/conditional.py)
        landed = [fs.info(p).get("LastModified") for p in strays]
        assert len(strays) <= 1 and all(any(f"/nodes/{i}/" in p for i in old_nodes) for p in strays) and all(
            t is not None and (t - thawed_at).total_seconds() <= 10 for t in landed), (f"thawed at {thawed_at}; frozen: {frozen_names}; old copy's nodes: {old_nodes}; "
                            + "; ".join(f"{p} {fs.info(p).get('LastModified')}" for p in strays))

        # every row valid and read from the store; every run whole there, no node twice
        rows = [json.loads(line) for line in (out / "grading_reports.jsonl").read_text().splitlines()]
        assert len(rows) == len(COMPETITIONS) * 2
        for row in rows:
            name = Path(row["run_dir"]).name
            assert row["valid_submission"] is True and row.get("error") is None, row
            assert row["run_url"] == sweep_store.run(name).url
            grade = _store_json(fs, sweep_store.run(name).path("grade_report.json"))
            local_copy = out / "runs" / name / "submission" / "submission.csv"  # fetched from the store
            assert row["submission_path"] == str(local_copy) and local_copy.read_bytes() == fs.cat_file(
                sweep_store.run(name).path("submission/submission.csv"))
            assert {k: v for k, v in row.items() if k in grade and k != "submission_path"} == {
                k: v for k, v in grade.items() if k != "submission_path"}
            nodes = _store_json(fs, sweep_store.run(name).path("journal.json"))["nodes"]
            assert [n["step"] for n in nodes] == list(range(1, STEPS + 1)), (name, len(nodes))
            assert len({n["id"] for n in nodes}) == STEPS  # none doubled
            for node in nodes:
                assert fs.exists(sweep_store.run(name).path(f"nodes/{node['id']}/solution.py"))
            assert row["resumes"] == (1 if name in (frozen_run, killed_run) else 0), (name, row["resumes"])
        assert not list((ROOT / "runs" / "sweeps").glob(f"{out.name}*")), "a worker wrote to the sweep machine's disk"
        assert not list(out.glob("runs/*/journal.json")), "the sweep's machine holds reports only"
        for name in ("grading_reports.jsonl", "summary.json", "mlebench_submissions.jsonl",
                     "mlebench_grading_report.json"):
            assert fs.cat_file(sweep_store.path(name)) == (out / name).read_bytes(), name
        known = [r for r in rows if r["competition_id"] == "spaceship-titanic"]
        report = json.loads((out / "mlebench_grading_report.json").read_text())  # MLE-bench's run-group report
        assert report["total_runs"] == len(known) == 2
        assert report["total_valid_submissions"] == sum(r["valid_submission"] for r in known)
        assert report["total_medals"] == sum(r["any_medal"] for r in known)
        for line in (out / "mlebench_submissions.jsonl").read_text().splitlines():  # `mlebench grade` input
            assert Path(json.loads(line)["submission_path"]).is_file()
        print(f"frozen {frozen_run} (ended {thawed.state.name}: {thawed.state.message}), killed {killed_run} "
              f"(Crashed {crashed_after:.0f} s after the kill); slow-model run {long_seconds:.0f} s, {long_state.name}; "
              f"sweep {sweep_seconds:.0f} s")
    finally:
        seaweed.stop()
