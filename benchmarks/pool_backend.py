"""The pool backend (issue 52, item 4): per-execution overhead against the local backend, and the
throughput of sleep-bound programs on one worker against two.

The parts are the many-machines test's (tests/pool_machines.py): Prefect's server on PostgreSQL,
SeaweedFS as the run store (``--store DIR`` for a local folder instead), ``prefect worker``
processes in mount namespaces of their own, ``execute-program/default`` deployed from prefect.yaml.
The executions are made by :class:`flows.pool_sandbox.PoolSandbox` in this process, as a run's
steps make them.

Printed:

- ``overhead``: the median wall time of ``--runs`` executions of a 1-second program (one at a
  time) on the pool and on the local backend, and their difference (the pool's cost per
  execution: the flow run's creation, the worker's polling, the flow-run process's start, the
  store's round trips);
- ``throughput``: 16 programs that sleep 2 s, submitted at once, on 1 worker then on 2 (each
  worker takes ``--limit`` flow runs at once): wall time, executions per minute, the ratio.

Run: ``.venv/bin/python benchmarks/pool_backend.py [--runs 7] [--limit 4]`` (as root: ``unshare``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from object_store import SeaweedFS  # noqa: E402
from pool_machines import POOL, kill_tree, prefect_pg_server, start_worker  # noqa: E402

ONE_SECOND = "import time\ntime.sleep(1)\nprint('Validation metric: 1.0')\n"
TWO_SECONDS = "import time\ntime.sleep(2)\nprint('Validation metric: 2.0')\n"


def deploy(env: dict) -> None:
    """The work pool and ``execute-program/default``.

    Raises:
        RuntimeError: a command failed (its output in the message).
    """
    import subprocess

    for args in ([str(Path(sys.executable).parent / "prefect"), "work-pool", "create", POOL, "--type", "process"],
                 [str(Path(sys.executable).parent / "prefect"), "--no-prompt", "deploy", "-n",
                  "execute-program/default"]):
        done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=180)
        if done.returncode != 0 and "already exists" not in done.stdout + done.stderr:
            raise RuntimeError(f"{' '.join(args)}: {done.stdout[-2000:]} {done.stderr[-2000:]}")


def timed(sandbox, code: str, work: Path, public: Path, name: str) -> float:
    started = time.perf_counter()
    result = sandbox.execute(code, work / name, public, 60)
    if not result.ok:
        raise RuntimeError(f"{name}: {result.exc_type}: {result.exc_info}\n{result.term_out[-1000:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="executions of the 1-second program per backend")
    parser.add_argument("--limit", type=int, default=4, help="flow runs each worker takes at once")
    parser.add_argument("--programs", type=int, default=16, help="2-second programs of the throughput case")
    parser.add_argument("--store", help="a local folder as the run store (default: SeaweedFS, S3)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="swarm-evo-pool-bench-"))
    seaweed = None if args.store else SeaweedFS(tmp / "seaweedfs", buckets=("bench",)).start()
    workers = []
    try:
        with prefect_pg_server() as server:
            env = dict(server["env"], **(seaweed.env if seaweed else {}), OMP_NUM_THREADS="1")
            for key in ("PREFECT_API_URL", "PREFECT_API_AUTH_STRING", *(seaweed.env if seaweed else {})):
                os.environ[key] = env[key]
            store = args.store or f"s3://bench/pool-{time.time_ns()}"
            deploy(env)
            from flows.pool_sandbox import PoolSandbox
            from swarm_evo.config import RunConfig
            from swarm_evo.sandbox.factory import make_sandbox

            public = tmp / "public"
            public.mkdir()
            (public / "train.csv").write_text("a,b\n1,2\n")
            local = make_sandbox(RunConfig.model_validate({"sandbox": {"preload": []}}))
            pool = PoolSandbox(POOL, store, RunConfig().sandbox.model_dump(mode="json"), pool_wait=120)

            def worker(name: str):
                env_w = dict(env, PREFECT_HOME=str(tmp / f"{name}-home"), XDG_CACHE_HOME=str(tmp / f"{name}-cache"),
                             PREFECT_WORKER_QUERY_SECONDS="1", PREFECT_WORKER_PREFETCH_SECONDS="1",
                             SWARM_EVO_WORKER=name)
                workers.append(start_worker(name, env_w, [], tmp / f"{name}.log", limit=args.limit))

            worker("machine-1")
            timed(pool, ONE_SECOND, tmp, public, "warm-up")  # the data's upload, the worker's cache
            local_s = [timed(local, ONE_SECOND, tmp, public, f"local-{i}") for i in range(args.runs)]
            pool_s = [timed(pool, ONE_SECOND, tmp, public, f"pool-{i}") for i in range(args.runs)]
            lm, pm = statistics.median(local_s), statistics.median(pool_s)
            print(f"overhead: 1-second program, median of {args.runs}: local {lm:.2f} s, pool {pm:.2f} s, "
                  f"overhead {pm - lm:.2f} s per execution", flush=True)

            figures = {}
            for n in (1, 2):
                if n == 2:
                    worker("machine-2")
                    timed(pool, ONE_SECOND, tmp, public, "warm-up-2")
                started = time.perf_counter()
                with ThreadPoolExecutor(args.programs) as threads:
                    list(threads.map(lambda i: timed(pool, TWO_SECONDS, tmp, public, f"w{n}-{i}"),
                                     range(args.programs)))
                wall = time.perf_counter() - started
                figures[n] = wall
                print(f"throughput: {args.programs} 2-second programs on {n} worker(s) (--limit {args.limit}): "
                      f"{wall:.1f} s, {60 * args.programs / wall:.1f} executions/min", flush=True)
            print(f"throughput ratio 2 vs 1 workers: {figures[1] / figures[2]:.2f}x (goal >= 1.8x)")
    finally:
        for process in workers:
            kill_tree(process)
        if seaweed is not None:
            seaweed.stop()


if __name__ == "__main__":
    main()
