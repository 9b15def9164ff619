"""A sweep on a pool of one worker vs two (issue 34): wall time, and the share that is the sweep's
own overhead.

The parts are the end-to-end test's (tests/test_many_machines.py): Prefect's server on
PostgreSQL, SeaweedFS as the store (data and runs), workers in mount namespaces of their own. The
sweep is ``swarm-evo sweep --deployment default --store s3://…`` over 2 competitions × 2 seeds ×
``--steps`` steps (offline model, 1 step at a time per run, one run per worker at a time).

Printed per pool size: the sweep command's wall time; ``busy``, the time at least one flow run of
the sweep was running (the union of the runs' start..end, from the API); ``runs``, the sum of
the runs' own durations; and ``overhead = 1 - busy / wall``: what the sweep costs beyond its
runs — its start and checks, the worker's polling (1 s), each flow run's process start-up and
pull step, the sweep's polling (1 s) and its reads of the store after each run.

Run: ``.venv/bin/python benchmarks/sweep_pool.py [--steps 6]`` (as root: ``unshare`` and tmpfs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from conftest import sampled_raw_dir  # noqa: E402
from object_store import SeaweedFS  # noqa: E402
from pool_machines import HEARTBEAT, deploy_default, kill_tree, prefect_pg_server, start_worker  # noqa: E402

COMPETITIONS = ("spaceship-titanic", "sklearn-wine")


async def _runs(server: dict, names: set[str], since: float):
    """The flow runs called ``names`` that started after ``since`` (epoch seconds): this sweep's
    (both sweeps have the same run names). ``server``: tests/pool_machines.py's (its API needs the credentials)."""
    from prefect.client.orchestration import PrefectClient

    async with PrefectClient(server["api_url"], auth_string=server["env"]["PREFECT_API_AUTH_STRING"]) as client:
        return [r for r in await client.read_flow_runs(limit=200)
                if r.name in names and r.start_time and r.start_time.timestamp() >= since]


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def one_sweep(workers: int, steps: int, work: Path, server: dict, seaweed: SeaweedFS, data: str) -> dict:
    env = dict(server["env"], **seaweed.env, PREFECT_FLOWS_HEARTBEAT_FREQUENCY=str(HEARTBEAT),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    scratch, cache = ROOT / "runs", work / f"cache-{workers}"
    for folder in (scratch, cache):
        folder.mkdir(parents=True, exist_ok=True)
    procs = [start_worker(f"bench-{workers}-{n}", dict(env, PREFECT_HOME=str(work / f"w{workers}-{n}"),
                                                         XDG_CACHE_HOME=str(cache), PREFECT_WORKER_QUERY_SECONDS="1",
                                                         PREFECT_WORKER_PREFETCH_SECONDS="1"),
                          [scratch, cache], work / f"worker-{workers}-{n}.log") for n in range(workers)]
    out = work / f"out-{workers}"
    try:
        time.sleep(3)
        started, since = time.monotonic(), time.time()
        done = subprocess.run(
            [sys.executable, "-m", "swarm_evo.cli", "sweep", "--deployment", "default", "--store",
             f"s3://bench/pool-{workers}", "--competitions", ",".join(COMPETITIONS), "--seeds", "2",
             "--max-steps", str(steps), "--data-dir", data, "--out", str(out), "--poll", "1",
             "--parallel-runs", str(workers), "--parallel-workers", "1"],
            env=dict(env, PREFECT_HOME=str(work / "sweep-home")), cwd=work, capture_output=True, text=True)
        wall = time.monotonic() - started
    finally:
        for proc in procs:
            kill_tree(proc)
    if done.returncode != 0:
        raise RuntimeError(done.stdout[-3000:] + done.stderr[-3000:])
    rows = [json.loads(line) for line in (out / "grading_reports.jsonl").read_text().splitlines()]
    names = {Path(r["run_dir"]).name for r in rows}
    runs = asyncio.run(_runs(server, names, since))
    spans = [(r.start_time.timestamp(), r.end_time.timestamp()) for r in runs if r.start_time and r.end_time]
    busy = _union(spans)
    return {"workers": workers, "runs": len(rows), "valid": sum(r["valid_submission"] for r in rows),
            "wall_s": round(wall, 1), "busy_s": round(busy, 1), "run_seconds_sum": round(sum(b - a for a, b in spans), 1),
            "overhead_share": round(1 - busy / wall, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    from swarm_evo.cli.store_data import prepare_to_store

    with tempfile.TemporaryDirectory(prefix="sweep-pool-") as tmp, prefect_pg_server() as server:
        work = Path(tmp)
        seaweed = SeaweedFS(work / "seaweedfs", buckets=("bench",)).start()
        try:
            os.environ.update(seaweed.env)
            data = "s3://bench/data"
            for competition_id in COMPETITIONS:
                prepare_to_store(competition_id, sampled_raw_dir(competition_id, work / "raw"), data)
            deploy_default(dict(server["env"], **seaweed.env))
            results = [one_sweep(n, args.steps, work, server, seaweed, data) for n in (1, 2)]
        finally:
            seaweed.stop()
    print(f"sweep of {len(COMPETITIONS)} competitions x 2 seeds x {args.steps} steps, store on SeaweedFS")
    for row in results:
        print(json.dumps(row))
    print(f"speed-up with two workers: {results[0]['wall_s'] / results[1]['wall_s']:.2f}x")


if __name__ == "__main__":
    main()
