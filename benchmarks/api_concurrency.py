"""N concurrent flow runs against Prefect's server on PostgreSQL versus SQLite (issue 34, "Measure").

Starts each server as a user would — ``postgres``: ``deployments/start-prefect-server.sh`` (its
own PostgreSQL cluster in a temporary directory); ``sqlite``: ``prefect server start`` on a fresh
``PREFECT_HOME`` (Prefect's default SQLite file) — on free ports of 127.0.0.1, then starts
``--runs`` processes at once, each running a flow with ``--tasks`` short tasks (submitted together,
each logging a line) through Prefect's own client, as the runs of a sweep do. Per server it prints:
flow runs completed, client retries (Prefect's client logs "Another attempt will be made" for a
429/503 or a dropped connection, at DEBUG; counted in every run process), runs that failed or
raised, server log lines with errors ("database is locked", tracebacks; until the batch ends, as
the server's shutdown logs a CancelledError), and the wall time of the whole batch::

    python benchmarks/api_concurrency.py [--runs 8] [--tasks 40] [--servers postgres,sqlite]

Needs PostgreSQL's binaries (Debian's ``postgresql``); as root the cluster runs as ``postgres``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from pool_machines import child_env  # noqa: E402
from pool_machines import free_port as _free_port  # noqa: E402


def _env(home: Path, **extra: str) -> dict[str, str]:
    """tests/pool_machines.py::child_env without the repository on PYTHONPATH."""
    env = child_env(home, **extra)
    env.pop("PYTHONPATH")
    return env


ROOT = Path(__file__).resolve().parents[1]

RUN = textwrap.dedent("""
    import json, logging, sys, time
    from prefect import flow, task, get_run_logger

    retries = 0
    class Count(logging.Handler):
        def emit(self, record):
            global retries
            if "Another attempt will be made" in record.getMessage():
                retries += 1
    client_logger = logging.getLogger("prefect.client")
    client_logger.setLevel(logging.DEBUG)
    client_logger.addHandler(Count())

    @task
    def step(i: int) -> int:
        get_run_logger().info("step %s", i)
        return i * i

    @flow(name="api-concurrency")
    def many(n: int) -> int:
        return sum(f.result() for f in step.map(range(n)))

    started = time.perf_counter()
    try:
        state = many(int(sys.argv[1]), return_state=True)
        outcome = state.type.value
    except BaseException as exc:
        outcome = f"raised {type(exc).__name__}: {exc}"[:300]
    print("RESULT " + json.dumps({"outcome": outcome, "retries": retries, "seconds": time.perf_counter() - started}))
""")

ERROR_MARKS = ("database is locked", "Traceback", "ERROR")


def _start(kind: str, state: Path) -> tuple[subprocess.Popen, str, dict, Path]:
    port = _free_port()
    log = state / "server.log"
    if kind == "postgres":
        env = _env(state / "home", SWARM_EVO_SERVER_DIR=str(state), SWARM_EVO_PG_PORT=str(_free_port()),
                   SWARM_EVO_SERVER_HOST="127.0.0.1", SWARM_EVO_SERVER_PORT=str(port))
        cmd = ["bash", str(ROOT / "deployments" / "start-prefect-server.sh")]
    else:
        env = _env(state / "home")
        cmd = [str(Path(sys.executable).parent / "prefect"), "server", "start", "--host", "127.0.0.1",
               "--port", str(port)]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    api_url = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{api_url}/health", timeout=2).status_code == 200:
                return proc, api_url, env, log
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    raise SystemExit(f"{kind} server did not start: {log.read_text()[-2000:]}")


def measure(kind: str, runs: int, tasks: int) -> dict:
    """Start the ``kind`` server, run ``runs`` flow processes at once, stop the server; the counts."""
    state = Path(tempfile.mkdtemp(prefix=f"api-concurrency-{kind}-"))
    proc, api_url, env, log = _start(kind, state)
    script = state / "run.py"
    script.write_text(RUN)
    try:
        child_env = dict(env, PREFECT_API_URL=api_url)
        started = time.perf_counter()
        children = [subprocess.Popen([sys.executable, str(script), str(tasks)], env=child_env, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True) for _ in range(runs)]
        results = []
        for child in children:
            out, _ = child.communicate(timeout=900)
            lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
            results.append(json.loads(lines[-1][7:]) if lines else {"outcome": f"exit {child.returncode}",
                                                                     "retries": 0, "seconds": None})
        wall = time.perf_counter() - started
        server_log = log.read_text().splitlines()  # before the stop (its shutdown logs a CancelledError)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        if kind == "postgres":
            subprocess.run(["bash", str(ROOT / "deployments" / "start-prefect-server.sh"), "--stop"], env=env,
                           capture_output=True, timeout=60)
    error_lines = [line for line in server_log if any(mark in line for mark in ERROR_MARKS)]
    exceptions = sorted({line.split(":")[0] for line in server_log
                         if re.match(r"^[\w.]+(Error|Exception|Violation)\w*: ", line)})
    shutil.rmtree(state, ignore_errors=True)
    return {"server": kind, "runs": runs, "tasks_per_run": tasks,
            "completed": sum(r["outcome"] == "COMPLETED" for r in results),
            "not_completed": [r["outcome"] for r in results if r["outcome"] != "COMPLETED"],
            "client_retries": sum(r["retries"] for r in results), "server_error_lines": len(error_lines),
            "first_error_lines": [line[:200] for line in error_lines[:2]],
            "exceptions": exceptions,
            "wall_seconds": round(wall, 1),
            "slowest_run_seconds": round(max((r["seconds"] or 0) for r in results), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8, help="flow runs at once (processes)")
    parser.add_argument("--tasks", type=int, default=40, help="tasks per flow run")
    parser.add_argument("--servers", default="postgres,sqlite")
    args = parser.parse_args()
    for kind in args.servers.split(","):
        print(json.dumps(measure(kind, args.runs, args.tasks)), flush=True)


if __name__ == "__main__":
    main()
